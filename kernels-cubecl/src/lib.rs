//! Block-sparse attention of the DiT: `attention(q, k, v, &table)` over
//! `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]`, scale
//! `1/sqrt(head_dim)`, with the keys each query may see given by a frame-level [`BlockTable`]
//! (never a token-level mask). Every DiT self-attention goes through this one function: a full
//! table (every query sees every key) runs the backend's own attention op where it has one
//! ([`AttentionBackend::full_attention`]: Burn's, on Cube backends); otherwise it runs
//! the backend's fused kernel ([`AttentionBackend::fused_attention`]: the CubeCL kernels of
//! [`kernel`], the CPU kernel of [`cpu`]) where there is one, else the portable [`blockwise`] path
//! in stock tensor ops.

#![warn(missing_docs)]

mod backend;
pub mod blockwise;
pub mod cpu;
pub mod kernel;
mod table;

pub use backend::{AttentionBackend, CHECKPOINT_INPUTS, Region, RowNorm, kernel_attention};
pub use table::{BlockTable, QueryGroup};

use burn::tensor::Tensor;

/// Block-sparse scaled dot-product attention; see the crate docs.
///
/// Panics when the token counts of `q`, `k`, `v` differ from the table's.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::{Distribution, Tensor};
/// use kernels_cubecl::{BlockTable, attention};
///
/// let dev = Default::default();
/// let q = Tensor::<NdArray, 4>::random([1, 2, 3, 4], Distribution::Default, &dev);
/// let k = Tensor::<NdArray, 4>::random([1, 2, 5, 4], Distribution::Default, &dev);
/// let v = Tensor::<NdArray, 4>::random([1, 2, 5, 4], Distribution::Default, &dev);
/// // Query frame 0 (2 tokens) sees key frame 1 (token 2) only; query frame 1 sees everything.
/// let table = BlockTable::from_rules(&[2, 1], &[2, 1, 2], |q| if q == 0 { 1..2 } else { 0..3 });
/// let out = attention(q, k, v.clone(), &table);
/// assert_eq!(out.dims(), [1, 2, 3, 4]);
/// // A single allowed key gets all the softmax weight: its values come back.
/// let want = v.narrow(2, 2, 1).expand([1, 2, 2, 4]);
/// let d: f32 = (out.narrow(2, 0, 2) - want).abs().max().into_scalar();
/// assert!(d < 1e-6);
/// ```
pub fn attention<B: AttentionBackend>(q: Tensor<B, 4>, k: Tensor<B, 4>, v: Tensor<B, 4>, table: &BlockTable) -> Tensor<B, 4> {
    table.assert_tokens(q.dims()[2], k.dims()[2], v.dims()[2]);
    if B::FULL_ATTENTION && table.is_full() {
        let prim = |t: Tensor<B, 4>| t.into_primitive().tensor();
        if let Some(out) = B::full_attention(prim(q.clone()), prim(k.clone()), prim(v.clone())) {
            return Tensor::from_primitive(burn::tensor::TensorPrimitive::Float(out));
        }
    }
    let fused = match B::FUSED_ATTENTION {
        true => kernel_attention(q.clone(), k.clone(), v.clone(), table),
        false => None,
    };
    fused.unwrap_or_else(|| blockwise::attention(q, k, v, table))
}

/// The tanh-form GELU, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`: one fused pass on the CPU
/// backends' f32 tensors ([`cpu::gelu`]), Burn's `gelu_approximate` elsewhere.
pub fn gelu_tanh<B: AttentionBackend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    if !B::FUSED_ELEMENTWISE {
        return burn::tensor::activation::gelu_approximate(x);
    }
    let shape = x.shape();
    let flat = x.clone().reshape([shape.num_elements()]).into_primitive().tensor();
    match B::fused_gelu_tanh(flat) {
        Some(out) => Tensor::<B, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(out)).reshape(shape),
        None => burn::tensor::activation::gelu_approximate(x),
    }
}

/// `x: [batch, tokens, heads, head_dim]` with the pairs `(x[2j], x[2j+1])` rotated by the angles
/// of `cos, sin: [batch or 1, tokens, head_dim/2]`, as one fused pass on the CPU backends' f32
/// tensors ([`cpu::rope`]); `None` where no kernel runs (the caller composes it from tensor ops).
pub fn rope<B: AttentionBackend>(x: Tensor<B, 4>, cos: Tensor<B, 3>, sin: Tensor<B, 3>) -> Option<Tensor<B, 4>> {
    if !B::FUSED_ELEMENTWISE {
        return None;
    }
    let prim = |t: Tensor<B, 3>| t.into_primitive().tensor();
    let out = B::fused_rope(x.into_primitive().tensor(), prim(cos), prim(sin))?;
    Some(Tensor::from_primitive(burn::tensor::TensorPrimitive::Float(out)))
}

/// `layer_norm(x)·(1 + scale) + shift` (no affine LayerNorm over the last dimension of `x:
/// [batch, frames, tokens, dim]`, per-frame `shift, scale: [batch, frames, 1, dim]`) as one fused
/// pass on the CPU backends' f32 tensors, differentiable under autodiff ([`cpu::norm`], one group
/// of rows per frame); `None` where no kernel runs (the caller composes it from tensor ops).
pub fn adaln<B: AttentionBackend>(x: Tensor<B, 4>, shift: Tensor<B, 4>, scale: Tensor<B, 4>, eps: f64) -> Option<Tensor<B, 4>> {
    let [b, f, _, d] = x.dims();
    if !B::FUSED_ELEMENTWISE || shift.dims() != [b, f, 1, d] || scale.dims() != [b, f, 1, d] {
        return None;
    }
    row_norm(x, (scale + 1.0).reshape([b * f, d]), Some(shift.reshape([b * f, d])), RowNorm::Layer, eps)
}

/// RMSNorm `x / √(mean(x²) + eps) · γ` over the last dimension of `x` with `gamma: [dim]`, as
/// one pass on the CPU backends' f32 tensors, differentiable under autodiff ([`cpu::norm`]);
/// `None` where no kernel runs (the caller composes it from tensor ops).
pub fn rms_norm<B: AttentionBackend, const D: usize>(x: Tensor<B, D>, gamma: Tensor<B, 1>, eps: f64) -> Option<Tensor<B, D>> {
    row_norm(x, gamma.unsqueeze(), None, RowNorm::Rms, eps)
}

/// LayerNorm `(x − mean) / √(var + eps) · γ (+ β)` (biased variance) over the last dimension of
/// `x` with `gamma`, `beta: [dim]`, as one pass on the CPU backends' f32 tensors, differentiable
/// under autodiff ([`cpu::norm`]); `None` where no kernel runs (the caller composes it from
/// tensor ops).
pub fn layer_norm<B: AttentionBackend, const D: usize>(
    x: Tensor<B, D>,
    gamma: Tensor<B, 1>,
    beta: Option<Tensor<B, 1>>,
    eps: f64,
) -> Option<Tensor<B, D>> {
    row_norm(x, gamma.unsqueeze(), beta.map(Tensor::unsqueeze), RowNorm::Layer, eps)
}

/// The gated residual update `x + y·gate` of `x, y: [batch, frames, tokens, dim]` with per-frame
/// `gate: [batch, frames, 1, dim]`, as one fused pass on the CPU backends' f32 tensors,
/// differentiable under autodiff ([`cpu::gate`]); `None` where no kernel runs (the caller
/// composes it from tensor ops).
pub fn gated_residual<B: AttentionBackend>(x: Tensor<B, 4>, y: Tensor<B, 4>, gate: Tensor<B, 4>) -> Option<Tensor<B, 4>> {
    let [b, f, t, d] = x.dims();
    if !B::FUSED_ELEMENTWISE || y.dims() != [b, f, t, d] || gate.dims() != [b, f, 1, d] || d == 0 {
        return None;
    }
    let prim = |t: Tensor<B, 2>| t.into_primitive().tensor();
    let rows = |x: Tensor<B, 4>| x.reshape([b * f * t, d]);
    let out = B::fused_gate(prim(rows(x)), prim(rows(y)), prim(gate.reshape([b * f, d])))?;
    Some(Tensor::<B, 2>::from_primitive(burn::tensor::TensorPrimitive::Float(out)).reshape([b, f, t, d]))
}

/// [`AttentionBackend::fused_norm`] over the rows of `x` with `weight`, `bias: [groups, dim]`.
fn row_norm<B: AttentionBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 2>>,
    kind: RowNorm,
    eps: f64,
) -> Option<Tensor<B, D>> {
    let shape = x.shape();
    let dim = shape.dims::<D>().last().copied().unwrap_or(0);
    let rows = shape.num_elements() / dim.max(1);
    if !B::FUSED_ELEMENTWISE || dim == 0 || !rows.is_multiple_of(weight.dims()[0].max(1)) {
        return None;
    }
    let prim = |t: Tensor<B, 2>| t.into_primitive().tensor();
    let out = B::fused_norm(prim(x.reshape([rows, dim])), prim(weight), bias.map(prim), kind, eps)?;
    Some(Tensor::<B, 2>::from_primitive(burn::tensor::TensorPrimitive::Float(out)).reshape(shape))
}

/// The VAE's channel RMS norm `x / max(‖x‖₂, 1e-12) · √C · γ` over dimension 1 of `x: [N, C,
/// ...]` with `gamma: [C]`, then SiLU when `silu` is set, as one kernel on the CPU backends' f32
/// tensors without autodiff ([`cpu::channel_norm`]); `None` where no kernel runs (the caller
/// composes it from tensor ops).
pub fn channel_norm<B: AttentionBackend, const D: usize>(x: Tensor<B, D>, gamma: Tensor<B, 1>, silu: bool) -> Option<Tensor<B, D>> {
    if !B::FUSED_ELEMENTWISE || D < 2 {
        return None;
    }
    let shape = x.shape();
    let dims = shape.dims::<D>();
    let flat = x.reshape([dims[0], dims[1], dims[2..].iter().product()]);
    let out = B::fused_channel_norm(flat.into_primitive().tensor(), gamma.into_primitive().tensor(), silu)?;
    Some(Tensor::<B, 3>::from_primitive(burn::tensor::TensorPrimitive::Float(out)).reshape(shape))
}

/// The VAE's causal 3-D convolution (unit stride; `time_pad` past-side zero frames, `pad = [ph,
/// pw]` zeros around each frame) as one kernel on the CPU backends' f32 tensors without autodiff
/// ([`cpu::conv3d`]); `None` where no kernel runs (the caller runs the backend's conv3d).
pub fn causal_conv3d<B: AttentionBackend>(
    x: Tensor<B, 5>,
    weight: Tensor<B, 5>,
    bias: Tensor<B, 1>,
    time_pad: usize,
    pad: [usize; 2],
) -> Option<Tensor<B, 5>> {
    if !B::FUSED_ELEMENTWISE {
        return None;
    }
    let out =
        B::fused_conv3d(x.into_primitive().tensor(), weight.into_primitive().tensor(), bias.into_primitive().tensor(), time_pad, pad)?;
    Some(Tensor::from_primitive(burn::tensor::TensorPrimitive::Float(out)))
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
        const { assert!(A::FUSED_ELEMENTWISE) };
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

    /// The fused rotation against the pairwise formula with a per-batch table, and its gradient
    /// against the rotation by the opposite angle.
    #[test]
    fn fused_rope_rotates_pairs_and_differentiates_as_the_inverse_rotation() {
        use burn::backend::Autodiff;
        type A = Autodiff<NdArray>;
        let dev = Default::default();
        let (b, n, h, d) = (2, 5, 3, 8);
        let x = Tensor::<NdArray, 4>::random([b, n, h, d], Distribution::Default, &dev);
        let angle = Tensor::<NdArray, 3>::random([b, n, d / 2], Distribution::Uniform(-3.0, 3.0), &dev);
        let (cos, sin) = (angle.clone().cos(), angle.clone().sin());
        let rotate = |x: Tensor<NdArray, 4>, sign: f32| {
            let pairs = x.reshape([b, n, h, d / 2, 2]);
            let (x1, x2) = (pairs.clone().narrow(4, 0, 1), pairs.narrow(4, 1, 1));
            let table = |t: &Tensor<NdArray, 3>| t.clone().reshape([b, n, 1, d / 2, 1]);
            let (c, s) = (table(&cos), table(&sin).mul_scalar(sign));
            Tensor::cat(vec![x1.clone() * c.clone() - x2.clone() * s.clone(), x1 * s + x2 * c], 4).reshape([b, n, h, d])
        };
        let fused = rope(x.clone(), cos.clone(), sin.clone()).expect("NdArray has the kernel");
        let diff: f32 = (fused - rotate(x.clone(), 1.0)).abs().max().into_scalar();
        assert!(diff < 1e-6, "forward differs by {diff}");
        let w = Tensor::<NdArray, 4>::random([b, n, h, d], Distribution::Default, &dev);
        let xa = Tensor::<A, 4>::from_inner(x).require_grad();
        let out = rope(xa.clone(), Tensor::from_inner(cos.clone()), Tensor::from_inner(sin.clone())).unwrap();
        let grad = xa.grad(&(out * Tensor::from_inner(w.clone())).sum().backward()).unwrap();
        let diff: f32 = (grad - rotate(w, -1.0)).abs().max().into_scalar();
        assert!(diff < 1e-6, "gradient differs by {diff}");
    }

    /// The fused RMSNorm and LayerNorm against Burn's modules on random shapes.
    #[test]
    fn fused_norms_match_burns_modules() {
        use burn::nn::{LayerNormConfig, RmsNormConfig};
        let dev = Default::default();
        for (i, dims) in [[1, 7, 24], [2, 33, 40], [3, 5, 1]].into_iter().enumerate() {
            let x = Tensor::<NdArray, 3>::random(dims, Distribution::Normal(0.5, 2.0), &dev);
            let weight = |seed: f64| Tensor::<NdArray, 1>::random([dims[2]], Distribution::Normal(seed, 1.0), &dev);
            let mut rms = RmsNormConfig::new(dims[2]).with_epsilon(1e-6).init::<NdArray>(&dev);
            rms.gamma = burn::module::Param::from_tensor(weight(1.0));
            let mut ln = LayerNormConfig::new(dims[2]).with_epsilon(1e-6).init::<NdArray>(&dev);
            ln.gamma = burn::module::Param::from_tensor(weight(1.0));
            ln.beta = Some(burn::module::Param::from_tensor(weight(-0.5)));
            let beta = ln.beta.as_ref().map(|b| b.val());
            for (name, got, want) in [
                ("rms", rms_norm(x.clone(), rms.gamma.val(), 1e-6), rms.forward(x.clone())),
                ("layer", layer_norm(x.clone(), ln.gamma.val(), beta.clone(), 1e-6), ln.forward(x.clone())),
                (
                    "layer without bias",
                    layer_norm(x.clone(), ln.gamma.val(), None, 1e-6),
                    ln.forward(x.clone()) - beta.clone().unwrap().unsqueeze(),
                ),
            ] {
                let diff: f32 = (got.expect("NdArray has the kernel") - want).abs().max().into_scalar();
                assert!(diff < 1e-5, "case {i} {name}: differs by {diff}");
            }
        }
    }

    /// The fused adaptive LayerNorm against the composed formula; a table broadcast over the
    /// batch is left to the caller.
    #[test]
    fn fused_adaln_matches_the_composed_formula() {
        let dev = Default::default();
        let x = Tensor::<NdArray, 4>::random([2, 3, 5, 24], Distribution::Normal(0.5, 2.0), &dev);
        let shift = Tensor::<NdArray, 4>::random([2, 3, 1, 24], Distribution::Default, &dev);
        let scale = Tensor::<NdArray, 4>::random([2, 3, 1, 24], Distribution::Default, &dev);
        let want = composed(x.clone(), scale.clone() + 1.0, Some(shift.clone()), RowNorm::Layer);
        let got = adaln(x.clone(), shift.clone(), scale.clone(), 1e-6).expect("NdArray has the kernel");
        let diff: f32 = (got - want).abs().max().into_scalar();
        assert!(diff < 2e-6, "differs by {diff}");
        let broadcast = shift.clone().narrow(0, 0, 1);
        assert!(adaln(x, broadcast, scale.narrow(0, 0, 1), 1e-6).is_none(), "a broadcast table is the caller's");
    }

    /// `n(x)·a (+ c)` in tensor ops (as Burn's `RmsNorm` and `LayerNorm` compose it), eps 1e-6.
    fn composed<B: burn::tensor::backend::Backend, const D: usize>(
        x: Tensor<B, D>,
        a: Tensor<B, D>,
        c: Option<Tensor<B, D>>,
        kind: RowNorm,
    ) -> Tensor<B, D> {
        let n = match kind {
            RowNorm::Rms => x.clone() / (x.square().mean_dim(D - 1) + 1e-6).sqrt(),
            RowNorm::Layer => {
                let (var, mean) = x.clone().var_mean_bias(D - 1);
                (x - mean) / (var + 1e-6).sqrt()
            }
        };
        c.into_iter().fold(n * a, |y, c| y + c)
    }

    type A = burn::backend::Autodiff<NdArray>;

    /// A function of tracked leaves with its output flattened.
    type Flat<'a> = Box<dyn Fn(&[Tensor<A, 1>]) -> Tensor<A, 1> + 'a>;

    /// `f(leaves)` and the gradients at each leaf of `Σ f(leaves)·r` (a fixed `r`), flattened;
    /// `f` gets the leaves tracked and returns its output flattened.
    fn forward_backward(leaves: &[Tensor<NdArray, 1>], f: impl Fn(&[Tensor<A, 1>]) -> Tensor<A, 1>) -> Vec<Vec<f32>> {
        let values = |t: Tensor<NdArray, 1>| t.into_data().to_vec::<f32>().unwrap();
        let leaves: Vec<_> = leaves.iter().map(|t| Tensor::<A, 1>::from_inner(t.clone()).require_grad()).collect();
        let y = f(&leaves);
        let n = y.dims()[0];
        let r: Vec<f32> = (0..n).map(|i| ((i * 7919 % 13) as f32 - 6.0) / 6.0).collect();
        let grads = (y.clone() * Tensor::from_data(burn::tensor::TensorData::new(r, [n]), &Default::default())).sum().backward();
        let grads = leaves.iter().map(|l| values(l.grad(&grads).expect("every leaf has a gradient")));
        std::iter::once(values(y.inner())).chain(grads).collect()
    }

    /// Under autodiff the fused norms run (and differentiate) in one kernel each: output and the
    /// gradients of input, weight and bias (shift and scale for the adaptive LayerNorm) against
    /// the composed formula's (within 2e-5 of the larger of 1 and the largest entry), on random
    /// shapes with one group or one per frame.
    #[test]
    fn fused_norms_differentiate_as_the_composed_formula() {
        let dev = Default::default();
        let random = |n: usize, mean: f64| Tensor::<NdArray, 1>::random([n], Distribution::Normal(mean, 1.5), &dev);
        for (i, [b, f, t, d]) in [[1, 3, 5, 24], [2, 4, 40, 40], [1, 35, 16, 9], [1, 2, 3, 1]].into_iter().enumerate() {
            let x = random(b * f * t * d, 0.5);
            let rows = |x: &Tensor<A, 1>| x.clone().reshape([b * f * t, d]);
            let row = |w: &Tensor<A, 1>| w.clone().reshape([1, d]);
            let table = |m: &Tensor<A, 1>| m.clone().reshape([b, f, 1, d]);
            let flat = |y: Tensor<A, 2>| y.reshape([b * f * t * d]);
            let flat4 = |y: Tensor<A, 4>| y.reshape([b * f * t * d]);
            let frames = |x: &Tensor<A, 1>| x.clone().reshape([b, f, t, d]);
            let cases: [(&str, Vec<Tensor<NdArray, 1>>, Flat<'_>, Flat<'_>); 3] = [
                (
                    "rms",
                    vec![x.clone(), random(d, 1.0)],
                    Box::new(|l| flat(rms_norm(rows(&l[0]), l[1].clone(), 1e-6).expect("the kernel runs under autodiff"))),
                    Box::new(|l| flat(composed(rows(&l[0]), row(&l[1]), None, RowNorm::Rms))),
                ),
                (
                    "layer",
                    vec![x.clone(), random(d, 1.0), random(d, -0.5)],
                    Box::new(|l| flat(layer_norm(rows(&l[0]), l[1].clone(), Some(l[2].clone()), 1e-6).expect("the kernel runs"))),
                    Box::new(|l| flat(composed(rows(&l[0]), row(&l[1]), Some(row(&l[2])), RowNorm::Layer))),
                ),
                (
                    "adaln",
                    vec![x.clone(), random(b * f * d, 0.0), random(b * f * d, 0.0)],
                    Box::new(|l| flat4(adaln(frames(&l[0]), table(&l[1]), table(&l[2]), 1e-6).expect("the kernel runs"))),
                    Box::new(|l| flat4(composed(frames(&l[0]), table(&l[2]) + 1.0, Some(table(&l[1])), RowNorm::Layer))),
                ),
            ];
            for (name, leaves, fused, reference) in cases {
                let case = format!("case {i} {name}");
                assert_close(
                    &case,
                    &["output", "dx", "dweight", "dbias"],
                    forward_backward(&leaves, fused),
                    forward_backward(&leaves, reference),
                );
            }
        }
    }

    /// Each of `got` within 2e-5 of the larger of 1 and the largest entry of its `want`.
    fn assert_close(case: &str, names: &[&str], got: Vec<Vec<f32>>, want: Vec<Vec<f32>>) {
        assert_eq!(got.len(), want.len(), "{case}");
        for (what, (g, w)) in names.iter().zip(got.iter().zip(&want)) {
            let scale = w.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            let diff = g.iter().zip(w).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(diff <= 2e-5 * scale, "{case} {what}: off by {diff} (scale {scale})");
        }
    }

    /// Under autodiff the gated residual runs (and differentiates) in one kernel: output and the
    /// gradients of `x`, `y` and the gate against `x + y·gate` in tensor ops.
    #[test]
    fn fused_gate_differentiates_as_the_composed_formula() {
        let dev = Default::default();
        let random = |n: usize| Tensor::<NdArray, 1>::random([n], Distribution::Normal(0.2, 1.5), &dev);
        for [b, f, t, d] in [[1, 3, 5, 24], [2, 4, 40, 40], [1, 35, 16, 9]] {
            let n = b * f * t * d;
            let frames = |x: &Tensor<A, 1>| x.clone().reshape([b, f, t, d]);
            let table = |g: &Tensor<A, 1>| g.clone().reshape([b, f, 1, d]);
            let leaves = [random(n), random(n), random(b * f * d)];
            let got = forward_backward(&leaves, |l| {
                gated_residual(frames(&l[0]), frames(&l[1]), table(&l[2])).expect("the kernel runs under autodiff").reshape([n])
            });
            let want = forward_backward(&leaves, |l| (frames(&l[0]) + frames(&l[1]) * table(&l[2])).reshape([n]));
            assert_close(&format!("{:?}", [b, f, t, d]), &["output", "dx", "dy", "dgate"], got, want);
        }
    }

    /// The norm and gate backwards' sums over rows are added in a fixed order: the same bits at
    /// one and two threads (many groups, and one group of many row blocks).
    #[test]
    fn norm_and_gate_gradients_are_bit_identical_at_one_and_two_threads() {
        let values = |n: usize, seed: usize| (0..n).map(|i| (((i + seed) * 2654435761) % 1000) as f32 / 250.0 - 2.0).collect::<Vec<f32>>();
        for (rows, groups, dim) in [(560, 1, 48), (560, 35, 48), (100, 4, 7)] {
            let (x, w, dy) = (values(rows * dim, 1), values(groups * dim, 2), values(rows * dim, 3));
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| cpu::norm::norm_backward(&x, dim, &w, RowNorm::Layer, 1e-6, &dy))
            };
            let gate = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| cpu::gate::gate_backward(&x, dim, &w, &dy))
            };
            let bits = |g: &[Vec<f32>]| g.iter().map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>();
            assert!(bits(&run(1)) == bits(&run(2)), "norm: {rows} rows in {groups} groups");
            assert!(bits(&gate(1)) == bits(&gate(2)), "gate: {rows} rows in {groups} groups");
        }
    }
}
