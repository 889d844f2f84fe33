//! Streaming decode: latents `[B, z_dim, n, h, w]` arrive a few frames at a time; each chunk
//! yields its video frames `[B, 3, n', 8h, 8w]` (`n' = 4n`, or `1 + 4(n−1)` for the first chunk),
//! and the concatenation equals [`WanVae::decode`](super::WanVae::decode) of all latents.

use super::cache::CausalCache;
use super::conv::CausalConv3d;
use super::decoder::WanDecoder;
use crate::error::{ModelError, Result};
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// A decoder with the causal state of one video; make one per video with
/// [`WanVae::stream_decoder`](super::WanVae::stream_decoder).
#[derive(Debug, Clone)]
pub struct VaeStreamDecoder<B: Backend> {
    decoder: WanDecoder<B>,
    post_quant_conv: CausalConv3d<B>,
    z_dim: usize,
    cache: CausalCache<B>,
    /// `[B, h, w]` of the first chunk; later chunks must match it.
    shape: Option<[usize; 3]>,
    latents_seen: usize,
}

impl<B: AttentionBackend> VaeStreamDecoder<B> {
    pub(crate) fn new(decoder: WanDecoder<B>, post_quant_conv: CausalConv3d<B>, z_dim: usize) -> Self {
        Self { decoder, post_quant_conv, z_dim, cache: CausalCache::default(), shape: None, latents_seen: 0 }
    }

    /// Decodes the next `n ≥ 1` unnormalised latent frames `[B, z_dim, n, h, w]` of the video,
    /// clamped to `[-1, 1]`. The decoder takes them a bounded number of latents per pass (one at
    /// Wan's 480p, as diffusers decodes, so the activations held at once stay those of one
    /// latent's four output frames; dozens at the small world's size).
    pub fn decode_chunk(&mut self, latents: Tensor<B, 5>) -> Result<Tensor<B, 5>> {
        Ok(self.decode_chunk_unclamped(latents)?.clamp(-1.0, 1.0))
    }

    /// [`VaeStreamDecoder::decode_chunk`] without the final clamp to `[-1, 1]` (training).
    pub(crate) fn decode_chunk_unclamped(&mut self, latents: Tensor<B, 5>) -> Result<Tensor<B, 5>> {
        let [batch, channels, frames, h, w] = latents.dims();
        let shape = self.shape.unwrap_or([batch, h, w]);
        if channels != self.z_dim || frames == 0 || shape != [batch, h, w] {
            return Err(ModelError::Input(format!(
                "VAE decode expects latents [{}, {}, t>0, {}, {}], got {:?}",
                shape[0],
                self.z_dim,
                shape[1],
                shape[2],
                latents.dims()
            )));
        }
        self.shape = Some(shape);
        self.latents_seen += frames;
        // post_quant_conv is 1×1×1: frame-wise, so it needs no causal state.
        Ok(self.decoder.decode_frames(self.post_quant_conv.forward(latents), &mut self.cache))
    }

    /// Latent frames decoded so far.
    pub fn latents_seen(&self) -> usize {
        self.latents_seen
    }
}
