//! [`BatchContext`]: the attention context of independent nodes run as one batch
//! (`WanDit::forward_chunks`): batch element `b` attends through node `b`'s own K/V window, or
//! to itself alone when the node reads nothing — the same keys in the same order, and the same
//! attention call, as that node's own forward. Elements may read contexts of different lengths:
//! nothing is padded or stacked (padded keys would change the float summation order and break
//! bit-identity with the serial executor).

use ff_model::AttentionBackend;
use ff_model::dit::{Keys, KvContext, KvWindow, LayerKv, SegmentContext};

pub(super) struct BatchContext<'a, B: AttentionBackend> {
    windows: Vec<Option<&'a KvWindow<B>>>,
}

impl<'a, B: AttentionBackend> BatchContext<'a, B> {
    /// `windows[b]`: the window of batch element `b` (distinct windows), `None` if it reads nothing.
    pub fn new(windows: Vec<Option<&'a KvWindow<B>>>) -> Self {
        Self { windows }
    }
}

impl<B: AttentionBackend> KvContext<B> for BatchContext<'_, B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Vec<Keys<B>> {
        let element = |b: usize| LayerKv { k: own.k.clone().narrow(0, b, 1), v: own.v.clone().narrow(0, b, 1) };
        let alone = SegmentContext::empty();
        self.windows
            .iter()
            .enumerate()
            .flat_map(|(b, w)| {
                let ctx: &dyn KvContext<B> = match w {
                    Some(w) => *w,
                    None => &alone,
                };
                ctx.keys(layer, &element(b)).into_iter().map(move |k| Keys { batch: b..b + 1, ..k })
            })
            .collect()
    }
}
