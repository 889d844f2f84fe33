//! Residual block, per-frame attention block and the middle block of the Wan VAE.
//!
//! All take and return video tensors `[B, C, T, H, W]`; the residual block changes `C` from
//! `in_dim` to `out_dim`, the others keep the shape.

use super::cache::CausalCache;
use super::conv::{CausalConv3d, CausalConv3dConfig};
use super::norm::{WanRmsNorm, WanRmsNormConfig};
use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::module::attention;
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// Configuration of a [`ResidualBlock`].
#[derive(Config, Debug)]
pub struct ResidualBlockConfig {
    /// Input channels.
    pub in_dim: usize,
    /// Output channels.
    pub out_dim: usize,
}

impl ResidualBlockConfig {
    /// A freshly initialised block (3×3×3 causal convolutions).
    pub fn init<B: Backend>(&self, device: &B::Device) -> ResidualBlock<B> {
        let conv3 = |cin, cout| CausalConv3dConfig::new([cin, cout], [3, 3, 3]).with_padding([1, 1, 1]).init(device);
        ResidualBlock {
            norm1: WanRmsNormConfig::new(self.in_dim).init(device),
            conv1: conv3(self.in_dim, self.out_dim),
            norm2: WanRmsNormConfig::new(self.out_dim).init(device),
            conv2: conv3(self.out_dim, self.out_dim),
            conv_shortcut: (self.in_dim != self.out_dim)
                .then(|| CausalConv3dConfig::new([self.in_dim, self.out_dim], [1, 1, 1]).init(device)),
        }
    }
}

/// `x + conv2(silu(norm2(conv1(silu(norm1(x))))))`, with a 1×1×1 convolution on the shortcut
/// when the channel count changes.
#[derive(Module, Debug)]
pub struct ResidualBlock<B: Backend> {
    /// Norm of the input (`in_dim` channels), followed by SiLU.
    pub norm1: WanRmsNorm<B, 4>,
    /// 3×3×3 causal convolution `in_dim → out_dim`.
    pub conv1: CausalConv3d<B>,
    /// Norm of `conv1`'s output (`out_dim` channels), followed by SiLU.
    pub norm2: WanRmsNorm<B, 4>,
    /// 3×3×3 causal convolution `out_dim → out_dim`.
    pub conv2: CausalConv3d<B>,
    /// 1×1×1 convolution `in_dim → out_dim` on the shortcut, when the two differ.
    pub conv_shortcut: Option<CausalConv3d<B>>,
}

impl<B: AttentionBackend> ResidualBlock<B> {
    /// Past frames an output frame reads through the block.
    pub(crate) fn past_frames(&self) -> usize {
        self.conv1.past_frames() + self.conv2.past_frames() + self.conv_shortcut.as_ref().map_or(0, CausalConv3d::past_frames)
    }

    pub(crate) fn forward(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        let shortcut = match &self.conv_shortcut {
            Some(conv) => conv.forward(x.clone()),
            None => x.clone(),
        };
        let x = self.conv1.forward_cached(self.norm1.forward_silu(x), cache.next_slot());
        let x = self.conv2.forward_cached(self.norm2.forward_silu(x), cache.next_slot());
        x + shortcut
    }
}

/// Configuration of an [`AttentionBlock`].
#[derive(Config, Debug)]
pub struct AttentionBlockConfig {
    /// Channels.
    pub dim: usize,
}

impl AttentionBlockConfig {
    /// A freshly initialised block.
    pub fn init<B: Backend>(&self, device: &B::Device) -> AttentionBlock<B> {
        AttentionBlock {
            norm: WanRmsNormConfig::new(self.dim).init(device),
            to_qkv: Conv2dConfig::new([self.dim, 3 * self.dim], [1, 1]).init(device),
            proj: Conv2dConfig::new([self.dim, self.dim], [1, 1]).init(device),
        }
    }
}

/// Single-head self-attention over the `H·W` pixels of each frame on its own, plus the input.
#[derive(Module, Debug)]
pub struct AttentionBlock<B: Backend> {
    /// Norm of each frame `[B·T, C, H, W]`.
    pub norm: WanRmsNorm<B, 3>,
    /// 1×1 convolution `C → 3C`: queries, keys and values.
    pub to_qkv: Conv2d<B>,
    /// 1×1 output projection `C → C`.
    pub proj: Conv2d<B>,
}

impl<B: AttentionBackend> AttentionBlock<B> {
    /// `x: [B, C, T, H, W]` → the same shape.
    pub fn forward(&self, x: Tensor<B, 5>) -> Tensor<B, 5> {
        let [b, c, t, h, w] = x.dims();
        let (n, hw) = (b * t, h * w);
        let frames = x.clone().permute([0, 2, 1, 3, 4]).reshape([n, c, h, w]);
        let qkv = self.to_qkv.forward(self.norm.forward(frames));
        // [n, 3c, h, w] -> [n, 1, hw, 3c]: one head, pixels as tokens.
        let qkv = qkv.reshape([n, 1, 3 * c, hw]).swap_dims(2, 3);
        let [q, k, v]: [Tensor<B, 4>; 3] = qkv.chunk(3, 3).try_into().expect("3 chunks of equal size");
        let y = attention(q, k, v, None, None, Default::default());
        let y = y.reshape([n, hw, c]).swap_dims(1, 2).reshape([n, c, h, w]);
        let y = self.proj.forward(y).reshape([b, t, c, h, w]).permute([0, 2, 1, 3, 4]);
        y + x
    }
}

/// Configuration of a [`MidBlock`].
#[derive(Config, Debug)]
pub struct MidBlockConfig {
    /// Channels.
    pub dim: usize,
}

impl MidBlockConfig {
    /// A freshly initialised block.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MidBlock<B> {
        let res = || ResidualBlockConfig::new(self.dim, self.dim).init(device);
        MidBlock { resnets: vec![res(), res()], attentions: vec![AttentionBlockConfig::new(self.dim).init(device)] }
    }
}

/// Residual block, attention block, residual block (diffusers `WanMidBlock` with one layer).
#[derive(Module, Debug)]
pub struct MidBlock<B: Backend> {
    /// The two residual blocks, before and after the attention.
    pub resnets: Vec<ResidualBlock<B>>,
    /// The one attention block.
    pub attentions: Vec<AttentionBlock<B>>,
}

impl<B: AttentionBackend> MidBlock<B> {
    pub(crate) fn forward(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        let mut x = self.resnets[0].forward(x, cache);
        for (attn, res) in self.attentions.iter().zip(&self.resnets[1..]) {
            x = res.forward(attn.forward(x), cache);
        }
        x
    }
}
