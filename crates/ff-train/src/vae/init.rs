//! The codec's initial posterior width.
//!
//! A freshly initialised Wan VAE outputs log-variances near 0, so the sampled latent
//! `z = μ + σ·ε` starts with σ ≈ 1: noise as large as any signal the random encoder sends. The
//! decoder then learns from latents that carry almost nothing (measured: KL ≈ 0.1–0.2 nats per
//! element over the first 200 steps, training MSE stuck near 0.15), and the encoder needs
//! hundreds of steps to push σ down before reconstruction can sharpen. Starting the
//! log-variance channels of `quant_conv` at a negative bias (σ = e^{logvar/2}) opens the channel
//! from the first step; the KL term still pulls σ towards 1 at its usual weight.

use burn::tensor::{Tensor, backend::Backend};
use ff_model::vae::WanVae;

/// `vae` with the bias of the log-variance half of `quant_conv`'s output (channels
/// `z_dim..2·z_dim`) set to `logvar`; the mean half and every weight are unchanged.
pub fn with_initial_logvar<B: Backend>(mut vae: WanVae<B>, logvar: f64) -> WanVae<B> {
    let z = vae.config().z_dim;
    vae.quant_conv.bias = vae.quant_conv.bias.map(|bias| {
        let device = bias.device();
        let mean = bias.narrow(0, 0, z);
        Tensor::cat(vec![mean, Tensor::full([z], logvar, &device)], 0)
    });
    vae
}
