//! Wan's RMS-style norm (`WanRMS_norm`): `F.normalize(x, dim=1) · √C · γ`, over the channel
//! dimension of `[N, C, ...]`, computed in f32.
//!
//! `γ` keeps the checkpoint's shape: `[C, 1, 1, 1]` (`G = 4`) for video tensors `[B, C, T, H, W]`,
//! `[C, 1, 1]` (`G = 3`) for the per-frame images `[B·T, C, H, W]` of the attention block.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{DType, Tensor, backend::Backend};

/// `F.normalize`'s lower bound on the norm.
const NORMALIZE_EPS: f64 = 1e-12;

/// Configuration of a [`WanRmsNorm`].
#[derive(Config, Debug)]
pub struct WanRmsNormConfig {
    /// Channels.
    pub dim: usize,
}

impl WanRmsNormConfig {
    pub fn init<B: Backend, const G: usize>(&self, device: &B::Device) -> WanRmsNorm<B, G> {
        let mut shape = [1; G];
        shape[0] = self.dim;
        WanRmsNorm { gamma: Param::from_tensor(Tensor::ones(shape, device)) }
    }
}

/// Channel-wise L2 normalisation scaled by `√C · γ` (no bias, as in Wan2.1).
#[derive(Module, Debug)]
pub struct WanRmsNorm<B: Backend, const G: usize> {
    /// `[C, 1, ...]` with `G` dimensions.
    pub gamma: Param<Tensor<B, G>>,
}

impl<B: Backend, const G: usize> WanRmsNorm<B, G> {
    /// `x: [N, C, ...]` with `D = G + 1` dimensions.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        let dtype = x.dtype();
        let x = x.cast(DType::F32);
        let channels = x.dims()[1] as f64;
        // One reciprocal per pixel and one per channel, then two broadcast products: the
        // full-size division and scalar product (and their backward) are the codec training
        // step's costliest element-wise ops on the CPU.
        let inverse_norm = x.clone().powi_scalar(2).sum_dim(1).sqrt().clamp_min(NORMALIZE_EPS).recip();
        let scale = self.gamma.val().cast(DType::F32).mul_scalar(channels.sqrt()).unsqueeze::<D>();
        (x * inverse_norm * scale).cast(dtype)
    }
}
