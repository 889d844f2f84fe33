//! The DiT's adaptive LayerNorm on host f32 values in one pass per token:
//! `(x − mean) / √(var + eps) · (1 + scale) + shift` over the last dimension of `x: [batch,
//! frames, tokens, dim]`, with `shift, scale: [batch, frames, 1, dim]` (one modulation per frame).
//! Mean and biased variance are accumulated in f64. Tasks are (batch, frame) rows on the current
//! rayon pool; each token is computed by one task, so results are the same at any thread count.
//! Forward only: under autodiff the model composes the same formula from tensor ops.

use super::{HostValues, tensor};
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// [`adaln`] of `x` (`dims = [batch, frames, tokens, dim]`, row-major) with per-frame `shift`
/// and `scale` (`[batch, frames, dim]` values). Panics when a length differs from the dims.
pub fn adaln(x: &[f32], shift: &[f32], scale: &[f32], dims: [usize; 4], eps: f64) -> Vec<f32> {
    let [b, f, n, d] = dims;
    assert!(x.len() == b * f * n * d && shift.len() == b * f * d && scale.len() == shift.len(), "adaln: lengths for {dims:?}");
    let mut out = vec![0.0; x.len()];
    let frame = (n * d).max(1);
    out.par_chunks_mut(frame).zip(x.par_chunks(frame)).enumerate().for_each(|(r, (o, x))| {
        let (shift, scale) = (&shift[r * d..(r + 1) * d], &scale[r * d..(r + 1) * d]);
        for (o, x) in o.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
            let var = x.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / d as f64;
            let (mean, inv) = (mean as f32, (1.0 / (var + eps).sqrt()) as f32);
            for j in 0..d {
                o[j] = (x[j] - mean) * inv * (1.0 + scale[j]) + shift[j];
            }
        }
    });
    out
}

/// [`adaln`] on backend tensors: `x` `[batch, frames, tokens, dim]`, `shift`, `scale`
/// `[batch, frames, 1, dim]` (f32 only, exactly these shapes; `None` otherwise).
pub(crate) fn adaln_tensor<B: HostValues>(
    x: FloatTensor<B>,
    shift: FloatTensor<B>,
    scale: FloatTensor<B>,
    eps: f64,
) -> Option<FloatTensor<B>> {
    let dims = x.shape().dims::<4>();
    let table = [dims[0], dims[1], 1, dims[3]];
    if shift.shape().dims::<4>() != table || scale.shape().dims::<4>() != table {
        return None;
    }
    let device = B::float_device(&x);
    let out = adaln(&B::values::<4>(&x)?, &B::values::<4>(&shift)?, &B::values::<4>(&scale)?, dims, eps);
    Some(tensor::<B, 4>(out, dims, &device))
}
