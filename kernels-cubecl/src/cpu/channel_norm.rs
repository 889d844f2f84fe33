//! The Wan VAE's channel RMS norm on host f32 values, forward only, optionally followed by SiLU:
//! `y = x / max(‖x‖₂, 1e-12) · √C · γ` over the channels of `x: [batch, C, S]` (`S`: every
//! position after the channel dimension), `γ: [C]`, then `y · σ(y)` when `silu` is set.
//!
//! Two passes, both on the current rayon pool: the reciprocal norm of each position (a block of
//! positions per task, the channels summed in order in f32), then each `(batch, channel)` row
//! scaled (and activated) in place of a copy of `x`. Every value is computed by one task in one
//! fixed order, so results are the same at any thread count.

use super::{HostValues, tensor};
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// `F.normalize`'s lower bound on the norm.
const NORMALIZE_EPS: f32 = 1e-12;

/// Positions per task of the first pass.
const POSITIONS_PER_TASK: usize = 4096;

/// The norm of row-major `x` (`dims = [batch, C, S]`); see the module docs.
///
/// Panics when a length differs from the dims.
pub fn channel_norm(x: &[f32], gamma: &[f32], dims: [usize; 3], silu: bool) -> Vec<f32> {
    let [b, c, s] = dims;
    assert!(x.len() == b * c * s && gamma.len() == c, "channel_norm: lengths for {dims:?}");
    if x.is_empty() {
        return Vec::new();
    }
    let mut inverse = vec![0.0f32; b * s];
    inverse.par_chunks_mut(s).enumerate().for_each(|(clip, inv)| {
        inv.par_chunks_mut(POSITIONS_PER_TASK).enumerate().for_each(|(block, inv)| {
            let start = block * POSITIONS_PER_TASK;
            for channel in 0..c {
                let row = &x[(clip * c + channel) * s + start..][..inv.len()];
                inv.iter_mut().zip(row).for_each(|(acc, v)| *acc += v * v);
            }
            inv.iter_mut().for_each(|v| *v = 1.0 / v.sqrt().max(NORMALIZE_EPS));
        });
    });
    let root = (c as f32).sqrt();
    let mut out = x.to_vec();
    out.par_chunks_mut(s).enumerate().for_each(|(row, y)| {
        let (clip, channel) = (row / c, row % c);
        let scale = gamma[channel] * root;
        let inv = &inverse[clip * s..(clip + 1) * s];
        y.iter_mut().zip(inv).for_each(|(v, inv)| *v *= inv * scale);
        if silu {
            y.iter_mut().for_each(|v| *v /= 1.0 + (-*v).exp());
        }
    });
    out
}

/// [`channel_norm`] on backend tensors: `x` `[batch, C, S]`, `gamma` `[C]` (f32 only; `None`
/// otherwise).
pub(crate) fn channel_norm_tensor<B: HostValues>(x: FloatTensor<B>, gamma: FloatTensor<B>, silu: bool) -> Option<FloatTensor<B>> {
    let dims = x.shape().dims::<3>();
    if gamma.shape().dims::<1>() != [dims[1]] {
        return None;
    }
    let device = B::float_device(&x);
    let out = channel_norm(&B::values::<3>(&x)?, &B::values::<1>(&gamma)?, dims, silu);
    Some(tensor::<B, 3>(out, dims, &device))
}
