//! [`PackedContext`]: the attention context of several independent nodes packed into one forward.
//!
//! Keys are every distinct entry the nodes read (in first-read order), then the packed own K/V;
//! the mask `[1, 1, query_tokens, key_tokens]` (true = masked) lets each node's tokens see only
//! the entries it reads and its own frames, so each node attends exactly as in its own forward.

use burn::tensor::{Bool, Tensor, TensorData, backend::Backend};
use ff_model::dit::{ChunkKv, Keys, KvContext, LayerKv};

use crate::schedule::{KvKey, Node};

pub(super) struct PackedContext<'a, B: Backend> {
    segments: Vec<&'a ChunkKv<B>>,
    mask: Tensor<B, 4, Bool>,
}

impl<'a, B: Backend> PackedContext<'a, B> {
    /// `reads[j]` are the entries of `nodes[j].reads`; `tokens_per_frame` of the latents.
    pub fn new(nodes: &[&Node], reads: &[Vec<&'a ChunkKv<B>>], tokens_per_frame: usize, device: &B::Device) -> Self {
        let mut keys: Vec<KvKey> = Vec::new();
        let mut segments: Vec<&'a ChunkKv<B>> = Vec::new();
        for (node, entries) in nodes.iter().zip(reads) {
            for (key, entry) in node.reads.iter().zip(entries) {
                if !keys.contains(key) {
                    keys.push(*key);
                    segments.push(*entry);
                }
            }
        }
        let mut offsets = Vec::with_capacity(segments.len());
        let mut ctx_tokens = 0;
        for s in &segments {
            offsets.push(ctx_tokens..ctx_tokens + s.tokens());
            ctx_tokens += s.tokens();
        }
        let q_tokens: usize = nodes.iter().map(|n| n.positions.len()).sum::<usize>() * tokens_per_frame;
        let k_tokens = ctx_tokens + q_tokens;
        let mut masked = vec![true; q_tokens * k_tokens];
        let mut own = 0;
        for node in nodes {
            let rows = own..own + node.positions.len() * tokens_per_frame;
            let mut allowed: Vec<std::ops::Range<usize>> =
                node.reads.iter().map(|k| offsets[keys.iter().position(|x| x == k).expect("collected above")].clone()).collect();
            allowed.push(ctx_tokens + rows.start..ctx_tokens + rows.end);
            for r in rows.clone() {
                for cols in &allowed {
                    masked[r * k_tokens + cols.start..r * k_tokens + cols.end].fill(false);
                }
            }
            own = rows.end;
        }
        let mask = Tensor::from_data(TensorData::new(masked, [1, 1, q_tokens, k_tokens]), device);
        Self { segments, mask }
    }
}

impl<B: Backend> KvContext<B> for PackedContext<'_, B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Keys<B> {
        let mut parts: Vec<LayerKv<B>> = self.segments.iter().map(|s| s.layers[layer].clone()).collect();
        parts.push(own.clone());
        Keys { kv: LayerKv::cat(parts), mask: Some(self.mask.clone()) }
    }
}
