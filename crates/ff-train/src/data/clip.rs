//! [`LatentClip`], the [`ClipSource`] trait every dataset implements, and the [`Sampler`].
//!
//! A clip is host data (no backend): latents `[16, L, h, w]` f32, the prompt embedding
//! `[text_tokens, text_dim]` f32 and, when the dataset has them, the time-rebased crops' own
//! latents `[K, 16, L_c, h, w]` f32 ([`encode_crops`](super::encode_crops)). The sampler visits clip indices in a seeded permutation per
//! epoch; its position is a serialisable [`Cursor`], so a resumed run reads the same clips.

use crate::{Result, TrainRng};
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

/// One training clip on the host.
#[derive(Clone, Debug)]
pub struct LatentClip {
    /// VAE latents `[channels, L, h, w]` (f32).
    pub latents: TensorData,
    /// Prompt embedding `[text_tokens, text_dim]` (f32).
    pub prompt: TensorData,
    /// Crop latents `[K, channels, L_c, h, w]` (f32): crop `k` starts at clip latent `k + 1` and
    /// is encoded from its own frames ([`encode_crops`](super::encode_crops)); `None` for a
    /// dataset without them, whose crops reuse the clip's latents.
    pub crops: Option<TensorData>,
    /// The clip's caption (names the clip in errors).
    pub caption: String,
}

impl LatentClip {
    /// Latent frames L.
    pub fn frames(&self) -> usize {
        self.latents.shape[1]
    }
}

/// A dataset of clips `C` (latent clips by default) addressed by index; `Sync`, as the trainer
/// reads the next step's clips on a thread of its own.
pub trait ClipSource<C = LatentClip>: Sync {
    /// Number of clips.
    fn len(&self) -> usize;
    /// Whether the dataset holds no clip.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Clip `index` (< `len()`); errors name the file and key at fault.
    fn get(&self, index: usize) -> Result<C>;
}

/// Clips held in memory (tests, synthetic data).
pub struct InMemoryClips(pub Vec<LatentClip>);

impl ClipSource for InMemoryClips {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn get(&self, index: usize) -> Result<LatentClip> {
        Ok(self.0[index].clone())
    }
}

/// Where a sampler stands: epoch and position within that epoch's permutation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Epochs completed (0 during the first).
    pub epoch: u64,
    /// Indices already drawn from this epoch's permutation (`0..=len`).
    pub position: usize,
}

/// Seeded epoch-wise shuffling over `len` clips.
#[derive(Clone, Debug)]
pub struct Sampler {
    seed: u64,
    len: usize,
    cursor: Cursor,
    order: Vec<usize>,
}

fn permutation(seed: u64, epoch: u64, len: usize) -> Vec<usize> {
    let mut rng = TrainRng::new(seed).fork(epoch);
    let mut order: Vec<usize> = (0..len).collect();
    for i in (1..len).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
}

impl Sampler {
    /// A sampler at the start of epoch 0.
    pub fn new(seed: u64, len: usize) -> Self {
        Self::resume(seed, len, Cursor::default())
    }

    /// A sampler continuing from `cursor` (as saved by [`Sampler::cursor`]).
    pub fn resume(seed: u64, len: usize, cursor: Cursor) -> Self {
        Self { seed, len, cursor, order: permutation(seed, cursor.epoch, len) }
    }

    /// Where the sampler stands now.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// The next clip index (`None` for an empty dataset); wraps into the next epoch.
    pub fn next_index(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        if self.cursor.position >= self.len {
            self.cursor = Cursor { epoch: self.cursor.epoch + 1, position: 0 };
            self.order = permutation(self.seed, self.cursor.epoch, self.len);
        }
        let i = self.order[self.cursor.position];
        self.cursor.position += 1;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_epoch_is_a_permutation_and_resume_continues_the_sequence() {
        let mut s = Sampler::new(7, 5);
        let first: Vec<usize> = (0..5).map(|_| s.next_index().unwrap()).collect();
        let mut sorted = first.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        let mut a = Sampler::new(7, 5);
        let seq: Vec<usize> = (0..12).map(|_| a.next_index().unwrap()).collect();
        let mut b = Sampler::new(7, 5);
        (0..7).for_each(|_| {
            b.next_index();
        });
        let mut c = Sampler::resume(7, 5, b.cursor());
        let tail: Vec<usize> = (0..5).map(|_| c.next_index().unwrap()).collect();
        assert_eq!(tail, seq[7..]);
        assert_ne!(permutation(7, 0, 50), permutation(7, 1, 50));
    }
}
