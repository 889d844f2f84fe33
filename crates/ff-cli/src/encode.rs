//! What `encode-videos` and `world latents` share to write latent-clip datasets: the id of a
//! model file recorded in a dataset's manifest, frames as the VAE's input tensor, and a clip's
//! latents with its time-rebased crops.

use anyhow::{Context, Result};
use burn::tensor::{Tensor, TensorData};
use ff_model::AttentionBackend;
use ff_model::vae::WanVae;
use flashforward::video::Frame;
use std::path::Path;

/// `kind:file name:size in bytes`: names the model file that made a dataset's tensors.
pub fn file_id(kind: &str, path: &Path) -> Result<String> {
    let size = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
    Ok(format!("{kind}:{}:{size}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()))
}

/// Frames as a video tensor `[1, 3, T, H, W]` in [-1, 1].
pub fn video_tensor<B: AttentionBackend>(frames: &[Frame], device: &B::Device) -> Tensor<B, 5> {
    let (t, h, w) = (frames.len(), frames[0].height() as usize, frames[0].width() as usize);
    let plane = h * w;
    let mut values = vec![0f32; 3 * t * plane];
    for (f, frame) in frames.iter().enumerate() {
        for (p, rgb) in frame.as_raw().chunks_exact(3).enumerate() {
            for (c, v) in rgb.iter().enumerate() {
                values[(c * t + f) * plane + p] = f32::from(*v) / 127.5 - 1.0;
            }
        }
    }
    Tensor::from_data(TensorData::new(values, [1, 3, t, h, w]), device)
}

/// The normalised latent mean `[C, L, h, w]` of `frames` and, when `crop_latents > 0`, its
/// time-rebased crops `[L − crop_latents, C, crop_latents, h, w]` encoded from their own frames
/// (`ff_train::data::encode_crops`).
pub fn clip_latents<B: AttentionBackend>(
    vae: &WanVae<B>,
    frames: &[Frame],
    crop_latents: usize,
    device: &B::Device,
) -> Result<(TensorData, Option<TensorData>)> {
    let pixels = video_tensor::<B>(frames, device);
    let latents = vae.normalize(vae.encode_mean(pixels.clone())?);
    let [_, c, l, h, w] = latents.dims();
    let latents = latents.reshape([c, l, h, w]).into_data().convert::<f32>();
    let crops = match crop_latents {
        0 => None,
        n => Some(ff_train::data::encode_crops(vae, pixels, n)?),
    };
    Ok((latents, crops))
}
