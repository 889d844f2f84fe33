//! The Wan VAE's causal 3-D convolution on host f32 values, forward only: unit stride,
//! `x: [batch, in, frames, height, width]`, `weight: [out, in, kt, kh, kw]`, `bias: [out]`,
//! padded with `time_pad` zero frames on the past side and `pad = [ph, pw]` zeros on both sides
//! of each row and column, → `[batch, out, frames + time_pad − kt + 1, height + 2ph − kh + 1,
//! width + 2pw − kw + 1]`.
//!
//! Each task is one output frame of one clip: it gathers a block of output rows as columns
//! (`in·kt·kh·kw` taps × positions, every tap a contiguous copy of an input row segment with the
//! zero padding written around it) and multiplies them with the weight in one single-threaded
//! GEMM (`cpu::gemm`) onto the bias. No padded copy of the input is made. Tasks run on the
//! current rayon pool and each output element is computed by one task in one fixed order, so
//! results are the same at any thread count. Under autodiff the model runs the backend's conv3d.

use super::gemm::{View, matmul};
use super::{HostValues, tensor};
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// Columns gathered per GEMM: `taps × positions` stays about this many floats (1 MiB), so the
/// block and the weight sit in the core's cache.
const BLOCK_FLOATS: usize = 1 << 18;

/// The convolution's sizes; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv3dDims {
    /// `[batch, in, frames, height, width]` of the input.
    pub input: [usize; 5],
    /// `[out, in, kt, kh, kw]` of the weight.
    pub weight: [usize; 5],
    /// Past-side zero frames.
    pub time_pad: usize,
    /// `[ph, pw]` zeros on both sides.
    pub pad: [usize; 2],
}

impl Conv3dDims {
    /// `[batch, out, frames, height, width]` of the output, or `None` when the kernel does not
    /// fit the padded input or the channel counts differ.
    pub fn output(&self) -> Option<[usize; 5]> {
        let [b, cin, t, h, w] = self.input;
        let [cout, win, kt, kh, kw] = self.weight;
        let [ph, pw] = self.pad;
        let fits = |n: usize, k: usize| (n >= k && k > 0).then(|| n + 1 - k);
        if win != cin {
            return None;
        }
        Some([b, cout, fits(t + self.time_pad, kt)?, fits(h + 2 * ph, kh)?, fits(w + 2 * pw, kw)?])
    }
}

/// The convolution of row-major `x` with `weight` and `bias`; see the module docs.
///
/// Panics when the dims do not fit (see [`Conv3dDims::output`]) or a slice length differs.
pub fn conv3d(x: &[f32], weight: &[f32], bias: &[f32], dims: Conv3dDims) -> Vec<f32> {
    let out_dims = dims.output().unwrap_or_else(|| panic!("conv3d: {dims:?} do not fit"));
    let [b, cin, t, h, w] = dims.input;
    let [cout, _, kt, kh, kw] = dims.weight;
    let [_, _, to, ho, wo] = out_dims;
    assert!(
        x.len() == b * cin * t * h * w && weight.len() == cout * cin * kt * kh * kw && bias.len() == cout,
        "conv3d: lengths for {dims:?}"
    );
    let taps = cin * kt * kh * kw;
    let frame = ho * wo;
    let rows_per_block = (BLOCK_FLOATS / (taps * wo).max(1)).clamp(1, ho.max(1));
    // One task per (clip, output frame): its [out, ho·wo] values, computed onto the bias.
    let frames: Vec<Vec<f32>> = (0..b * to)
        .into_par_iter()
        .map(|task| {
            let (clip, tau) = (task / to, task % to);
            let mut out = vec![0.0; cout * frame];
            for (o, &bias) in out.chunks_exact_mut(frame.max(1)).zip(bias) {
                o.fill(bias);
            }
            let mut columns = vec![0.0; taps * rows_per_block * wo];
            for y0 in (0..ho).step_by(rows_per_block) {
                let rows = rows_per_block.min(ho - y0);
                let n = rows * wo;
                gather(&mut columns[..taps * n], x, dims, clip, tau, y0, rows, wo);
                let a = View::rows(weight, cout, taps, taps);
                let cols = View::rows(&columns[..taps * n], taps, n, n);
                matmul(&mut out[y0 * wo..], frame, a, cols, 1.0, true);
            }
            out
        })
        .collect();
    let mut out = vec![0.0; b * cout * to * frame];
    for (task, values) in frames.iter().enumerate() {
        let (clip, tau) = (task / to, task % to);
        for (co, src) in values.chunks_exact(frame.max(1)).enumerate() {
            let start = ((clip * cout + co) * to + tau) * frame;
            out[start..start + frame].copy_from_slice(src);
        }
    }
    out
}

/// Writes the columns of output rows `y0..y0 + rows` of output frame `tau` of `clip`: row
/// `((ci·kt + dt)·kh + dy)·kw + dx` (the weight's flattening) holds, for each position, the input
/// value that tap reads, zero in the padding.
#[allow(clippy::too_many_arguments)]
fn gather(columns: &mut [f32], x: &[f32], dims: Conv3dDims, clip: usize, tau: usize, y0: usize, rows: usize, wo: usize) {
    let [_, cin, t, h, w] = dims.input;
    let [_, _, kt, kh, kw] = dims.weight;
    let [ph, pw] = dims.pad;
    let n = rows * wo;
    let mut row = 0;
    for ci in 0..cin {
        for dt in 0..kt {
            // Input frame of this tap: output frame τ reads padded frame τ + dt.
            let frame = (tau + dt).checked_sub(dims.time_pad).filter(|&f| f < t);
            for dy in 0..kh {
                for dx in 0..kw {
                    let dst = &mut columns[row * n..(row + 1) * n];
                    row += 1;
                    let Some(f) = frame else {
                        dst.fill(0.0);
                        continue;
                    };
                    // Output column x reads input column x + dx − pw: the valid x range.
                    let x_lo = pw.saturating_sub(dx).min(wo);
                    let x_hi = (w + pw).saturating_sub(dx).clamp(x_lo, wo);
                    for (r, dst) in dst.chunks_exact_mut(wo).enumerate() {
                        let Some(yi) = (y0 + r + dy).checked_sub(ph).filter(|&yi| yi < h) else {
                            dst.fill(0.0);
                            continue;
                        };
                        let src = (((clip * cin + ci) * t + f) * h + yi) * w;
                        dst[..x_lo].fill(0.0);
                        if x_lo < x_hi {
                            dst[x_lo..x_hi].copy_from_slice(&x[src + x_lo + dx - pw..src + x_hi + dx - pw]);
                        }
                        dst[x_hi..].fill(0.0);
                    }
                }
            }
        }
    }
}

/// [`conv3d`] on backend tensors (f32 only, `None` for other dtypes or dims that do not fit).
pub(crate) fn conv3d_tensor<B: HostValues>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: FloatTensor<B>,
    time_pad: usize,
    pad: [usize; 2],
) -> Option<FloatTensor<B>> {
    let dims = Conv3dDims { input: x.shape().dims(), weight: weight.shape().dims(), time_pad, pad };
    let out_dims = dims.output()?;
    if bias.shape().dims::<1>() != [dims.weight[0]] {
        return None;
    }
    let device = B::float_device(&x);
    let out = conv3d(&B::values::<5>(&x)?, &B::values::<5>(&weight)?, &B::values::<1>(&bias)?, dims);
    Some(tensor::<B, 5>(out, out_dims, &device))
}
