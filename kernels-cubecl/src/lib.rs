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

/// The tanh-form GELU, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`: one fused pass on the CPU
/// backends' f32 tensors ([`cpu::gelu`]), Burn's `gelu_approximate` elsewhere.
pub fn gelu_tanh<B: AttentionBackend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    if !B::FUSED_GELU {
        return burn::tensor::activation::gelu_approximate(x);
    }
    let shape = x.shape();
    let flat = x.clone().reshape([shape.num_elements()]).into_primitive().tensor();
    match B::fused_gelu_tanh(flat) {
        Some(out) => Tensor::<B, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(out)).reshape(shape),
        None => burn::tensor::activation::gelu_approximate(x),
    }
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

    /// The fused GELU against Burn's `gelu_approximate`, forward and through autodiff, on a
    /// transposed (non-contiguous) input of rank 3.
    #[test]
    fn fused_gelu_matches_burns_gelu_approximate_forward_and_backward() {
        use burn::backend::Autodiff;
        use burn::tensor::activation::gelu_approximate;
        type A = Autodiff<NdArray>;
        const { assert!(A::FUSED_GELU) };
        let dev = Default::default();
        let x = Tensor::<NdArray, 3>::random([2, 40, 37], Distribution::Normal(0.0, 3.0), &dev).swap_dims(1, 2);
        let w = Tensor::<NdArray, 3>::random([2, 37, 40], Distribution::Default, &dev);
        let close = |a: Tensor<NdArray, 3>, b: Tensor<NdArray, 3>, tol: f32| {
            let d: f32 = ((a - b.clone()).abs() / (b.abs() + 1.0)).max().into_scalar();
            assert!(d < tol, "relative difference {d}");
        };
        close(gelu_tanh(x.clone()), gelu_approximate(x.clone()), 1e-6);
        let grad = |f: fn(Tensor<A, 3>) -> Tensor<A, 3>| {
            let xa = Tensor::<A, 3>::from_inner(x.clone()).require_grad();
            let loss = (f(xa.clone()) * Tensor::from_inner(w.clone())).sum();
            xa.grad(&loss.backward()).unwrap()
        };
        close(grad(gelu_tanh), grad(gelu_approximate), 1e-5);
    }
}
