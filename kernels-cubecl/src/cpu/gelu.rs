//! The tanh-form GELU (`0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, Wan's and umT5's
//! activation) on host f32 values, forward and backward, one pass each (`cpu::simd`), in
//! chunks over the current rayon pool. Every element depends on itself only, so results are the
//! same at any thread count. Burn's `gelu_approximate` is five element-wise passes and a libm
//! `tanhf`, each single-threaded on the CPU backends (BENCHMARKS, "`bench dit` small op by op").

use super::{HostValues, simd, tensor};
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// Elements per task.
const CHUNK: usize = 1 << 14;

/// `gelu_tanh(x)` element-wise.
pub fn gelu_tanh(x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    out.par_chunks_mut(CHUNK).zip(x.par_chunks(CHUNK)).for_each(|(o, x)| simd::gelu_tanh(x, o));
    out
}

/// `grad · gelu_tanh′(x)` element-wise. Panics when the lengths differ.
pub fn gelu_tanh_backward(x: &[f32], grad: &[f32]) -> Vec<f32> {
    assert_eq!(x.len(), grad.len(), "gelu backward: {} inputs, {} gradients", x.len(), grad.len());
    let mut out = vec![0.0; x.len()];
    out.par_chunks_mut(CHUNK).zip(x.par_chunks(CHUNK).zip(grad.par_chunks(CHUNK))).for_each(|(o, (x, g))| simd::gelu_tanh_grad(x, g, o));
    out
}

/// [`gelu_tanh`] of a rank-1 tensor (f32 only; `None` for other dtypes).
pub(crate) fn forward_tensor<B: HostValues>(x: FloatTensor<B>) -> Option<FloatTensor<B>> {
    let (n, device) = (x.shape().num_elements(), B::float_device(&x));
    Some(tensor::<B, 1>(gelu_tanh(&B::values::<1>(&x)?), [n], &device))
}

/// [`gelu_tanh_backward`] of rank-1 tensors (f32 only; `None` for other dtypes).
pub(crate) fn backward_tensor<B: HostValues>(x: FloatTensor<B>, grad: FloatTensor<B>) -> Option<FloatTensor<B>> {
    let (n, device) = (x.shape().num_elements(), B::float_device(&x));
    Some(tensor::<B, 1>(gelu_tanh_backward(&B::values::<1>(&x)?, &B::values::<1>(&grad)?), [n], &device))
}
