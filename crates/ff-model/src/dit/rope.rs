//! 3-D rotary position embedding of Wan2.1.
//!
//! The head dimension `d` splits into temporal, row and column parts of `d − 4⌊d/6⌋`, `2⌊d/6⌋`,
//! `2⌊d/6⌋` features; consecutive feature pairs `(2j, 2j+1)` rotate by `pos · θ^(−2j/d_axis)`.
//! The temporal position is the absolute latent frame index, so K/V published by one forward
//! stay valid for any later reader. Tables are computed on the host in f64, once per forward.

use crate::error::{ModelError, Result};
use burn::tensor::{DType, Tensor, TensorData, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// cos/sin tables of one forward: `[1 or batch, tokens, 1, head_dim/2, 1]`.
#[derive(Clone, Debug)]
pub struct RopeTable<B: Backend> {
    cos: Tensor<B, 5>,
    sin: Tensor<B, 5>,
}

/// Axis sizes and frequency base of the 3-D RoPE.
#[derive(Clone, Copy, Debug)]
pub struct Rope {
    axes: [usize; 3],
    theta: f64,
    max_positions: usize,
}

impl Rope {
    /// The axes of a `head_dim`-wide head (see the module docs), frequency base `theta`, and at
    /// most `max_positions` positions per axis.
    pub fn new(head_dim: usize, theta: f64, max_positions: usize) -> Self {
        let hw = 2 * (head_dim / 6);
        Self { axes: [head_dim - 2 * hw, hw, hw], theta, max_positions }
    }

    /// Tables for frames at latent `positions`, each a `rows × cols` token grid (tokens in
    /// (frame, row, column) order); one position list for the whole batch, or one per element.
    pub fn table<B: Backend>(&self, positions: &[&[usize]], rows: usize, cols: usize, device: &B::Device) -> Result<RopeTable<B>> {
        let far =
            positions.iter().flat_map(|p| p.iter()).copied().chain([rows.saturating_sub(1), cols.saturating_sub(1)]).max().unwrap_or(0);
        if far >= self.max_positions {
            return Err(ModelError::Input(format!(
                "RoPE position {far} is past the table length {} (latent positions {positions:?}, grid {rows}×{cols})",
                self.max_positions
            )));
        }
        let freqs: Vec<Vec<f64>> =
            self.axes.iter().map(|&d| (0..d / 2).map(|j| self.theta.powf(-(2.0 * j as f64) / d as f64)).collect()).collect();
        let half = self.axes.iter().sum::<usize>() / 2;
        let n = positions[0].len() * rows * cols;
        if let Some(p) = positions.iter().find(|p| p.len() != positions[0].len()) {
            return Err(ModelError::Input(format!("batch elements have different frame counts ({p:?} vs {:?})", positions[0])));
        }
        let batch = positions.len();
        let (mut cos, mut sin) = (Vec::with_capacity(batch * n * half), Vec::with_capacity(batch * n * half));
        for &p in positions.iter().flat_map(|p| p.iter()) {
            for r in 0..rows {
                for c in 0..cols {
                    for (axis, pos) in [p, r, c].into_iter().enumerate() {
                        for w in &freqs[axis] {
                            let a = pos as f64 * w;
                            cos.push(a.cos() as f32);
                            sin.push(a.sin() as f32);
                        }
                    }
                }
            }
        }
        let shape = [batch, n, 1, half, 1];
        Ok(RopeTable {
            cos: Tensor::<B, 5>::from_data(TensorData::new(cos, shape), device).cast(DType::F32),
            sin: Tensor::<B, 5>::from_data(TensorData::new(sin, shape), device).cast(DType::F32),
        })
    }
}

impl<B: AttentionBackend> RopeTable<B> {
    /// Rotates `x: [batch, tokens, heads, head_dim]` pairwise, in f32 (returned in `x`'s dtype):
    /// one fused pass where the backend has the kernel (`kernels_cubecl::rope`), else tensor ops.
    pub fn apply(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [b, n, h, d] = x.dims();
        let dtype = x.dtype();
        if dtype == DType::F32 {
            let table = |t: &Tensor<B, 5>| t.clone().reshape([t.dims()[0], t.dims()[1], d / 2]);
            if let Some(out) = kernels_cubecl::rope(x.clone(), table(&self.cos), table(&self.sin)) {
                return out;
            }
        }
        let pairs = x.cast(DType::F32).reshape([b, n, h, d / 2, 2]);
        let x1 = pairs.clone().narrow(4, 0, 1);
        let x2 = pairs.narrow(4, 1, 1);
        let (c, s) = (self.cos.clone(), self.sin.clone());
        let r1 = x1.clone() * c.clone() - x2.clone() * s.clone();
        let r2 = x1 * s + x2 * c;
        Tensor::cat(vec![r1, r2], 4).reshape([b, n, h, d]).cast(dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn axes_split_like_wan() {
        assert_eq!(Rope::new(128, 1e4, 1024).axes, [44, 42, 42]);
        assert_eq!(Rope::new(16, 1e4, 1024).axes, [8, 4, 4]);
        assert_eq!(Rope::new(24, 1e4, 1024).axes, [8, 8, 8]);
    }

    #[test]
    fn positions_past_the_table_are_an_error() {
        let rope = Rope::new(16, 1e4, 1024);
        let dev = Default::default();
        assert!(rope.table::<NdArray>(&[&[1023]], 2, 2, &dev).is_ok());
        let err = rope.table::<NdArray>(&[&[1024]], 2, 2, &dev).unwrap_err();
        assert!(err.to_string().contains("1024"), "{err}");
    }

    #[test]
    fn rotation_preserves_norm_and_is_relative() {
        // <R(p)q, R(p')k> depends only on p − p'
        let rope = Rope::new(16, 1e4, 1024);
        let dev = Default::default();
        let q = Tensor::<NdArray, 4>::random([1, 1, 1, 16], burn::tensor::Distribution::Default, &dev);
        let k = Tensor::<NdArray, 4>::random([1, 1, 1, 16], burn::tensor::Distribution::Default, &dev);
        let dot = |pq: usize, pk: usize| -> f32 {
            let tq = rope.table::<NdArray>(&[&[pq]], 1, 1, &dev).unwrap();
            let tk = rope.table::<NdArray>(&[&[pk]], 1, 1, &dev).unwrap();
            (tq.apply(q.clone()) * tk.apply(k.clone())).sum().into_scalar()
        };
        assert!((dot(7, 3) - dot(24, 20)).abs() < 1e-4);
        let t = rope.table::<NdArray>(&[&[5]], 1, 1, &dev).unwrap();
        let n0: f32 = q.clone().powi_scalar(2).sum().into_scalar();
        let n1: f32 = t.apply(q).powi_scalar(2).sum().into_scalar();
        assert!((n0 - n1).abs() < 1e-5);
    }
}
