//! Rotary position embedding on host f32 values in one pass: `x: [batch, tokens, heads,
//! head_dim]` with the pairs `(x[2j], x[2j+1])` rotated by the angle whose cosine and sine are
//! `cos, sin: [batch or 1, tokens, head_dim/2]`:
//! `(x₁·c − x₂·s, x₁·s + x₂·c)`. The backward is the rotation by the opposite angle (the same
//! kernel with `−sin`). Tasks are rows (batch, token) on the current rayon pool; each element is
//! computed once, so results are the same at any thread count.

use super::{HostValues, tensor};
use burn::tensor::{TensorMetadata, ops::FloatTensor};
use rayon::prelude::*;

/// Rotates `x` (row-major `[batch, tokens, heads, head_dim]`, `dims`) by the table rows
/// `cos, sin` (`[table_batch, tokens, head_dim/2]`, `table_batch` 1 or batch).
///
/// Panics when a length differs from the dims.
pub fn rope(x: &[f32], cos: &[f32], sin: &[f32], dims: [usize; 4]) -> Vec<f32> {
    let [b, n, h, d] = dims;
    let half = d / 2;
    assert!(d.is_multiple_of(2) && x.len() == b * n * h * d, "rope: {} values for {dims:?} (even head_dim)", x.len());
    assert!(cos.len() == sin.len() && (cos.len() == n * half || cos.len() == b * n * half), "rope: a table of {} for {dims:?}", cos.len());
    let row = h * d;
    let mut out = vec![0.0; x.len()];
    out.par_chunks_mut(row.max(1)).zip(x.par_chunks(row.max(1))).enumerate().for_each(|(r, (o, x))| {
        let t = if cos.len() == n * half { r % n } else { r };
        let (c, s) = (&cos[t * half..(t + 1) * half], &sin[t * half..(t + 1) * half]);
        for (o, x) in o.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            for j in 0..half {
                let (x1, x2) = (x[2 * j], x[2 * j + 1]);
                o[2 * j] = x1 * c[j] - x2 * s[j];
                o[2 * j + 1] = x1 * s[j] + x2 * c[j];
            }
        }
    });
    out
}

/// [`rope`] on backend tensors: `x` rank 4, `cos`, `sin` rank 3 (f32 only; `None` otherwise).
pub(crate) fn rope_tensor<B: HostValues>(x: FloatTensor<B>, cos: FloatTensor<B>, sin: FloatTensor<B>) -> Option<FloatTensor<B>> {
    let (dims, device) = (x.shape().dims::<4>(), B::float_device(&x));
    let out = rope(&B::values::<4>(&x)?, &B::values::<3>(&cos)?, &B::values::<3>(&sin)?, dims);
    Some(tensor::<B, 4>(out, dims, &device))
}
