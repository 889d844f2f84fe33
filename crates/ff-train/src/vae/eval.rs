//! Reconstruction quality of a codec on one clip: PSNR of the full decode and of the streaming
//! decode (latents fed `chunk` frames at a time), both on frames quantised to 8 bits as a video
//! file holds them, and the largest 8-bit difference between the two decodes.

use super::data::VideoClip;
use burn::tensor::{Tensor, backend::Backend};
use ff_model::vae::WanVae;

/// What [`reconstruct`] measured on one clip.
#[derive(Clone, Debug, PartialEq)]
pub struct Reconstruction {
    /// PSNR (dB) of the full decode against the clip.
    pub psnr: f64,
    /// PSNR (dB) of the streaming decode against the clip.
    pub stream_psnr: f64,
    /// Largest difference between the full and the streaming decode, in 8-bit levels.
    pub stream_max_diff: u8,
    /// Latent frames of the clip.
    pub latents: usize,
}

/// Encodes `clip` (its latent mean) and decodes it whole and `chunk` latents at a time.
pub fn reconstruct<B: Backend>(vae: &WanVae<B>, clip: &VideoClip, chunk: usize) -> crate::Result<Reconstruction> {
    let device = vae.quant_conv.bias.val().device();
    let mean = vae.encode_mean(clip.tensor::<B>(&device))?;
    let full = to_u8(vae.decode(mean.clone())?);
    let latents = mean.dims()[2];
    let mut stream = vae.stream_decoder();
    let mut parts = Vec::new();
    for start in (0..latents).step_by(chunk.max(1)) {
        parts.push(stream.decode_chunk(mean.clone().narrow(2, start, chunk.max(1).min(latents - start)))?);
    }
    let streamed = to_u8(Tensor::cat(parts, 2));
    let target = to_u8(clip.tensor::<B>(&device));
    let stream_max_diff = full.iter().zip(&streamed).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
    Ok(Reconstruction { psnr: psnr(&full, &target), stream_psnr: psnr(&streamed, &target), stream_max_diff, latents })
}

/// Values in `[-1, 1]` as 8-bit levels (`round((x + 1)·127.5)`).
fn to_u8<B: Backend>(video: Tensor<B, 5>) -> Vec<u8> {
    let values = video.add_scalar(1.0).mul_scalar(127.5).round().clamp(0.0, 255.0).into_data();
    values.iter::<f32>().map(|v| v as u8).collect()
}

/// Peak signal-to-noise ratio of 8-bit data (`∞` for equal data).
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let sum: f64 = a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum();
    let mse = sum / a.len().max(1) as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
}
