//! Latents moved off the encoder's output, as a generator's latents are: training a decoder on
//! them teaches it to read imperfect latents, and decoding them measures how much of a clip's
//! objects a decoder keeps from such latents.

use crate::TrainRng;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use ff_model::vae::WanVae;

/// `latents + σᵢ·std_c·ε` for raw latents `[N, z_dim, T, h, w]`: Gaussian noise of `σᵢ` in units
/// of the codec's per-channel `latents_std`, the scale a DiT samples in (σ = 0.1 is an error of
/// 0.1 in a generator's normalised latents). `sigmas` holds one σ per clip of the batch; ε comes
/// from `rng`. All σ zero returns the latents untouched and draws nothing.
pub fn perturb_latents<B: Backend>(vae: &WanVae<B>, latents: Tensor<B, 5>, sigmas: &[f64], rng: &mut TrainRng) -> Tensor<B, 5> {
    let [n, z, ..] = latents.dims();
    assert_eq!(sigmas.len(), n, "one noise level per clip");
    if sigmas.iter().all(|s| *s == 0.0) {
        return latents;
    }
    let device = latents.device();
    let scale: Vec<f32> = sigmas.iter().flat_map(|s| vae.config().latents_std.iter().map(move |std| (s * std) as f32)).collect();
    let scale = Tensor::<B, 1>::from_data(TensorData::new(scale, [n * z]), &device).reshape([n, z, 1, 1, 1]);
    let noise = Tensor::<B, 5>::from_data(rng.normal_data(latents.dims().to_vec()), &device);
    latents + noise * scale
}
