//! Score windows: the clip's `L` target positions split into tiles that fit a score network's
//! `W_score` positions, and the detached image head each later tile is prepended with.
//!
//! Tiles: the first holds `W` targets, every later one `W − 1` (its head takes the first slot);
//! at L = 81, W = 21: 0–20, 21–40, 41–60, 61–80. The head of a tile starting at `s` is the last
//! RGB frame of the decoded clean prefix `x̂₀[0..s]`, re-encoded alone by the VAE encoder (one
//! frame → one latent, as Wan's first latent): `[1, C, 1, h, w]`, normalised like the latents.

use crate::Result;
use burn::tensor::Tensor;
use ff_model::AttentionBackend;
use ff_model::vae::WanVae;
use std::ops::Range;

/// The target tiles of `latents` positions under a window of `window ≥ 2` positions.
pub fn tiles(latents: usize, window: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < latents || out.is_empty() {
        let end = (start + if out.is_empty() { window } else { window - 1 }).min(latents);
        out.push(start..end);
        start = end;
    }
    out
}

/// The image heads of tiles `1..` of `x0` (`[1, C, L, h, w]`, normalised latents, detached):
/// the last frame of the decoded prefix at each tile start ([`WanVae::decode_last_frames`]: the
/// frames of one streaming decode of the clip, at a quarter of its work), re-encoded alone.
pub fn image_heads<B: AttentionBackend>(vae: &WanVae<B>, x0: Tensor<B, 5>, tiles: &[Range<usize>]) -> Result<Vec<Tensor<B, 5>>> {
    let device = x0.device();
    let starts: Vec<usize> = tiles.iter().skip(1).map(|t| t.start).collect();
    let Some(&last) = starts.last() else { return Ok(Vec::new()) };
    let frames = vae.decode_last_frames(vae.denormalize(x0.narrow(2, 0, last)), &starts)?;
    frames.into_iter().map(|frame| Ok(vae.normalize(vae.encode_mean(frame)?).to_device(&device))).collect()
}
