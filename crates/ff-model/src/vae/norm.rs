//! Wan's RMS-style norm (`WanRMS_norm`): `F.normalize(x, dim=1) · √C · γ`, over the channel
//! dimension of `[N, C, ...]`, computed in f32, optionally followed by SiLU (as every norm of the
//! residual blocks and the output head is). On the CPU backends' f32 tensors without autodiff it
//! runs as one kernel ([`kernels_cubecl::channel_norm`]).
//!
//! `γ` keeps the checkpoint's shape: `[C, 1, 1, 1]` (`G = 4`) for video tensors `[B, C, T, H, W]`,
//! `[C, 1, 1]` (`G = 3`) for the per-frame images `[B·T, C, H, W]` of the attention block.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::activation::silu;
use burn::tensor::{DType, Tensor, backend::Backend};
use kernels_cubecl::{AttentionBackend, channel_norm};

/// `F.normalize`'s lower bound on the norm.
const NORMALIZE_EPS: f64 = 1e-12;

/// Configuration of a [`WanRmsNorm`].
#[derive(Config, Debug)]
pub struct WanRmsNormConfig {
    /// Channels.
    pub dim: usize,
}

impl WanRmsNormConfig {
    /// A norm with `γ = 1`.
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

impl<B: AttentionBackend, const G: usize> WanRmsNorm<B, G> {
    /// `x: [N, C, ...]` with `D = G + 1` dimensions.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        self.forward_activated(x, false)
    }

    /// `silu(self.forward(x))`, in one pass where the CPU kernel runs.
    pub fn forward_silu<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        self.forward_activated(x, true)
    }

    fn forward_activated<const D: usize>(&self, x: Tensor<B, D>, activate: bool) -> Tensor<B, D> {
        let channels = x.dims()[1];
        if let Some(y) = channel_norm(x.clone(), self.gamma.val().reshape([channels]), activate) {
            return y;
        }
        let dtype = x.dtype();
        let x = x.cast(DType::F32);
        // One reciprocal per pixel and one per channel, then two broadcast products: the
        // full-size division and scalar product (and their backward) are the codec training
        // step's costliest element-wise ops on the CPU.
        let inverse_norm = x.clone().powi_scalar(2).sum_dim(1).sqrt().clamp_min(NORMALIZE_EPS).recip();
        let scale = self.gamma.val().cast(DType::F32).mul_scalar((channels as f64).sqrt()).unsqueeze::<D>();
        let y = (x * inverse_norm * scale).cast(dtype);
        if activate { silu(y) } else { y }
    }
}
