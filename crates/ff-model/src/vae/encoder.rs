//! The Wan VAE encoder (diffusers `WanEncoder3d`): one chunk of video `[B, 3, T, H, W]` ->
//! `[B, 2·z_dim, T', H/8, W/8]` (mean and log-variance, before `quant_conv`), where the first
//! chunk of a stream has `T = 1 -> T' = 1` and later chunks `T = 4 -> T' = 1` (Wan2.1).

use super::blocks::{AttentionBlock, AttentionBlockConfig, MidBlock, MidBlockConfig, ResidualBlock, ResidualBlockConfig};
use super::cache::CausalCache;
use super::config::WanVaeConfig;
use super::conv::{CausalConv3d, CausalConv3dConfig};
use super::norm::{WanRmsNorm, WanRmsNormConfig};
use super::resample::{Resample, ResampleConfig, ResampleMode};
use burn::module::Module;
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// One entry of the encoder's flat list of down blocks (diffusers `down_blocks.N`).
// A dozen layers built once per model: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum EncoderLayer<B: Backend> {
    /// A residual block.
    Residual(ResidualBlock<B>),
    /// A per-frame attention block (at the config's `attn_scales`).
    Attention(AttentionBlock<B>),
    /// A downsampler between stages.
    Resample(Resample<B>),
}

/// The encoder; built by [`WanVaeConfig::init`].
#[derive(Module, Debug)]
pub struct WanEncoder<B: Backend> {
    /// 3×3×3 causal convolution from the 3 RGB channels to the first stage's width.
    pub conv_in: CausalConv3d<B>,
    /// The stages' layers in order.
    pub down_blocks: Vec<EncoderLayer<B>>,
    /// The middle block.
    pub mid_block: MidBlock<B>,
    /// Norm of the middle block's output, followed by SiLU.
    pub norm_out: WanRmsNorm<B, 4>,
    /// 3×3×3 causal convolution to `2·z_dim` channels (mean and log-variance).
    pub conv_out: CausalConv3d<B>,
}

impl<B: Backend> WanEncoder<B> {
    pub(crate) fn new(config: &WanVaeConfig, device: &B::Device) -> Self {
        let dims = config.encoder_dims();
        let stages = config.dim_mult.len();
        let mut down_blocks = Vec::new();
        let mut scale = 1.0;
        for stage in 0..stages {
            let (mut in_dim, out_dim) = (dims[stage], dims[stage + 1]);
            for _ in 0..config.num_res_blocks {
                down_blocks.push(EncoderLayer::Residual(ResidualBlockConfig::new(in_dim, out_dim).init(device)));
                if config.attn_scales.contains(&scale) {
                    down_blocks.push(EncoderLayer::Attention(AttentionBlockConfig::new(out_dim).init(device)));
                }
                in_dim = out_dim;
            }
            if stage + 1 < stages {
                let mode = match config.temperal_downsample[stage] {
                    true => ResampleMode::Downsample3d,
                    false => ResampleMode::Downsample2d,
                };
                down_blocks.push(EncoderLayer::Resample(ResampleConfig::new(out_dim, mode).init(device)));
                scale /= 2.0;
            }
        }
        let out_dim = dims[stages];
        Self {
            conv_in: CausalConv3dConfig::new([3, dims[0]], [3, 3, 3]).with_padding([1, 1, 1]).init(device),
            down_blocks,
            mid_block: MidBlockConfig::new(out_dim).init(device),
            norm_out: WanRmsNormConfig::new(out_dim).init(device),
            conv_out: CausalConv3dConfig::new([out_dim, 2 * config.z_dim], [3, 3, 3]).with_padding([1, 1, 1]).init(device),
        }
    }
}

impl<B: AttentionBackend> WanEncoder<B> {
    /// One chunk of the stream whose causal state is `cache`.
    pub(crate) fn forward(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        cache.start_chunk();
        let mut x = self.conv_in.forward_cached(x, cache.next_slot());
        for layer in &self.down_blocks {
            x = match layer {
                EncoderLayer::Residual(block) => block.forward(x, cache),
                EncoderLayer::Attention(block) => block.forward(x),
                EncoderLayer::Resample(block) => block.forward(x, cache),
            };
        }
        let x = self.mid_block.forward(x, cache);
        self.conv_out.forward_cached(self.norm_out.forward_silu(x), cache.next_slot())
    }
}
