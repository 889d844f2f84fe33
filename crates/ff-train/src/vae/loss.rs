//! The codec's loss terms, each a `[1]` mean over all elements, computed in f32.

use burn::tensor::{DType, Tensor, backend::Backend};

/// Mean absolute and mean squared error of `recon` against `target` (same shape).
pub fn reconstruction<B: Backend, const D: usize>(recon: Tensor<B, D>, target: Tensor<B, D>) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let diff = recon.cast(DType::F32) - target.cast(DType::F32);
    (diff.clone().abs().mean(), diff.powi_scalar(2).mean())
}

/// KL(N(μ, e^logvar) ‖ N(0, 1)) per element, averaged: `mean(½(μ² + e^logvar − 1 − logvar))`.
pub fn kl_to_standard_normal<B: Backend, const D: usize>(mean: Tensor<B, D>, logvar: Tensor<B, D>) -> Tensor<B, 1> {
    let (mean, logvar) = (mean.cast(DType::F32), logvar.cast(DType::F32));
    (mean.powi_scalar(2) + logvar.clone().exp() - logvar).sub_scalar(1.0).mul_scalar(0.5).mean()
}

/// Mean absolute error of the frame-to-frame change, `mean |(x̂ₜ₊₁ − x̂ₜ) − (xₜ₊₁ − xₜ)|` over
/// `[N, C, T, H, W]` videos: zero for an error that stays the same from frame to frame, so it
/// weighs how much the error jumps, as it does where the decoder moves on to the next latent.
pub fn temporal_difference<B: Backend>(recon: Tensor<B, 5>, target: Tensor<B, 5>) -> Tensor<B, 1> {
    let error = recon.cast(DType::F32) - target.cast(DType::F32);
    let t = error.dims()[2];
    (error.clone().narrow(2, 1, t - 1) - error.narrow(2, 0, t - 1)).abs().mean()
}
