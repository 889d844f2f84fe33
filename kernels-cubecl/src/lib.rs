//! Attention entry point of the DiT.
//!
//! `attention(q, k, v, mask)` over `[batch, heads, tokens, head_dim]` with an optional boolean
//! mask (true = masked out) broadcast from `[1 or batch, 1 or heads, q_tokens, k_tokens]`.
//! It runs Burn's fused attention, which CubeCL backends (CUDA, wgpu) execute as a flash kernel
//! when no mask is given and NdArray as the reference path; every model forward goes through
//! this one function, so a custom masked block-causal kernel plugs in here for all callers.

mod backend;
pub mod blockwise;
pub mod kernel;
mod table;

pub use backend::{AttentionBackend, kernel_attention};
pub use table::{BlockTable, QueryGroup};

use burn::tensor::module::attention as burn_attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Tensor};

/// Scaled dot-product attention (scale `1/sqrt(head_dim)`), softmax over keys.
pub fn attention<B: AttentionBackend>(q: Tensor<B, 4>, k: Tensor<B, 4>, v: Tensor<B, 4>, mask: Option<Tensor<B, 4, Bool>>) -> Tensor<B, 4> {
    let [b, h, nq, _] = q.dims();
    let nk = k.dims()[2];
    let mask = mask.map(|m| m.expand([b, h, nq, nk]));
    burn_attention(q, k, v, mask, None, AttentionModuleOptions::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::{Distribution, TensorData};

    #[test]
    fn masking_all_but_one_key_returns_its_value() {
        let dev = Default::default();
        let q = Tensor::<NdArray, 4>::random([1, 2, 3, 4], Distribution::Default, &dev);
        let k = Tensor::<NdArray, 4>::random([1, 2, 5, 4], Distribution::Default, &dev);
        let v = Tensor::<NdArray, 4>::random([1, 2, 5, 4], Distribution::Default, &dev);
        let m: Vec<bool> = (0..15).map(|i| i % 5 != 2).collect();
        let mask = Tensor::<NdArray, 4, Bool>::from_data(TensorData::new(m, [1, 1, 3, 5]), &dev);
        let out = attention(q, k, v.clone(), Some(mask));
        let want = v.narrow(2, 2, 1).expand([1, 2, 3, 4]);
        let d: f32 = (out - want).abs().max().into_scalar();
        assert!(d < 1e-6);
    }
}
