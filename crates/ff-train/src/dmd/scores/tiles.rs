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
/// one streaming decode of the clip, taking the last frame at each tile start.
pub fn image_heads<B: AttentionBackend>(vae: &WanVae<B>, x0: Tensor<B, 5>, tiles: &[Range<usize>]) -> Result<Vec<Tensor<B, 5>>> {
    let device = x0.device();
    let mut decoder = vae.stream_decoder();
    let mut heads = Vec::with_capacity(tiles.len().saturating_sub(1));
    let mut decoded = 0;
    for tile in &tiles[1..] {
        let chunk = x0.clone().narrow(2, decoded, tile.start - decoded);
        let frames = decoder.decode_chunk(vae.denormalize(chunk))?;
        decoded = tile.start;
        let n = frames.dims()[2];
        let last = frames.narrow(2, n - 1, 1).clamp(-1.0, 1.0);
        heads.push(vae.normalize(vae.encode_mean(last)?).to_device(&device));
    }
    Ok(heads)
}
