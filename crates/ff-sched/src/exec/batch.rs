//! [`BatchContext`]: the attention context of independent nodes run as one batch
//! (`WanDit::forward_chunks`): batch element `b` reads the entries of node `b`, concatenated in
//! read order, then its own K/V — the same keys in the same order as that node's own forward.
//! The batched executor groups nodes by context size, so no element needs padding (padded keys
//! would change the float summation order and break bit-identity with the serial executor).

use crate::error::{Result, SchedError};
use ff_model::AttentionBackend;
use ff_model::dit::{ChunkKv, Keys, KvContext, LayerKv};

pub(super) struct BatchContext<'a, B: AttentionBackend> {
    reads: &'a [Vec<&'a ChunkKv<B>>],
}

impl<'a, B: AttentionBackend> BatchContext<'a, B> {
    /// `reads[b]` are the entries node `b` reads; every node must read as many tokens.
    pub fn new(reads: &'a [Vec<&'a ChunkKv<B>>], first_node: usize) -> Result<Self> {
        let tokens = |r: &Vec<&ChunkKv<B>>| r.iter().map(|e| e.tokens()).sum::<usize>();
        match reads.first().map(tokens) {
            Some(n) if reads.iter().any(|r| tokens(r) != n) => {
                Err(SchedError::Worker { worker: 0, reason: format!("batch at node {first_node} mixes context lengths") })
            }
            _ => Ok(Self { reads }),
        }
    }
}

impl<B: AttentionBackend> KvContext<B> for BatchContext<'_, B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Keys<B> {
        if self.reads.iter().all(Vec::is_empty) {
            return Keys { kv: own.clone(), mask: None };
        }
        let rows: Vec<LayerKv<B>> =
            self.reads.iter().map(|entries| LayerKv::cat(entries.iter().map(|e| e.layers[layer].clone()).collect())).collect();
        Keys { kv: LayerKv::cat(vec![LayerKv::stack(rows), own.clone()]), mask: None }
    }
}
