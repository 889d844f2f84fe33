//! The Wan VAE (diffusers `AutoencoderKLWan`): encoder, `quant_conv`, `post_quant_conv`, decoder.
//!
//! * `encode_moments`: video `[B, 3, T, H, W]` in `[-1, 1]` -> latent mean and log-variance, each
//!   `[B, z, 1+(T-1)/4, H/8, W/8]` (unnormalised, diffusers' `latent_dist`); frame 0 is encoded
//!   alone, then chunks of 4 frames, the causal state carried between chunks (trailing frames that
//!   do not fill a chunk are dropped, as in diffusers). `encode_mean` keeps the mean.
//! * `decode`: latents `[B, z, t, h, w]` (unnormalised) -> video `[B, 3, 1+4(t-1), 8h, 8w]` clamped
//!   to `[-1, 1]`, one latent frame at a time; [`VaeStreamDecoder`] does the same piecewise.
//!   `decode_unclamped` skips the clamp (training: the loss keeps its gradient outside `[-1, 1]`).
//! * `normalize` / `denormalize`: `(x − mean) / std` and back, per latent channel.

use super::cache::CausalCache;
use super::config::WanVaeConfig;
use super::conv::{CausalConv3d, CausalConv3dConfig};
use super::decoder::WanDecoder;
use super::encoder::WanEncoder;
use super::stream::VaeStreamDecoder;
use crate::error::{ModelError, Result};
use burn::module::Module;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// Frames the encoder takes per chunk after the first frame (hard-coded in diffusers).
const ENCODE_CHUNK: usize = 4;
/// diffusers' `DiagonalGaussianDistribution` clamps the log-variance to this range.
const LOGVAR_RANGE: (f64, f64) = (-30.0, 20.0);

/// The Wan VAE; build with [`WanVaeConfig::init`] or [`WanVae::load`].
#[derive(Module, Debug)]
pub struct WanVae<B: Backend> {
    /// Video to `2·z_dim` moment channels.
    pub encoder: WanEncoder<B>,
    /// 1×1×1 convolution `2·z_dim → 2·z_dim` after the encoder.
    pub quant_conv: CausalConv3d<B>,
    /// 1×1×1 convolution `z_dim → z_dim` before the decoder.
    pub post_quant_conv: CausalConv3d<B>,
    /// Latents to video.
    pub decoder: WanDecoder<B>,
    config: WanVaeConfig,
}

impl WanVaeConfig {
    /// A VAE with random weights (load a checkpoint with [`WanVae::load`]).
    pub fn init<B: Backend>(&self, device: &B::Device) -> WanVae<B> {
        let z2 = 2 * self.z_dim;
        WanVae {
            encoder: WanEncoder::new(self, device),
            quant_conv: CausalConv3dConfig::new([z2, z2], [1, 1, 1]).init(device),
            post_quant_conv: CausalConv3dConfig::new([self.z_dim, self.z_dim], [1, 1, 1]).init(device),
            decoder: WanDecoder::new(self, device),
            config: self.clone(),
        }
    }
}

impl<B: Backend> WanVae<B> {
    /// The hyper-parameters.
    pub fn config(&self) -> &WanVaeConfig {
        &self.config
    }

    /// This codec's encoder, `quant_conv` and latent statistics (its latent space) with a new
    /// random decoder and `post_quant_conv` of width `decoder_base_dim`: the start of a decoder
    /// trained on a frozen encoder.
    pub fn with_new_decoder(self, decoder_base_dim: usize, device: &B::Device) -> Self {
        let width = (decoder_base_dim != self.config.base_dim).then_some(decoder_base_dim);
        let config = WanVaeConfig { decoder_base_dim: width, ..self.config };
        let fresh = config.init::<B>(device);
        Self { decoder: fresh.decoder, post_quant_conv: fresh.post_quant_conv, config, ..self }
    }

    /// `(latents − mean) / std` per channel, for latents `[B, z_dim, t, h, w]`.
    pub fn normalize(&self, latents: Tensor<B, 5>) -> Tensor<B, 5> {
        let (mean, std) = self.mean_std(&latents);
        (latents - mean) / std
    }

    /// `latents · std + mean` per channel: the inverse of [`WanVae::normalize`].
    pub fn denormalize(&self, latents: Tensor<B, 5>) -> Tensor<B, 5> {
        let (mean, std) = self.mean_std(&latents);
        latents * std + mean
    }

    /// Latent mean and std as `[1, z_dim, 1, 1, 1]` tensors on the device of `like`.
    fn mean_std(&self, like: &Tensor<B, 5>) -> (Tensor<B, 5>, Tensor<B, 5>) {
        let z = self.config.z_dim;
        let as_tensor = |v: &[f64]| {
            let v: Vec<f32> = v.iter().map(|x| *x as f32).collect();
            Tensor::<B, 1>::from_data(TensorData::new(v, [z]), &like.device()).reshape([1, z, 1, 1, 1])
        };
        (as_tensor(&self.config.latents_mean), as_tensor(&self.config.latents_std))
    }
}

/// Encoding and decoding (the causal convolutions run the CPU kernel where there is one).
impl<B: AttentionBackend> WanVae<B> {
    /// The latent mean of a video `[B, 3, T, H, W]` in `[-1, 1]`: `[B, z_dim, 1+(T-1)/4, H/8, W/8]`.
    pub fn encode_mean(&self, video: Tensor<B, 5>) -> Result<Tensor<B, 5>> {
        Ok(self.encode_moments(video)?.0)
    }

    /// The posterior of a video `[B, 3, T, H, W]` in `[-1, 1]`: mean and log-variance (clamped to
    /// `[-30, 20]`), each `[B, z_dim, 1+(T-1)/4, H/8, W/8]`.
    pub fn encode_moments(&self, video: Tensor<B, 5>) -> Result<(Tensor<B, 5>, Tensor<B, 5>)> {
        let [_, channels, frames, height, width] = video.dims();
        if channels != 3 || frames == 0 || height == 0 || width == 0 {
            return Err(ModelError::Input(format!("VAE encode expects a video [B, 3, T>0, H, W], got {:?}", video.dims())));
        }
        let mut cache = CausalCache::default();
        let chunks = 1 + (frames - 1) / ENCODE_CHUNK;
        let out: Vec<_> = (0..chunks)
            .map(|i| {
                let (start, len) = if i == 0 { (0, 1) } else { (1 + ENCODE_CHUNK * (i - 1), ENCODE_CHUNK) };
                self.encoder.forward(video.clone().narrow(2, start, len), &mut cache)
            })
            .collect();
        let moments = self.quant_conv.forward(Tensor::cat(out, 2));
        let z = self.config.z_dim;
        let logvar = moments.clone().narrow(1, z, z).clamp(LOGVAR_RANGE.0, LOGVAR_RANGE.1);
        Ok((moments.narrow(1, 0, z), logvar))
    }

    /// Decodes unnormalised latents `[B, z_dim, t, h, w]` to video `[B, 3, 1+4(t−1), 8h, 8w]` in `[-1, 1]`.
    pub fn decode(&self, latents: Tensor<B, 5>) -> Result<Tensor<B, 5>> {
        self.stream_decoder().decode_chunk(latents)
    }

    /// The last frame of [`WanVae::decode`] of the first `end` of the unnormalised latents
    /// `[B, z_dim, n, h, w]`, for each of `ends` (ascending, each in `1..=n`): `[B, 3, 1, 8h, 8w]`
    /// in `[-1, 1]`, the same frames as the whole decode's, but the layers at the video's frame
    /// rate run only on the frames each of them reaches (Phase 2's image heads: at L = 81 a
    /// quarter of the whole decode's work).
    pub fn decode_last_frames(&self, latents: Tensor<B, 5>, ends: &[usize]) -> Result<Vec<Tensor<B, 5>>> {
        let [_, channels, n, _, _] = latents.dims();
        let ascending = ends.windows(2).all(|w| w[0] < w[1]);
        if channels != self.config.z_dim || !ascending || ends.first().is_some_and(|&e| e == 0) || ends.last().is_some_and(|&e| e > n) {
            return Err(ModelError::Input(format!(
                "VAE last frames expect latents [B, {}, n, h, w] and ascending ends in 1..=n, got {:?} and ends {ends:?}",
                self.config.z_dim,
                latents.dims()
            )));
        }
        let frames = self.decoder.last_frames(self.post_quant_conv.forward(latents), ends);
        Ok(frames.into_iter().map(|f| f.clamp(-1.0, 1.0)).collect())
    }

    /// [`WanVae::decode`] without the final clamp to `[-1, 1]`.
    pub fn decode_unclamped(&self, latents: Tensor<B, 5>) -> Result<Tensor<B, 5>> {
        self.stream_decoder().decode_chunk_unclamped(latents)
    }

    /// A decoder that takes the latents of one video a few frames at a time and yields exactly the
    /// frames of [`WanVae::decode`] on all of them.
    pub fn stream_decoder(&self) -> VaeStreamDecoder<B> {
        VaeStreamDecoder::new(self.decoder.clone(), self.post_quant_conv.clone(), self.config.z_dim)
    }
}
