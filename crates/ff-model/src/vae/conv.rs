//! Causal 3-D convolution: `[B, Cin, T, H, W] -> [B, Cout, T', H', W']`.
//!
//! Height and width are zero-padded on both sides; time is padded only on the past side
//! (`2·padding_t` frames), so output frame `t` sees input frames `≤ t`. Run chunk by chunk through
//! `CausalConv3d::forward_cached`, the zero padding is replaced by the last input frames of the
//! previous chunk, which gives exactly the output of one run over the whole sequence.
//!
//! Unit-stride convolutions on the CPU backends' f32 tensors without autodiff (inference) run the
//! CPU kernel [`kernels_cubecl::causal_conv3d`], which reads the padding in place and gathers
//! whole row segments. Otherwise, on NdArray, whose conv3d is a per-element loop (forward and
//! backward), they run as one matrix product over the `kt·kh·kw` shifted views of the padded
//! input (im2col): the same sum at matmul speed. Every other case runs the backend's conv3d
//! (Flex under autodiff: tiled im2col + GEMM, 1.8× faster than the shifted views there for a
//! codec training step; the Cube backends: their conv kernels).

use super::cache::CacheSlot;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::conv::Conv3dConfig;
use burn::tensor::module::conv3d;
use burn::tensor::ops::{ConvOptions, PadMode};
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::{AttentionBackend, causal_conv3d};

/// Frames a causal layer keeps between chunks (diffusers' `CACHE_T`).
pub(crate) const CACHE_FRAMES: usize = 2;

/// Configuration of a [`CausalConv3d`] (PyTorch `Conv3d` arguments).
#[derive(Config, Debug)]
pub struct CausalConv3dConfig {
    /// `[in, out]` channels.
    pub channels: [usize; 2],
    /// `[t, h, w]` kernel size.
    pub kernel_size: [usize; 3],
    /// `[t, h, w]` stride.
    #[config(default = "[1, 1, 1]")]
    pub stride: [usize; 3],
    /// `[t, h, w]` padding as given to PyTorch; time becomes `2·t` past-side frames.
    #[config(default = "[0, 0, 0]")]
    pub padding: [usize; 3],
}

impl CausalConv3dConfig {
    /// A freshly initialised convolution with bias.
    pub fn init<B: Backend>(&self, device: &B::Device) -> CausalConv3d<B> {
        let conv = Conv3dConfig::new(self.channels, self.kernel_size).init::<B>(device);
        CausalConv3d {
            weight: conv.weight,
            bias: conv.bias.expect("Conv3dConfig has a bias by default"),
            stride: self.stride,
            padding: self.padding,
        }
    }
}

/// A 3-D convolution padded causally in time.
#[derive(Module, Debug)]
pub struct CausalConv3d<B: Backend> {
    /// `[out, in, kt, kh, kw]`.
    pub weight: Param<Tensor<B, 5>>,
    /// `[out]`.
    pub bias: Param<Tensor<B, 1>>,
    stride: [usize; 3],
    padding: [usize; 3],
}

impl<B: AttentionBackend> CausalConv3d<B> {
    /// Past input frames an output frame reads (the causal time padding).
    pub(crate) fn past_frames(&self) -> usize {
        2 * self.padding[0]
    }

    /// The whole sequence at once, zero history.
    pub fn forward(&self, x: Tensor<B, 5>) -> Tensor<B, 5> {
        self.conv(x, 2 * self.padding[0])
    }

    /// One chunk: the frames kept in `slot` by the previous chunk stand in for the zero padding,
    /// and the last [`CACHE_FRAMES`] input frames are kept for the next chunk.
    pub(crate) fn forward_cached(&self, x: Tensor<B, 5>, slot: &mut CacheSlot<B>) -> Tensor<B, 5> {
        let new = x.dims()[2];
        let input = match slot.take_frames() {
            Some(prev) => Tensor::cat(vec![prev, x], 2),
            None => x,
        };
        let len = input.dims()[2];
        let keep = CACHE_FRAMES.min(len);
        *slot = CacheSlot::Frames(input.clone().narrow(2, len - keep, keep));
        self.conv(input, (2 * self.padding[0]).saturating_sub(len - new))
    }

    fn conv(&self, x: Tensor<B, 5>, time_pad: usize) -> Tensor<B, 5> {
        let [_, ph, pw] = self.padding;
        if self.stride == [1, 1, 1]
            && let Some(y) = causal_conv3d(x.clone(), self.weight.val(), self.bias.val(), time_pad, [ph, pw])
        {
            return y;
        }
        if self.stride != [1, 1, 1] || !conv3d_is_a_loop::<B>(&x.device()) {
            // Burn's conv3d pads symmetrically only: the past-side time padding is explicit.
            let x = x.pad([(time_pad, 0), (0, 0), (0, 0)], PadMode::Constant(0.0));
            let options = ConvOptions::new(self.stride, [0, ph, pw], [1, 1, 1], 1);
            return conv3d(x, self.weight.val(), Some(self.bias.val()), options);
        }
        let x = x.pad([(time_pad, 0), (ph, ph), (pw, pw)], PadMode::Constant(0.0));
        let [batch, channels, t, h, w] = x.dims();
        let [out, _, kt, kh, kw] = self.weight.dims();
        let (to, ho, wo) = (t + 1 - kt, h + 1 - kh, w + 1 - kw);
        let mut views = Vec::with_capacity(kt * kh * kw);
        for dt in 0..kt {
            for dy in 0..kh {
                for dx in 0..kw {
                    views.push(x.clone().slice([0..batch, 0..channels, dt..dt + to, dy..dy + ho, dx..dx + wo]));
                }
            }
        }
        // [B, C, kt·kh·kw, ...] flattens in the order of the weight's [in, kt, kh, kw].
        let taps = channels * kt * kh * kw;
        let columns = Tensor::stack::<6>(views, 2).reshape([batch, taps, to * ho * wo]);
        let weight = self.weight.val().reshape([1, out, taps]).repeat_dim(0, batch);
        let y = weight.matmul(columns) + self.bias.val().reshape([1, out, 1]);
        y.reshape([batch, out, to, ho, wo])
    }
}

/// Whether `B`'s own conv3d is NdArray's per-element loop (also under `Autodiff`), where the
/// shifted-view matmul is faster.
fn conv3d_is_a_loop<B: Backend>(device: &B::Device) -> bool {
    B::name(device).contains("ndarray")
}
