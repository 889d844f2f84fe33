//! [`KvWindow`]: a fixed-capacity, per-layer contiguous K/V buffer that a sequence of forwards
//! reads and writes in place, so that no forward concatenates its context.
//!
//! The buffer of each layer is `[batch, heads, slots·slot_tokens, head_dim]`, split into equal
//! slots (one latent chunk each). Entries published elsewhere (e.g. clean anchor K/V) are copied
//! into slots once with [`KvWindow::write`]; a forward's own K/V is written into the slot named
//! by [`KvWindow::set_target`] *during* the forward (that write is its publication: the slot is
//! history for the next forward), and attention reads the valid slots as a view of the buffer.
//! A ring of history slots is a caller's choice of targets (`i mod H+1`); attention is
//! permutation-invariant over keys, so slot order does not matter. On backends that update
//! uniquely held tensors in place (NdArray, CubeCL), each forward copies only its own tokens.

use super::kv::{ChunkKv, Keys, KvContext, LayerKv, check_entry};
use crate::error::{ModelError, Result};
use burn::tensor::{Bool, Tensor, TensorData, backend::Backend};
use std::sync::Mutex;

/// A per-layer contiguous K/V window of `slots` slots of `slot_tokens` tokens.
pub struct KvWindow<B: Backend> {
    layers: Vec<Mutex<LayerKv<B>>>,
    slot_tokens: usize,
    valid: Vec<bool>,
    target: usize,
}

impl<B: Backend> KvWindow<B> {
    /// A zeroed window; no slot is valid and the target is slot 0.
    pub fn new(layers: usize, batch: usize, heads: usize, head_dim: usize, slot_tokens: usize, slots: usize, device: &B::Device) -> Self {
        let zeros = || Tensor::zeros([batch, heads, slots * slot_tokens, head_dim], device);
        Self {
            layers: (0..layers).map(|_| Mutex::new(LayerKv { k: zeros(), v: zeros() })).collect(),
            slot_tokens,
            valid: vec![false; slots],
            target: 0,
        }
    }

    pub fn slots(&self) -> usize {
        self.valid.len()
    }

    /// Bytes held by the window (fixed at creation).
    pub fn bytes(&self) -> usize {
        let l = self.layers[0].lock().expect("window lock");
        self.layers.len() * 2 * l.k.shape().num_elements() * l.k.dtype().size()
    }

    fn slot_range(&self, slot: usize, tokens: usize) -> std::ops::Range<usize> {
        slot * self.slot_tokens..slot * self.slot_tokens + tokens
    }

    /// Copies a published entry into consecutive slots from `slot` and marks them valid. An entry
    /// of another shape (layers, batch, heads, head_dim) or one that does not fit is an error.
    pub fn write(&mut self, slot: usize, kv: &ChunkKv<B>) -> Result<()> {
        let [batch, heads, _, head_dim] = self.layers[0].get_mut().expect("window lock").k.dims();
        check_entry(&format!("K/V entry for slot {slot}"), kv, self.layers.len(), batch, heads, head_dim)?;
        let tokens = kv.tokens();
        let n = tokens.div_ceil(self.slot_tokens);
        if slot + n > self.slots() {
            return Err(ModelError::Input(format!(
                "K/V entry of {tokens} tokens does not fit from slot {slot} of a window of {} slots of {} tokens",
                self.slots(),
                self.slot_tokens
            )));
        }
        let range = self.slot_range(slot, tokens);
        for (buffer, entry) in self.layers.iter_mut().zip(&kv.layers) {
            let b = buffer.get_mut().expect("window lock");
            assign(b, range.clone(), entry);
        }
        self.valid[slot..slot + n].iter_mut().for_each(|v| *v = true);
        Ok(())
    }

    /// The slot the next forward's own K/V goes into; it becomes valid with that forward.
    pub fn set_target(&mut self, slot: usize) {
        self.target = slot;
        self.valid[slot] = true;
    }

    /// The valid key range: a prefix view when the valid slots are a prefix, else the whole
    /// buffer with the invalid slots masked.
    fn view(&self, kv: &LayerKv<B>, queries: usize) -> Keys<B> {
        let prefix = self.valid.iter().take_while(|v| **v).count();
        if self.valid[prefix..].iter().all(|v| !*v) {
            let n = prefix * self.slot_tokens;
            return Keys { kv: LayerKv { k: kv.k.clone().narrow(2, 0, n), v: kv.v.clone().narrow(2, 0, n) }, mask: None };
        }
        let keys: Vec<bool> = self.valid.iter().flat_map(|v| std::iter::repeat_n(!*v, self.slot_tokens)).collect();
        let n = keys.len();
        let row = Tensor::<B, 4, Bool>::from_data(TensorData::new(keys, [1, 1, 1, n]), &kv.k.device());
        Keys { kv: kv.clone(), mask: Some(row.expand([1, 1, queries, n])) }
    }
}

fn assign<B: Backend>(buffer: &mut LayerKv<B>, range: std::ops::Range<usize>, entry: &LayerKv<B>) {
    let [b, h, _, d] = buffer.k.dims();
    let slices = [0..b, 0..h, range, 0..d];
    // Move the buffers out so they are uniquely held and updated in place.
    let k = std::mem::replace(&mut buffer.k, entry.k.clone());
    let v = std::mem::replace(&mut buffer.v, entry.v.clone());
    buffer.k = k.slice_assign(slices.clone(), entry.k.clone());
    buffer.v = v.slice_assign(slices, entry.v.clone());
}

impl<B: Backend> KvContext<B> for KvWindow<B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Keys<B> {
        let mut buffer = self.layers[layer].lock().expect("window lock");
        assign(&mut buffer, self.slot_range(self.target, own.tokens()), own);
        self.view(&buffer, own.tokens())
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
