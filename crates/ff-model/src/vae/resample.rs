//! Spatial (and temporal) 2× resampling between the stages of the Wan VAE.
//!
//! `[B, C, T, H, W]` ->
//! * `Upsample2d`: `[B, C/2, T, 2H, 2W]` (nearest 2×, then 3×3 conv);
//! * `Upsample3d`: time first: a causal `(3,1,1)` conv to `2C` channels whose halves become two
//!   frames, so `T -> 2T`, except the very first chunk of a stream, which passes with its `T`
//!   unchanged (diffusers marks it `"Rep"`); then as `Upsample2d`;
//! * `Downsample2d`: `[B, C, T, ⌊(H-1)/2⌋+1, ⌊(W-1)/2⌋+1]` (zero pad right/bottom, 3×3 conv stride 2);
//! * `Downsample3d`: as `Downsample2d`, then time: the first chunk passes unchanged, every later
//!   chunk is prefixed with the last frame of the previous one and convolved with a `(3,1,1)`
//!   stride-2 conv, so 4 frames become 2 and 2 become 1.

use super::cache::{CacheSlot, CausalCache};
use super::conv::{CausalConv3d, CausalConv3dConfig};
use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::AttentionBackend;
use kernels_cubecl::causal_conv3d;
use serde::{Deserialize, Serialize};

/// The kind of a [`Resample`] layer (diffusers' `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResampleMode {
    /// 2× in space, channels halved.
    Upsample2d,
    /// 2× in time (but on a stream's first chunk), then as `Upsample2d`.
    Upsample3d,
    /// ½× in space.
    Downsample2d,
    /// ½× in space, then ½× in time (but on a stream's first chunk).
    Downsample3d,
}

/// Configuration of a [`Resample`] layer on `dim` channels.
#[derive(Config, Debug)]
pub struct ResampleConfig {
    /// Input channels.
    pub dim: usize,
    /// What the layer does.
    pub mode: ResampleMode,
}

impl ResampleConfig {
    /// A freshly initialised layer.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Resample<B> {
        let dim = self.dim;
        let (resample, time_conv) = match self.mode {
            ResampleMode::Upsample2d | ResampleMode::Upsample3d => (
                Conv2dConfig::new([dim, dim / 2], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)),
                CausalConv3dConfig::new([dim, 2 * dim], [3, 1, 1]).with_padding([1, 0, 0]),
            ),
            ResampleMode::Downsample2d | ResampleMode::Downsample3d => (
                Conv2dConfig::new([dim, dim], [3, 3]).with_stride([2, 2]).with_padding(PaddingConfig2d::Explicit(0, 0, 1, 1)),
                CausalConv3dConfig::new([dim, dim], [3, 1, 1]).with_stride([2, 1, 1]),
            ),
        };
        let temporal = matches!(self.mode, ResampleMode::Upsample3d | ResampleMode::Downsample3d);
        Resample { resample: resample.init(device), time_conv: temporal.then(|| time_conv.init(device)), mode: self.mode }
    }
}

/// A resampling layer (diffusers `WanResample`).
#[derive(Module, Debug)]
pub struct Resample<B: Backend> {
    /// The per-frame 3×3 convolution (diffusers `resample.1`).
    pub resample: Conv2d<B>,
    /// The temporal convolution of the `*3d` modes.
    pub time_conv: Option<CausalConv3d<B>>,
    mode: ResampleMode,
}

impl<B: AttentionBackend> Resample<B> {
    /// Whether the layer doubles the frames (`Upsample3d`).
    pub(crate) fn doubles_time(&self) -> bool {
        self.mode == ResampleMode::Upsample3d
    }

    pub(crate) fn forward(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        match (self.mode, &self.time_conv) {
            (ResampleMode::Upsample3d, Some(time_conv)) => {
                let x = upsample_time(time_conv, x, cache.next_slot());
                self.per_frame(x)
            }
            (ResampleMode::Downsample3d, Some(time_conv)) => {
                let x = self.per_frame(x);
                downsample_time(time_conv, x, cache.next_slot())
            }
            _ => self.per_frame(x),
        }
    }

    /// The spatial part, frame by frame: after a nearest 2× upsampling, on the CPU kernel where
    /// it runs (the 3×3 convolution as a `1×3×3` causal one, no frame reordering).
    fn per_frame(&self, x: Tensor<B, 5>) -> Tensor<B, 5> {
        let x = match self.mode {
            ResampleMode::Upsample2d | ResampleMode::Upsample3d => {
                let x = nearest_2x(x);
                let [out, channels, kh, kw] = self.resample.weight.dims();
                let weight = self.resample.weight.val().reshape([out, channels, 1, kh, kw]);
                let bias = self.resample.bias.as_ref().map(|b| b.val()).unwrap_or_else(|| Tensor::zeros([out], &x.device()));
                if let Some(y) = causal_conv3d(x.clone(), weight, bias, 0, [kh / 2, kw / 2]) {
                    return y;
                }
                x
            }
            ResampleMode::Downsample2d | ResampleMode::Downsample3d => x,
        };
        let [b, c, t, h, w] = x.dims();
        let frames = x.permute([0, 2, 1, 3, 4]).reshape([b * t, c, h, w]);
        let y = self.resample.forward(frames);
        let [_, c, h, w] = y.dims();
        y.reshape([b, t, c, h, w]).permute([0, 2, 1, 3, 4])
    }
}

/// Nearest-neighbour 2× upsampling of the frames of `[B, C, T, H, W]` (equal to PyTorch's
/// `nearest-exact` at 2×).
fn nearest_2x<B: Backend>(x: Tensor<B, 5>) -> Tensor<B, 5> {
    let [b, c, t, h, w] = x.dims();
    x.reshape([b * c * t, h, 1, w, 1]).expand([b * c * t, h, 2, w, 2]).reshape([b, c, t, 2 * h, 2 * w])
}

/// `T -> 2T` through the causal time convolution; the first chunk of a stream passes unchanged.
fn upsample_time<B: AttentionBackend>(conv: &CausalConv3d<B>, x: Tensor<B, 5>, slot: &mut CacheSlot<B>) -> Tensor<B, 5> {
    if matches!(slot, CacheSlot::Empty) {
        *slot = CacheSlot::FirstChunkDone;
        return x;
    }
    let [b, c, t, h, w] = x.dims();
    // Output channel halves [0, c) and [c, 2c) are the two frames made from each input frame.
    conv.forward_cached(x, slot).reshape([b, 2, c, t, h, w]).permute([0, 2, 3, 1, 4, 5]).reshape([b, c, 2 * t, h, w])
}

/// Halves time with the stride-2 time convolution; the first chunk of a stream passes unchanged.
fn downsample_time<B: AttentionBackend>(conv: &CausalConv3d<B>, x: Tensor<B, 5>, slot: &mut CacheSlot<B>) -> Tensor<B, 5> {
    let t = x.dims()[2];
    let last = x.clone().narrow(2, t - 1, 1);
    let previous = slot.take_frames();
    *slot = CacheSlot::Frames(last);
    match previous {
        Some(prev) => conv.forward(Tensor::cat(vec![prev, x], 2)),
        None => x,
    }
}
