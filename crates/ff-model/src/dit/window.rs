//! [`KvWindow`]: a fixed-capacity, per-layer contiguous K/V buffer that a sequence of forwards
//! reads and writes in place, so that no forward concatenates its context.
//!
//! The buffer of each layer is `[1, heads, slots·slot_tokens, head_dim]`, split into equal slots
//! (one latent frame each, typically). Entries published elsewhere (e.g. clean anchor K/V) are
//! copied into slots once with [`KvWindow::write`]. [`KvWindow::attend`] names the slots the next
//! forward reads and the slots its own K/V goes into; that forward writes its own K/V there
//! *during* the forward (the write is its publication: the slots are history for later forwards)
//! and attends over the named slots through a [`BlockTable`] whose key frames are the slots, so
//! stale or unused slots are never read and never masked. Which slot holds what is the caller's
//! choice (e.g. a ring of history chunks); attention is permutation-invariant over keys. On
//! backends that update uniquely held tensors in place (NdArray, CubeCL), each forward copies
//! only its own tokens.

use super::kv::{ChunkKv, Keys, KvContext, LayerKv, check_entry};
use crate::error::{ModelError, Result};
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::BlockTable;
use std::ops::Range;
use std::sync::Mutex;

/// A per-layer contiguous K/V window of `slots` slots of `slot_tokens` tokens (batch 1).
pub struct KvWindow<B: Backend> {
    layers: Vec<Mutex<LayerKv<B>>>,
    slot_tokens: usize,
    slots: usize,
    /// Slots the next forward reads (its own target excluded).
    reads: Vec<Range<usize>>,
    /// Slots the next forward's own K/V goes into.
    target: Range<usize>,
}

impl<B: Backend> KvWindow<B> {
    /// A zeroed window; the next forward reads nothing and writes from slot 0.
    pub fn new(layers: usize, heads: usize, head_dim: usize, slot_tokens: usize, slots: usize, device: &B::Device) -> Self {
        let zeros = || Tensor::zeros([1, heads, slots * slot_tokens, head_dim], device);
        Self {
            layers: (0..layers).map(|_| Mutex::new(LayerKv { k: zeros(), v: zeros() })).collect(),
            slot_tokens,
            slots,
            reads: Vec::new(),
            target: 0..0,
        }
    }

    /// Slots of the window.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Bytes held by the window (fixed at creation).
    pub fn bytes(&self) -> usize {
        let l = self.layers[0].lock().expect("window lock");
        self.layers.len() * 2 * l.k.shape().num_elements() * l.k.dtype().size()
    }

    /// Slots `start..start + n` for `tokens` tokens, checked against the capacity.
    fn span(&self, start: usize, tokens: usize, what: &str) -> Result<Range<usize>> {
        let n = tokens / self.slot_tokens;
        if n * self.slot_tokens != tokens || start + n > self.slots {
            return Err(ModelError::Input(format!(
                "{what} of {tokens} tokens does not fill whole slots of {} tokens from slot {start} of {}",
                self.slot_tokens, self.slots
            )));
        }
        Ok(start..start + n)
    }

    /// Copies a published entry (batch 1, whole slots) into consecutive slots from `slot`.
    /// An entry of another shape (layers, batch, heads, head_dim) is an error.
    pub fn write(&mut self, slot: usize, kv: &ChunkKv<B>) -> Result<()> {
        let [batch, heads, _, head_dim] = self.layers[0].get_mut().expect("window lock").k.dims();
        check_entry(&format!("K/V entry for slot {slot}"), kv, self.layers.len(), batch, heads, head_dim)?;
        let slots = self.span(slot, kv.tokens(), "entry")?;
        let tokens = slots.start * self.slot_tokens..slots.end * self.slot_tokens;
        for (buffer, entry) in self.layers.iter_mut().zip(&kv.layers) {
            assign(buffer.get_mut().expect("window lock"), tokens.clone(), entry);
        }
        Ok(())
    }

    /// The next forward reads the slots `reads` and writes its own K/V of `frames` slots from
    /// slot `target`; the read slots must not overlap the target's.
    pub fn attend(&mut self, reads: impl IntoIterator<Item = Range<usize>>, target: usize, frames: usize) -> Result<()> {
        let reads: Vec<Range<usize>> = reads.into_iter().collect();
        let target = self.span(target, frames * self.slot_tokens, "own K/V")?;
        if let Some(r) = reads.iter().find(|r| r.end > self.slots || (r.start < target.end && target.start < r.end)) {
            return Err(ModelError::Input(format!("read slots {r:?} overlap the target {target:?} or pass the {} slots", self.slots)));
        }
        self.reads = reads;
        self.target = target;
        Ok(())
    }

    /// Reads and target as a table: own tokens (one query frame) over the slots.
    fn table(&self, own_tokens: usize) -> BlockTable {
        let mut allowed: Vec<usize> = self.reads.iter().chain([&self.target]).flat_map(Clone::clone).collect();
        allowed.sort_unstable();
        BlockTable::from_rules(&[own_tokens], &vec![self.slot_tokens; self.slots], |_| allowed.iter().copied())
    }
}

fn assign<B: Backend>(buffer: &mut LayerKv<B>, range: Range<usize>, entry: &LayerKv<B>) {
    let [b, h, _, d] = buffer.k.dims();
    let slices = [0..b, 0..h, range, 0..d];
    // Move the buffers out so they are uniquely held and updated in place.
    let k = std::mem::replace(&mut buffer.k, entry.k.clone());
    let v = std::mem::replace(&mut buffer.v, entry.v.clone());
    buffer.k = k.slice_assign(slices.clone(), entry.k.clone());
    buffer.v = v.slice_assign(slices, entry.v.clone());
}

impl<B: Backend> KvContext<B> for KvWindow<B> {
    /// Panics when `own` is not the batch-1 K/V of the frames named by [`KvWindow::attend`].
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Vec<Keys<B>> {
        let tokens = self.target.start * self.slot_tokens..self.target.end * self.slot_tokens;
        assert_eq!((own.k.dims()[0], own.tokens()), (1, tokens.len()), "own K/V (batch, tokens) differ from the window's target");
        let mut buffer = self.layers[layer].lock().expect("window lock");
        assign(&mut buffer, tokens, own);
        vec![Keys { batch: 0..1, kv: buffer.clone(), table: self.table(own.tokens()) }]
    }

    fn check(&self, layers: usize, batch: usize, heads: usize, head_dim: usize) -> Result<()> {
        let [b, h, _, d] = self.layers[0].lock().expect("window lock").k.dims();
        if self.layers.len() != layers || [b, h, d] != [batch, heads, head_dim] {
            return Err(ModelError::Input(format!(
                "K/V window of {} layers × [{b}, {h}, _, {d}] does not fit a forward of {layers} layers × [{batch}, {heads}, _, {head_dim}]",
                self.layers.len()
            )));
        }
        Ok(())
    }
}
