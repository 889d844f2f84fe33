//! [`BatchContext`]: the attention context of independent nodes run as one batch
//! (`WanDit::forward_chunks`): batch element `b` reads the entries of node `b`, concatenated in
//! read order and zero-padded to the longest context, then its own K/V. The mask
//! `[batch, 1, query_tokens, key_tokens]` (true = masked) hides the padding only, so every node
//! attends to exactly the keys of its own forward.

use burn::tensor::{Bool, Tensor, TensorData, backend::Backend};
use ff_model::dit::{ChunkKv, Keys, KvContext, LayerKv};

pub(super) struct BatchContext<'a, B: Backend> {
    reads: &'a [Vec<&'a ChunkKv<B>>],
    /// Context tokens of the longest element.
    longest: usize,
    mask: Option<Tensor<B, 4, Bool>>,
}

impl<'a, B: Backend> BatchContext<'a, B> {
    /// `reads[b]` are the entries node `b` reads; each node has `query_tokens` own tokens.
    pub fn new(reads: &'a [Vec<&'a ChunkKv<B>>], query_tokens: usize, device: &B::Device) -> Self {
        let lens: Vec<usize> = reads.iter().map(|r| r.iter().map(|e| e.tokens()).sum()).collect();
        let longest = lens.iter().copied().max().unwrap_or(0);
        let keys = longest + query_tokens;
        let mask = lens.iter().any(|&n| n < longest).then(|| {
            let mut masked = vec![false; reads.len() * query_tokens * keys];
            for (b, &n) in lens.iter().enumerate() {
                for q in 0..query_tokens {
                    let row = (b * query_tokens + q) * keys;
                    masked[row + n..row + longest].fill(true);
                }
            }
            Tensor::from_data(TensorData::new(masked, [reads.len(), 1, query_tokens, keys]), device)
        });
        Self { reads, longest, mask }
    }
}

impl<B: Backend> KvContext<B> for BatchContext<'_, B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Keys<B> {
        if self.longest == 0 {
            return Keys { kv: own.clone(), mask: None };
        }
        let [_, heads, _, head_dim] = own.k.dims();
        let device = own.k.device();
        let rows: Vec<LayerKv<B>> = self
            .reads
            .iter()
            .map(|entries| {
                let mut parts: Vec<LayerKv<B>> = entries.iter().map(|e| e.layers[layer].clone()).collect();
                let pad = self.longest - parts.iter().map(LayerKv::tokens).sum::<usize>();
                if pad > 0 {
                    let zeros = Tensor::zeros([1, heads, pad, head_dim], &device);
                    parts.push(LayerKv { k: zeros.clone(), v: zeros });
                }
                LayerKv::cat(parts)
            })
            .collect();
        Keys { kv: LayerKv::cat(vec![LayerKv::stack(rows), own.clone()]), mask: self.mask.clone() }
    }
}
