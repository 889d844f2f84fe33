//! The DiT's gated residual update on host f32 values, forward and backward: `x + y·g_f` over
//! `x, y: [rows, dim]` (row-major) whose rows fall in `groups` equal consecutive runs (the latent
//! frames), each with its own gate row `g_f` (`gate: [groups, dim]`, the modulation's gate of
//! the self-attention or FFN branch). One pass where the tensor ops take two forward (a
//! broadcast product, then the sum) and three backward (two products and a sum over tokens).
//!
//! The backward: `dx = grad`, `dy = grad·g_f` and `dg_f = Σ grad·y` over the frame's rows. Tasks
//! are blocks of 32 rows inside one group on the current rayon pool, and `dg` is per-block
//! sums added in block order: results are the same at any thread count.

use super::{HostValues, tensor};
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// Rows per task.
const ROWS: usize = 32;

/// Values per group of `x` (`gate.len() / dim` groups). Panics unless `x` is whole groups of
/// `dim`-long rows and `y` is as long as `x`.
fn group_len(x: &[f32], y: &[f32], dim: usize, gate: &[f32]) -> usize {
    let groups = gate.len() / dim.max(1);
    let fits = dim > 0 && groups > 0 && gate.len() == groups * dim && x.len().is_multiple_of(groups * dim) && y.len() == x.len();
    assert!(fits, "gate: {} and {} values, a gate of {} for rows of {dim}", x.len(), y.len(), gate.len());
    x.len() / groups
}

/// `x + y·gate` with each row's group's gate row.
pub fn gate(x: &[f32], y: &[f32], dim: usize, gate: &[f32]) -> Vec<f32> {
    let group = group_len(x, y, dim, gate);
    let mut out = vec![0.0; x.len()];
    if x.is_empty() {
        return out;
    }
    out.par_chunks_mut(group).zip(x.par_chunks(group).zip(y.par_chunks(group))).zip(gate.par_chunks(dim)).for_each(|((o, (x, y)), g)| {
        o.par_chunks_mut(ROWS * dim).zip(x.par_chunks(ROWS * dim).zip(y.par_chunks(ROWS * dim))).for_each(|(o, (x, y))| {
            for (o, (x, y)) in o.chunks_exact_mut(dim).zip(x.chunks_exact(dim).zip(y.chunks_exact(dim))) {
                o.iter_mut().zip(x.iter().zip(y).zip(g)).for_each(|(o, ((&x, &y), &g))| *o = x + y * g);
            }
        });
    });
    out
}

/// `[dy, dgate]` of [`gate`] from the output gradient `grad` (`dx` is `grad`). Panics like
/// [`gate`].
pub fn gate_backward(y: &[f32], dim: usize, gate: &[f32], grad: &[f32]) -> [Vec<f32>; 2] {
    let group = group_len(grad, y, dim, gate);
    let mut dy = vec![0.0; y.len()];
    if y.is_empty() {
        return [dy, vec![0.0; gate.len()]];
    }
    let per_group: Vec<Vec<f32>> = dy
        .par_chunks_mut(group)
        .zip(y.par_chunks(group).zip(grad.par_chunks(group)))
        .zip(gate.par_chunks(dim))
        .map(|((dy, (y, dout)), g)| {
            let blocks: Vec<Vec<f32>> = dy
                .par_chunks_mut(ROWS * dim)
                .zip(y.par_chunks(ROWS * dim).zip(dout.par_chunks(ROWS * dim)))
                .map(|(dy, (y, dout))| {
                    let mut dg = vec![0.0f32; dim];
                    for (dy, (y, dout)) in dy.chunks_exact_mut(dim).zip(y.chunks_exact(dim).zip(dout.chunks_exact(dim))) {
                        for (((dy, dg), &g), (&y, &d)) in dy.iter_mut().zip(dg.iter_mut()).zip(g).zip(y.iter().zip(dout)) {
                            *dy = d * g;
                            *dg += d * y;
                        }
                    }
                    dg
                })
                .collect();
            blocks
                .into_iter()
                .reduce(|mut sum, part| {
                    sum.iter_mut().zip(part).for_each(|(s, v)| *s += v);
                    sum
                })
                .expect("a group has rows")
        })
        .collect();
    [dy, per_group.concat()]
}

/// [`gate`] on backend tensors: `x`, `y` `[rows, dim]`, `g` `[groups, dim]` (f32 only; `None`
/// otherwise).
pub(crate) fn gate_tensor<B: HostValues>(x: FloatTensor<B>, y: FloatTensor<B>, g: FloatTensor<B>) -> Option<FloatTensor<B>> {
    let dims = x.shape().dims::<2>();
    let device = B::float_device(&x);
    let out = gate(&B::values::<2>(&x)?, &B::values::<2>(&y)?, dims[1], &B::values::<2>(&g)?);
    Some(tensor::<B, 2>(out, dims, &device))
}

/// [`gate_backward`] on backend tensors: `[dy, dgate]` shaped like `y` and `g` (f32 only; `None`
/// otherwise).
pub(crate) fn gate_backward_tensor<B: HostValues>(
    y: FloatTensor<B>,
    g: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> Option<[FloatTensor<B>; 2]> {
    let (dims, table) = (y.shape().dims::<2>(), g.shape().dims::<2>());
    let device = B::float_device(&y);
    let [dy, dg] = gate_backward(&B::values::<2>(&y)?, dims[1], &B::values::<2>(&g)?, &B::values::<2>(&grad)?);
    Some([tensor::<B, 2>(dy, dims, &device), tensor::<B, 2>(dg, table, &device)])
}
