//! Block-sparse attention of the DiT: `attention(q, k, v, &table)` over
//! `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]`, scale
//! `1/sqrt(head_dim)`, with the keys each query may see given by a frame-level [`BlockTable`]
//! (never a token-level mask). Every DiT self-attention goes through this one function: it runs
//! the backend's fused kernel ([`AttentionBackend::fused_attention`]: the CubeCL kernels of
//! [`kernel`], the CPU kernel of [`cpu`]) where there is one, else the portable [`blockwise`] path
//! in stock tensor ops.

mod backend;
pub mod blockwise;
pub mod cpu;
pub mod kernel;
mod table;

pub use backend::{AttentionBackend, kernel_attention};
pub use table::{BlockTable, QueryGroup};

use burn::tensor::Tensor;

/// Block-sparse scaled dot-product attention; see the crate docs.
///
/// Panics when the token counts of `q`, `k`, `v` differ from the table's.
pub fn attention<B: AttentionBackend>(q: Tensor<B, 4>, k: Tensor<B, 4>, v: Tensor<B, 4>, table: &BlockTable) -> Tensor<B, 4> {
    table.assert_tokens(q.dims()[2], k.dims()[2], v.dims()[2]);
    let fused = match B::FUSED_ATTENTION {
        true => kernel_attention(q.clone(), k.clone(), v.clone(), table),
        false => None,
    };
    fused.unwrap_or_else(|| blockwise::attention(q, k, v, table))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::Distribution;

    #[test]
    fn a_query_frame_with_one_allowed_key_frame_returns_its_values() {
        let dev = Default::default();
        let q = Tensor::<NdArray, 4>::random([1, 2, 3, 4], Distribution::Default, &dev);
        let k = Tensor::<NdArray, 4>::random([1, 2, 5, 4], Distribution::Default, &dev);
        let v = Tensor::<NdArray, 4>::random([1, 2, 5, 4], Distribution::Default, &dev);
        // query frame 0 (2 tokens) sees key frame 1 (token 2) only; query frame 1 sees everything
        let table = BlockTable::from_rules(&[2, 1], &[2, 1, 2], |q| if q == 0 { 1..2 } else { 0..3 });
        let out = attention(q, k, v.clone(), &table);
        let want = v.narrow(2, 2, 1).expand([1, 2, 2, 4]);
        let d: f32 = (out.narrow(2, 0, 2) - want).abs().max().into_scalar();
        assert!(d < 1e-6);
    }
}
