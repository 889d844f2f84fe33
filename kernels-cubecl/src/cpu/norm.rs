//! The DiT's row norms on host f32 values, forward and backward: `y = n(x)·a_g (+ c_g)` over the
//! last dimension of `x: [rows, dim]` (row-major), `n` being RMSNorm `x / √(mean(x²) + eps)` or
//! LayerNorm `(x − mean) / √(var + eps)` (biased variance). The rows fall in `groups` equal
//! consecutive runs, each with its own weight `a_g` and optional bias `c_g` (`[groups, dim]`): one
//! group with `a = γ` (and `c = β`) is an affine RMSNorm or LayerNorm (the q, k and
//! cross-attention norms); one group per latent frame with `a = 1 + scale` and `c = shift` is the
//! blocks' adaptive LayerNorm.
//!
//! The backward recomputes `n` from `x`: `dn = dy·a_g`, `da_g = Σ dy·n` and `dc_g = Σ dy` over
//! the group's rows, and `dx = (dn − mean(dn) − n·mean(dn·n)) / σ` (RMSNorm drops `mean(dn)`).
//!
//! Row sums are accumulated in f64 over 8 interleaved lanes (for instruction-level
//! parallelism; Rust never reorders a float sum) added in lane order. Tasks are blocks of
//! 32 rows inside one group on the current rayon pool, and the weight and bias gradients
//! are per-block sums added in block order: results are the same at any thread count.

use super::simd::dispatch;
use super::{HostValues, tensor};
use crate::backend::RowNorm;
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// Rows per task.
const ROWS: usize = 32;

/// Independent accumulators of a row sum.
const LANES: usize = 8;

/// `Σ f(x_j, y_j)` over the two rows in [`LANES`] interleaved f64 lanes: element `j` goes to
/// lane `j % LANES`, and the lanes are added in order.
#[inline(always)]
fn lane_sum(x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    for (a, (&x, &y)) in acc.iter_mut().zip(xs.remainder().iter().zip(ys.remainder())) {
        *a += f(x, y);
    }
    for (x, y) in xs.zip(ys) {
        for l in 0..LANES {
            acc[l] += f(x[l], y[l]);
        }
    }
    acc.iter().sum()
}

/// `(mean, 1/σ)` of a row in f32: LayerNorm's mean and inverse standard deviation, or 0 and
/// RMSNorm's inverse root mean square.
#[inline(always)]
fn stats(x: &[f32], kind: RowNorm, eps: f64) -> (f32, f32) {
    let d = x.len() as f64;
    let mean = match kind {
        RowNorm::Rms => 0.0,
        RowNorm::Layer => lane_sum(x, x, |v, _| f64::from(v)) / d,
    };
    let var = lane_sum(x, x, |v, _| (f64::from(v) - mean) * (f64::from(v) - mean)) / d;
    (mean as f32, (1.0 / (var + eps).sqrt()) as f32)
}

/// Values per group of rows of `x` (`weight.len() / dim` groups). Panics unless `x` is whole
/// groups of `dim`-long rows.
fn group_len(x: &[f32], dim: usize, weight: &[f32]) -> usize {
    let groups = weight.len() / dim.max(1);
    let fits = dim > 0 && groups > 0 && weight.len() == groups * dim && x.len().is_multiple_of(groups * dim);
    assert!(fits, "norm: {} values, a weight of {} for rows of {dim}", x.len(), weight.len());
    x.len() / groups
}

/// The norm `kind` of each `dim`-long row of `x`, times its group's `weight` row, plus its
/// `bias` row. Panics when `x` is not whole groups of rows or a bias differs from the weight.
pub fn norm(x: &[f32], dim: usize, weight: &[f32], bias: Option<&[f32]>, kind: RowNorm, eps: f64) -> Vec<f32> {
    let group = group_len(x, dim, weight);
    assert!(bias.is_none_or(|b| b.len() == weight.len()), "norm: a bias unlike the weight");
    let mut out = vec![0.0; x.len()];
    if x.is_empty() {
        return out;
    }
    out.par_chunks_mut(group).zip(x.par_chunks(group)).enumerate().for_each(|(g, (o, x))| {
        let a = &weight[g * dim..(g + 1) * dim];
        let c = bias.map(|b| &b[g * dim..(g + 1) * dim]);
        o.par_chunks_mut(ROWS * dim).zip(x.par_chunks(ROWS * dim)).for_each(|(o, x)| forward_rows(x, o, a, c, kind, eps));
    });
    out
}

/// Gradients `[dx, dweight, dbias]` of [`norm`] from the output gradient `grad` (`dbias` is
/// `Σ grad` per group, whether the forward had a bias or not). Panics like [`norm`].
pub fn norm_backward(x: &[f32], dim: usize, weight: &[f32], kind: RowNorm, eps: f64, grad: &[f32]) -> [Vec<f32>; 3] {
    let group = group_len(x, dim, weight);
    assert_eq!(grad.len(), x.len(), "norm: the gradient has {} values for {}", grad.len(), x.len());
    let mut dx = vec![0.0; x.len()];
    if x.is_empty() {
        return [dx, vec![0.0; weight.len()], vec![0.0; weight.len()]];
    }
    let per_group: Vec<[Vec<f32>; 2]> = dx
        .par_chunks_mut(group)
        .zip(x.par_chunks(group).zip(grad.par_chunks(group)))
        .zip(weight.par_chunks(dim))
        .map(|((dx, (x, dy)), a)| {
            let blocks: Vec<[Vec<f32>; 2]> = dx
                .par_chunks_mut(ROWS * dim)
                .zip(x.par_chunks(ROWS * dim).zip(dy.par_chunks(ROWS * dim)))
                .map(|(dx, (x, dy))| {
                    let mut sums = [vec![0.0; dim], vec![0.0; dim]];
                    backward_rows(x, dy, a, kind, eps, dx, &mut sums);
                    sums
                })
                .collect();
            blocks
                .into_iter()
                .reduce(|[mut da, mut dc], [a, c]| {
                    da.iter_mut().zip(a).for_each(|(s, v)| *s += v);
                    dc.iter_mut().zip(c).for_each(|(s, v)| *s += v);
                    [da, dc]
                })
                .expect("a group has rows")
        })
        .collect();
    let (dweight, dbias): (Vec<_>, Vec<_>) = per_group.into_iter().map(|[da, dc]| (da, dc)).unzip();
    [dx, dweight.concat(), dbias.concat()]
}

/// [`norm`] of the rows of `x` (one group's) into `o`.
fn forward_rows(x: &[f32], o: &mut [f32], a: &[f32], c: Option<&[f32]>, kind: RowNorm, eps: f64) {
    dispatch!(forward_body(x: &[f32], o: &mut [f32], a: &[f32], c: Option<&[f32]>, kind: RowNorm, eps: f64) -> ())
}

#[inline(always)]
fn forward_body(x: &[f32], o: &mut [f32], a: &[f32], c: Option<&[f32]>, kind: RowNorm, eps: f64) {
    for (o, x) in o.chunks_exact_mut(a.len()).zip(x.chunks_exact(a.len())) {
        let (mean, inv) = stats(x, kind, eps);
        o.iter_mut().zip(x.iter().zip(a)).for_each(|(o, (&x, &a))| *o = (x - mean) * inv * a);
        if let Some(c) = c {
            o.iter_mut().zip(c).for_each(|(o, &c)| *o += c);
        }
    }
}

/// The `dx` of the rows of `x` (one group's), with their terms of the weight and bias gradients
/// added to `sums`.
fn backward_rows(x: &[f32], dy: &[f32], a: &[f32], kind: RowNorm, eps: f64, dx: &mut [f32], sums: &mut [Vec<f32>; 2]) {
    dispatch!(backward_body(x: &[f32], dy: &[f32], a: &[f32], kind: RowNorm, eps: f64, dx: &mut [f32], sums: &mut [Vec<f32>; 2]) -> ())
}

#[inline(always)]
fn backward_body(x: &[f32], dy: &[f32], a: &[f32], kind: RowNorm, eps: f64, dx: &mut [f32], [da, dc]: &mut [Vec<f32>; 2]) {
    let d = a.len() as f64;
    for (dx, (x, dy)) in dx.chunks_exact_mut(a.len()).zip(x.chunks_exact(a.len()).zip(dy.chunks_exact(a.len()))) {
        let (mean, inv) = stats(x, kind, eps);
        for ((da, dc), (&x, &dy)) in da.iter_mut().zip(dc.iter_mut()).zip(x.iter().zip(dy)) {
            *da += dy * ((x - mean) * inv);
            *dc += dy;
        }
        // dn = dy·a in dx first.
        dx.iter_mut().zip(dy.iter().zip(a)).for_each(|(dn, (&dy, &a))| *dn = dy * a);
        let mean_dn = match kind {
            RowNorm::Rms => 0.0,
            RowNorm::Layer => (lane_sum(dx, dx, |dn, _| f64::from(dn)) / d) as f32,
        };
        let mean_dnn = (lane_sum(dx, x, |dn, x| f64::from(dn * ((x - mean) * inv))) / d) as f32;
        for (dx, &x) in dx.iter_mut().zip(x) {
            *dx = (*dx - mean_dn - (x - mean) * inv * mean_dnn) * inv;
        }
    }
}

/// [`norm`] on backend tensors: `x` `[rows, dim]`, `weight` (and `bias`) `[groups, dim]` (f32
/// only; `None` otherwise).
pub(crate) fn norm_tensor<B: HostValues>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    kind: RowNorm,
    eps: f64,
) -> Option<FloatTensor<B>> {
    let dims = x.shape().dims::<2>();
    let device = B::float_device(&x);
    let (x, weight) = (B::values::<2>(&x)?, B::values::<2>(&weight)?);
    let bias = match &bias {
        Some(b) => Some(B::values::<2>(b)?),
        None => None,
    };
    Some(tensor::<B, 2>(norm(&x, dims[1], &weight, bias.as_deref(), kind, eps), dims, &device))
}

/// [`norm_backward`] on backend tensors: `[dx, dweight, dbias]` shaped like `x`, `weight` and
/// `weight` (f32 only; `None` otherwise).
pub(crate) fn norm_backward_tensor<B: HostValues>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    kind: RowNorm,
    eps: f64,
    grad: FloatTensor<B>,
) -> Option<[FloatTensor<B>; 3]> {
    let (dims, table) = (x.shape().dims::<2>(), weight.shape().dims::<2>());
    let device = B::float_device(&x);
    let (x, weight, grad) = (B::values::<2>(&x)?, B::values::<2>(&weight)?, B::values::<2>(&grad)?);
    let [dx, dw, db] = norm_backward(&x, dims[1], &weight, kind, eps, &grad);
    Some([tensor::<B, 2>(dx, dims, &device), tensor::<B, 2>(dw, table, &device), tensor::<B, 2>(db, table, &device)])
}
