//! [`encode_crops`]: the time-rebased crops of a clip, encoded from their own frames (paper
//! Sec. 3.2, App. C.1: a crop is an RGB clip of its own, so its rebased position 0 is a causal
//! first latent of one frame, as inference produces it).
//!
//! Shapes: the clip's video `[1, 3, 1 + 4(L − 1), H, W]` in `[-1, 1]`; the crops
//! `[K, C, L_c, h, w]` with `K = L − L_c`. Crop `k` starts at clip latent `o = k + 1`: it is the
//! normalised VAE latent mean of frames `4o ..= 4o + 4(L_c − 1)` encoded alone. Its latent 0 is
//! frame `4o` (the last frame of clip latent `o`) by itself; its latent `p ≥ 1` covers the
//! frames of clip latent `o + p`, with the causal cache of the crop's own past.

use crate::{Result, TrainError};
use burn::tensor::{Tensor, TensorData};
use ff_model::AttentionBackend;
use ff_model::vae::WanVae;

/// The crops of `L_c = crop_len` latents of `video` (see the module docs), `[K, C, L_c, h, w]`
/// f32; an error names a video too short for one crop.
pub fn encode_crops<B: AttentionBackend>(vae: &WanVae<B>, video: Tensor<B, 5>, crop_len: usize) -> Result<TensorData> {
    let frames = video.dims()[2];
    let latents = 1 + frames.saturating_sub(1) / 4;
    if crop_len == 0 || frames != 1 + 4 * (latents - 1) || crop_len >= latents {
        return Err(TrainError::Shape(format!(
            "crops of {crop_len} latents need a video of 1 + 4(L − 1) frames with L > {crop_len}, it has {frames} frames"
        )));
    }
    let crop_frames = 1 + 4 * (crop_len - 1);
    let crops = (1..=latents - crop_len)
        .map(|o| Ok(vae.normalize(vae.encode_mean(video.clone().narrow(2, 4 * o, crop_frames))?)))
        .collect::<Result<Vec<Tensor<B, 5>>>>()?;
    Ok(Tensor::cat(crops, 0).into_data().convert::<f32>())
}
