//! The DiT's row norms with their affine, on host f32 values in one pass per row: RMSNorm
//! `x / √(mean(x²) + eps) · γ` (the q and k norms) and LayerNorm `(x − mean) / √(var + eps) · γ
//! (+ β)` (the cross-attention norm), over the last dimension of `x: [rows, dim]` (row-major).
//! Statistics are accumulated in f64. Tasks are blocks of rows on the current rayon pool; each row
//! is computed by one task, so results are the same at any thread count. Forward only: under
//! autodiff the model composes the same formula from tensor ops.

use super::{HostValues, tensor};
use crate::backend::RowNorm;
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// Rows per task.
const ROWS: usize = 32;

/// The norm `kind` with weight `gamma` of each `dim`-long row of `x`. Panics when `x` is not
/// whole rows or a weight is not `dim` long.
pub fn norm(x: &[f32], dim: usize, gamma: &[f32], kind: RowNorm<&[f32]>, eps: f64) -> Vec<f32> {
    let weights_fit = gamma.len() == dim && !matches!(kind, RowNorm::Layer(Some(b)) if b.len() != dim);
    assert!(dim > 0 && x.len().is_multiple_of(dim) && weights_fit, "norm: {} values, weights for rows of {dim}", x.len());
    let mut out = vec![0.0; x.len()];
    out.par_chunks_mut(ROWS * dim).zip(x.par_chunks(ROWS * dim)).for_each(|(o, x)| {
        for (o, x) in o.chunks_exact_mut(dim).zip(x.chunks_exact(dim)) {
            row(x, o, gamma, &kind, eps);
        }
    });
    out
}

fn row(x: &[f32], o: &mut [f32], gamma: &[f32], kind: &RowNorm<&[f32]>, eps: f64) {
    let d = x.len() as f64;
    match kind {
        RowNorm::Rms => {
            let ms = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / d;
            let inv = (1.0 / (ms + eps).sqrt()) as f32;
            o.iter_mut().zip(x).zip(gamma).for_each(|((o, &x), &g)| *o = x * inv * g);
        }
        RowNorm::Layer(beta) => {
            let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / d;
            let var = x.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / d;
            let (mean, inv) = (mean as f32, (1.0 / (var + eps).sqrt()) as f32);
            o.iter_mut().zip(x).zip(gamma).for_each(|((o, &x), &g)| *o = (x - mean) * inv * g);
            if let Some(beta) = beta {
                o.iter_mut().zip(beta.iter()).for_each(|(o, &b)| *o += b);
            }
        }
    }
}

/// [`norm`] on backend tensors: `x` `[rows, dim]`, `gamma` (and a LayerNorm's bias) `[dim]` (f32
/// only; `None` otherwise).
pub(crate) fn norm_tensor<B: HostValues>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    kind: RowNorm<FloatTensor<B>>,
    eps: f64,
) -> Option<FloatTensor<B>> {
    let dims = x.shape().dims::<2>();
    let device = B::float_device(&x);
    let (x, gamma) = (B::values::<2>(&x)?, B::values::<1>(&gamma)?);
    let beta = match &kind {
        RowNorm::Layer(Some(b)) => Some(B::values::<1>(b)?),
        _ => None,
    };
    let kind = match kind {
        RowNorm::Rms => RowNorm::Rms,
        RowNorm::Layer(_) => RowNorm::Layer(beta.as_deref()),
    };
    Some(tensor::<B, 2>(norm(&x, dims[1], &gamma, kind, eps), dims, &device))
}
