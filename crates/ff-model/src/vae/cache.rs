//! The causal cache that lets the VAE run a video chunk by chunk (diffusers' `feat_cache`).
//!
//! Every causal layer owns one slot, visited in a fixed order on each chunk: a cursor hands the
//! slots out one after the other, so the layers need no names. A slot holds the last input frames
//! of its layer (`[B, C, ≤2, H, W]`), or marks that a temporal upsampler has seen the first chunk.

use burn::tensor::{Tensor, backend::Backend};

/// The memory of one causal layer between chunks.
#[derive(Debug, Clone, Default)]
pub(crate) enum CacheSlot<B: Backend> {
    /// The layer has seen no chunk yet.
    #[default]
    Empty,
    /// A temporal upsampler passed its first chunk through without the time convolution
    /// (diffusers' `"Rep"` marker); its time convolution starts afresh on the next chunk.
    FirstChunkDone,
    /// The last input frames of the layer.
    Frames(Tensor<B, 5>),
}

impl<B: Backend> CacheSlot<B> {
    /// Takes the cached frames out of the slot (none for `Empty` / `FirstChunkDone`).
    pub(crate) fn take_frames(&mut self) -> Option<Tensor<B, 5>> {
        match std::mem::take(self) {
            Self::Frames(t) => Some(t),
            _ => None,
        }
    }
}

/// The slots of all causal layers of an encoder or decoder, with the cursor of the current chunk.
#[derive(Debug, Clone)]
pub struct CausalCache<B: Backend> {
    slots: Vec<CacheSlot<B>>,
    cursor: usize,
}

impl<B: Backend> Default for CausalCache<B> {
    fn default() -> Self {
        Self { slots: Vec::new(), cursor: 0 }
    }
}

impl<B: Backend> CausalCache<B> {
    /// Whether no chunk has passed yet (the stream's first latent is next).
    pub(crate) fn is_fresh(&self) -> bool {
        self.slots.is_empty()
    }

    /// Rewinds the cursor to the first layer; call before each chunk.
    pub(crate) fn start_chunk(&mut self) {
        self.cursor = 0;
    }

    /// The slot of the next causal layer in forward order.
    pub(crate) fn next_slot(&mut self) -> &mut CacheSlot<B> {
        if self.cursor == self.slots.len() {
            self.slots.push(CacheSlot::Empty);
        }
        self.cursor += 1;
        &mut self.slots[self.cursor - 1]
    }
}
