//! [`Objective`]: what one training phase computes from a clip. The engine (optimizer, EMA,
//! accumulation, data-parallel workers, checkpoints) is the same for every phase; a phase is an
//! objective over a model `M` (the student DiT by default) and clips `C` (latent clips by
//! default; the codec trains on RGB clips).

use crate::Result;
use crate::data::LatentClip;
use crate::rng::TrainRng;
use burn::tensor::{Tensor, backend::AutodiffBackend};
use ff_model::{AttentionBackend, WanDit};

/// A scalar loss and its named parts (for the metrics log; the parts need no gradient).
pub struct Loss<B: AutodiffBackend> {
    /// `[1]`, the value whose backward gives the clip's gradients.
    pub total: Tensor<B, 1>,
    /// Named components, e.g. ("planner", ..), ("renderer", ..), ("rebased", ..).
    pub parts: Vec<(&'static str, Tensor<B, 1>)>,
}

/// One phase's loss of one clip under the trained `model`; all randomness (σ, noise, crop
/// offsets) comes from `rng`.
pub trait Objective<B: AutodiffBackend, M = WanDit<B>, C = LatentClip>
where
    B: AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    /// The loss of `clip` under `model`, drawing its randomness from `rng`.
    fn loss(&self, model: &M, clip: &C, rng: &mut TrainRng) -> Result<Loss<B>>;

    /// The losses of one micro-batch, clip `i` with its own stream `rngs[i]`, in order. The
    /// default runs [`Objective::loss`] clip by clip; an objective whose clips can share one
    /// forward overrides it, drawing from each clip's stream what `loss` would draw, so a clip's
    /// loss does not depend on the micro-batch it lands in (up to float rounding).
    fn losses(&self, model: &M, clips: &[&C], rngs: &mut [TrainRng]) -> Result<Vec<Loss<B>>> {
        clips.iter().zip(rngs).map(|(clip, rng)| self.loss(model, clip, rng)).collect()
    }
}
