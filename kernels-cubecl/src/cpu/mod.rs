//! The CPU kernels: the VAE's causal convolution ([`conv3d`]) and channel norm
//! ([`channel_norm`]), the DiT's element-wise kernels ([`gelu`], [`rope`], the gated residual
//! [`gate`], and [`norm`]: RMSNorm, LayerNorm and the adaptive LayerNorm, forward and backward), and the attention kernel: flash-style
//! block-sparse attention on host f32 slices, forward and backward, for the CPU backends'
//! [`crate::AttentionBackend`].
//!
//! `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]` →
//! `out` like `q` and `lse: [batch, heads, q_tokens]` (f32, natural log-sum-exp of the scaled
//! scores; −∞ on rows without allowed keys, whose output is zero). The query tokens are cut into
//! tiles inside each query group of the [`BlockTable`]; a tile visits only its group's allowed key
//! ranges, in key tiles. The tile products Q·Kᵀ, P·V (and dO·Vᵀ, dS·K, Pᵀ·dO, dSᵀ·Q backward)
//! are single-threaded GEMM calls (`gemm`) on column-major score tiles; softmax is online with f32
//! accumulation and a vectorised exp (`simd`). Tasks run on the current rayon pool: (batch·head,
//! query tile) forward, (batch·head, key slab) backward. Every output element is computed in one
//! fixed order (dQ as per-slab shares summed in slab order): results are bit-identical at any
//! thread count. Scores never exist beyond one `query tile × key tile` block per task.
//!
//! Inputs are read in place where the backend allows ([`HostValues`]: NdArray's row-major
//! tensors), outputs move to the backend with `from_data`.

mod backward;
pub mod channel_norm;
pub mod conv3d;
mod forward;
pub mod gate;
pub mod gelu;
mod gemm;
mod host;
pub mod norm;
pub mod rope;
mod simd;
mod tiles;

use crate::BlockTable;
pub use host::HostValues;

use burn::tensor::{TensorData, TensorMetadata, backend::Backend, ops::FloatTensor};

/// Sizes of the flattened problem: `bh` = batch × heads.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    /// Batch × heads: the independent attention problems.
    pub bh: usize,
    /// Query tokens per problem (the table's query tokens).
    pub q_tokens: usize,
    /// Key (and value) tokens per problem (the table's key tokens).
    pub k_tokens: usize,
    /// Channels per head; the softmax scale is `1/sqrt(head_dim)`.
    pub head_dim: usize,
}

impl Dims {
    fn is_empty(&self) -> bool {
        self.bh * self.q_tokens * self.k_tokens * self.head_dim == 0
    }
}

/// `out: [bh, q_tokens, head_dim]` and `lse: [bh, q_tokens]` of row-major `q`, `k`, `v`.
///
/// Panics when the slice lengths or the table's token counts differ from `dims`.
///
/// ```
/// use kernels_cubecl::BlockTable;
/// use kernels_cubecl::cpu::{Dims, forward};
///
/// // Two one-token query frames over two one-token key frames: query 0 sees nothing,
/// // query 1 sees key 1 only.
/// let table = BlockTable::from_rules(&[1, 1], &[1, 1], |q| if q == 0 { 0..0 } else { 1..2 });
/// let dims = Dims { bh: 1, q_tokens: 2, k_tokens: 2, head_dim: 2 };
/// let (q, k) = ([0.5, -1.0, 2.0, 1.0], [1.0, 0.0, 3.0, -2.0]);
/// let v = [1.0, 2.0, 3.0, 4.0];
/// let (out, lse) = forward(&q, &k, &v, dims, &table);
/// // A row without allowed keys is zero with lse −∞; a row with one allowed key returns its values.
/// assert_eq!((&out[..2], lse[0]), (&[0.0, 0.0][..], f32::NEG_INFINITY));
/// assert!((out[2] - 3.0).abs() < 1e-6 && (out[3] - 4.0).abs() < 1e-6);
/// ```
pub fn forward(q: &[f32], k: &[f32], v: &[f32], dims: Dims, table: &BlockTable) -> (Vec<f32>, Vec<f32>) {
    check(dims, table, &[(q, dims.q_tokens), (k, dims.k_tokens), (v, dims.k_tokens)]);
    if dims.is_empty() {
        return (vec![0.0; dims.bh * dims.q_tokens * dims.head_dim], vec![f32::NEG_INFINITY; dims.bh * dims.q_tokens]);
    }
    forward::forward(q, k, v, dims, &tiles::groups(table))
}

/// `[dq, dk, dv]` from the inputs, the forward's `out` and `lse`, and the output gradient `grad`.
///
/// Panics when the slice lengths or the table's token counts differ from `dims`.
#[allow(clippy::too_many_arguments)]
pub fn backward(q: &[f32], k: &[f32], v: &[f32], out: &[f32], lse: &[f32], grad: &[f32], dims: Dims, table: &BlockTable) -> [Vec<f32>; 3] {
    let (nq, nk) = (dims.q_tokens, dims.k_tokens);
    check(dims, table, &[(q, nq), (k, nk), (v, nk), (out, nq), (grad, nq)]);
    assert_eq!(lse.len(), dims.bh * nq, "lse has {} values for {} rows", lse.len(), dims.bh * nq);
    if dims.is_empty() {
        return [q, k, v].map(|x| vec![0.0; x.len()]);
    }
    backward::backward(q, k, v, out, lse, grad, dims, &tiles::groups(table))
}

/// The `i`-th of the consecutive `len`-long parts of `x` (one head's rows).
fn part(x: &[f32], i: usize, len: usize) -> &[f32] {
    &x[i * len..(i + 1) * len]
}

fn check(dims: Dims, table: &BlockTable, inputs: &[(&[f32], usize)]) {
    table.assert_tokens(dims.q_tokens, dims.k_tokens, dims.k_tokens);
    for (x, tokens) in inputs {
        let want = dims.bh * tokens * dims.head_dim;
        assert_eq!(x.len(), want, "an input has {} values, {dims:?} needs {want}", x.len());
    }
}

fn tensor<B: Backend, const N: usize>(values: Vec<f32>, dims: [usize; N], device: &B::Device) -> FloatTensor<B> {
    B::float_from_data(TensorData::new(values, dims), device)
}

fn dims4<B: Backend>(t: &FloatTensor<B>) -> [usize; 4] {
    t.shape().dims()
}

/// [`forward`] on backend tensors (f32 only; `None` for other dtypes).
pub(crate) fn forward_tensors<B: HostValues>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    table: &BlockTable,
) -> Option<(FloatTensor<B>, FloatTensor<B>)> {
    let ([b, h, nq, d], nk, device) = (dims4::<B>(&q), dims4::<B>(&k)[2], B::float_device(&q));
    let dims = Dims { bh: b * h, q_tokens: nq, k_tokens: nk, head_dim: d };
    let (out, lse) = forward(&B::values::<4>(&q)?, &B::values::<4>(&k)?, &B::values::<4>(&v)?, dims, table);
    Some((tensor::<B, 4>(out, [b, h, nq, d], &device), tensor::<B, 3>(lse, [b, h, nq], &device)))
}

/// [`backward`] on backend tensors (f32 only; `None` for other dtypes).
pub(crate) fn backward_tensors<B: HostValues>(
    [q, k, v, out, grad]: [FloatTensor<B>; 5],
    lse: FloatTensor<B>,
    table: &BlockTable,
) -> Option<[FloatTensor<B>; 3]> {
    let (q_shape, k_shape, device) = (dims4::<B>(&q), dims4::<B>(&k), B::float_device(&q));
    let [b, h, nq, d] = q_shape;
    let dims = Dims { bh: b * h, q_tokens: nq, k_tokens: k_shape[2], head_dim: d };
    let [q, k, v, out, grad] = [&q, &k, &v, &out, &grad].map(|t| B::values::<4>(t));
    let grads = backward(&q?, &k?, &v?, &out?, &B::values::<3>(&lse)?, &grad?, dims, table);
    let [dq, dk, dv] = grads;
    Some([tensor::<B, 4>(dq, q_shape, &device), tensor::<B, 4>(dk, k_shape, &device), tensor::<B, 4>(dv, k_shape, &device)])
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vae_tests;
