//! [`RendererContext`]: what one packed renderer stage forward reads besides itself: the anchor
//! bank `A` (one clean-endpoint K/V entry per anchor, `[1, heads, tokens_per_frame, head_dim]`
//! per layer). Keys are the bank's frames followed by the forward's own `L` frames; the block
//! table gives chunk `i` the frames of `Γ(i)`, of `Tail_H(i)` and of itself, read from the
//! inference [`Contract`] (frame-level rules, never a token mask).

use burn::tensor::backend::Backend;
use ff_model::dit::{ChunkKv, Keys, KvContext, LayerKv};
use ff_sched::Contract;
use kernels_cubecl::BlockTable;

/// The key context of one packed renderer stage forward: the anchor bank plus the forward's own
/// frames, with the contract's block table.
pub struct RendererContext<'a, B: Backend> {
    contract: &'a Contract,
    bank: &'a [ChunkKv<B>],
}

impl<'a, B: Backend> RendererContext<'a, B> {
    /// `bank[a]`: the entry of anchor index `a` (all anchors of the contract).
    pub fn new(contract: &'a Contract, bank: &'a [ChunkKv<B>]) -> Self {
        Self { contract, bank }
    }

    /// Key frames (bank frames `0..A`, own frames `A + p`) of each own frame `p`.
    fn rules(&self) -> Vec<Vec<usize>> {
        let c = self.contract;
        let anchors = self.bank.len();
        let mut rules = vec![Vec::new(); c.config.latents];
        for (i, chunk) in c.chunks.iter().enumerate() {
            let own = c.tail(i, c.config.history).flat_map(|h| c.chunks[h].clone()).chain(chunk.clone()).map(|p| anchors + p);
            let keys: Vec<usize> = c.window(i).chain(own).collect();
            for p in chunk.clone() {
                rules[p] = keys.clone();
            }
        }
        rules
    }
}

impl<B: Backend> KvContext<B> for RendererContext<'_, B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Vec<Keys<B>> {
        let frames = self.contract.config.latents;
        let per_frame = own.tokens() / frames;
        let mut parts: Vec<LayerKv<B>> = self.bank.iter().map(|e| e.layers[layer].clone()).collect();
        parts.push(own.clone());
        let rules = self.rules();
        let table = BlockTable::from_rules(&vec![per_frame; frames], &vec![per_frame; self.bank.len() + frames], |q| rules[q].clone());
        vec![Keys { batch: 0..own.k.dims()[0], kv: LayerKv::cat(parts), table }]
    }

    fn check(&self, layers: usize, _batch: usize, _heads: usize, _head_dim: usize) -> ff_model::Result<()> {
        match self.bank.iter().position(|e| e.layers.len() != layers) {
            Some(a) => Err(ff_model::ModelError::Input(format!(
                "anchor bank entry {a} has {} layers, the model {layers}",
                self.bank[a].layers.len()
            ))),
            None if self.bank.len() != self.contract.anchors.len() => Err(ff_model::ModelError::Input(format!(
                "anchor bank holds {} entries, the contract has {} anchors",
                self.bank.len(),
                self.contract.anchors.len()
            ))),
            None => Ok(()),
        }
    }
}
