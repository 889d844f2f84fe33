//! The Wan VAE decoder (diffusers `WanDecoder3d`): `n` latent frames `[B, z_dim, n, h, w]` ->
//! video frames `[B, 3, T', 8h, 8w]` (Wan2.1), with `T' = 1` for the first latent of a stream
//! (which passes alone) and `T' = 4n` for every later pass (two temporal upsamplers).

use super::blocks::{MidBlock, MidBlockConfig, ResidualBlock, ResidualBlockConfig};
use super::cache::CausalCache;
use super::config::WanVaeConfig;
use super::conv::{CausalConv3d, CausalConv3dConfig};
use super::norm::{WanRmsNorm, WanRmsNormConfig};
use super::resample::{Resample, ResampleConfig, ResampleMode};
use burn::module::Module;
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// Latent pixels (batch × latent frames × h × w) the decoder takes in one pass: the activations a
/// pass holds are those of its `4·n` output frames, so a budget keeps Wan's 480p (60×104 latents)
/// at one latent per pass, as diffusers decodes it.
pub(crate) const PASS_LATENT_PIXELS: usize = 1024;

/// One decoder stage: `num_res_blocks + 1` residual blocks, then an upsampler except in the last
/// stage (diffusers `WanUpBlock`).
#[derive(Module, Debug)]
pub struct UpBlock<B: Backend> {
    pub resnets: Vec<ResidualBlock<B>>,
    pub upsampler: Option<Resample<B>>,
}

impl<B: AttentionBackend> UpBlock<B> {
    fn forward(&self, mut x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        for block in &self.resnets {
            x = block.forward(x, cache);
        }
        match &self.upsampler {
            Some(up) => up.forward(x, cache),
            None => x,
        }
    }
}

/// The decoder; built by [`WanVaeConfig::init`].
#[derive(Module, Debug)]
pub struct WanDecoder<B: Backend> {
    pub conv_in: CausalConv3d<B>,
    pub mid_block: MidBlock<B>,
    pub up_blocks: Vec<UpBlock<B>>,
    pub norm_out: WanRmsNorm<B, 4>,
    pub conv_out: CausalConv3d<B>,
}

impl<B: Backend> WanDecoder<B> {
    pub(crate) fn new(config: &WanVaeConfig, device: &B::Device) -> Self {
        let dims = config.decoder_dims();
        let stages = config.dim_mult.len();
        let up_blocks = (0..stages)
            .map(|stage| {
                // Every upsampler halves the channels, so later stages start from half the width.
                let in_dim = if stage == 0 { dims[0] } else { dims[stage] / 2 };
                let out_dim = dims[stage + 1];
                let resnets = (0..=config.num_res_blocks)
                    .map(|i| ResidualBlockConfig::new(if i == 0 { in_dim } else { out_dim }, out_dim).init(device))
                    .collect();
                let upsampler = (stage + 1 < stages).then(|| {
                    // The decoder runs the encoder's temporal schedule backwards.
                    let mode = match config.temperal_downsample[stages - 2 - stage] {
                        true => ResampleMode::Upsample3d,
                        false => ResampleMode::Upsample2d,
                    };
                    ResampleConfig::new(out_dim, mode).init(device)
                });
                UpBlock { resnets, upsampler }
            })
            .collect();
        let out_dim = dims[stages];
        Self {
            conv_in: CausalConv3dConfig::new([config.z_dim, dims[0]], [3, 3, 3]).with_padding([1, 1, 1]).init(device),
            mid_block: MidBlockConfig::new(dims[0]).init(device),
            up_blocks,
            norm_out: WanRmsNormConfig::new(out_dim).init(device),
            conv_out: CausalConv3dConfig::new([out_dim, 3], [3, 3, 3]).with_padding([1, 1, 1]).init(device),
        }
    }
}

impl<B: AttentionBackend> WanDecoder<B> {
    /// One chunk (one latent frame in diffusers' schedule) of the stream whose state is `cache`.
    fn forward(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        cache.start_chunk();
        let x = self.conv_in.forward_cached(x, cache.next_slot());
        let mut x = self.mid_block.forward(x, cache);
        for block in &self.up_blocks {
            x = block.forward(x, cache);
        }
        self.conv_out.forward_cached(self.norm_out.forward_silu(x), cache.next_slot())
    }

    /// Decodes latents after `post_quant_conv`, continuing the stream whose state is `cache`.
    ///
    /// A stream's first latent passes alone: its temporal upsamplers keep its single frame
    /// (diffusers' `"Rep"`). Later latents pass several at a time, as many as keep a pass under
    /// [`PASS_LATENT_PIXELS`]: every layer is causal in time with a two-frame cache, or per frame,
    /// so a pass of `n` latents computes what `n` passes of one latent compute, with a few large
    /// operations instead of many small ones (at the small world's 8×8 latents, 16 per pass).
    pub(crate) fn decode_frames(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        let [batch, _, frames, h, w] = x.dims();
        let per_pass = (PASS_LATENT_PIXELS / (batch * h * w)).max(1);
        let mut out = Vec::new();
        let mut start = 0;
        while start < frames {
            let n = if cache.is_fresh() { 1 } else { per_pass.min(frames - start) };
            out.push(self.forward(x.clone().narrow(2, start, n), cache));
            start += n;
        }
        Tensor::cat(out, 2)
    }
}
