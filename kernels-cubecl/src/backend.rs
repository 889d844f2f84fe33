//! [`AttentionBackend`]: the backend extension behind [`crate::attention`], and behind the fused
//! element-wise kernels [`crate::gelu_tanh`], [`crate::rope`], the row norms ([`crate::adaln`],
//! [`crate::layer_norm`], [`crate::rms_norm`]) and the gated residual ([`crate::gated_residual`]).
//!
//! A backend with a fused block-sparse attention kernel returns it from
//! [`AttentionBackend::fused_attention`]; the others return `None` and the portable path (stock
//! tensor ops, differentiable by Burn's autodiff) runs instead. Every model that attends takes
//! `B: AttentionBackend`, so a kernel plugs in here for all callers.
//!
//! Implementations: `CubeBackend` (wgpu, cuda) launches the CubeCL kernels of [`crate::kernel`]
//! for block-sparse tables and Burn's attention op for full ones ([`AttentionBackend::full_attention`]);
//! `Fusion<B>` registers them as custom operations of the fusion stream; NdArray and Flex run the
//! CPU kernel of [`crate::cpu`] on f32 tensors (other dtypes take the portable path);
//! `Autodiff<B>` (`autodiff.rs`) runs the inner kernel forward and differentiates through the
//! inner backward kernels (FlashAttention-2 from the saved log-sum-exp). The element-wise kernels
//! and the VAE's channel norm and causal convolution exist on NdArray and Flex only (`FUSED_ELEMENTWISE`);
//! elsewhere the callers compose tensor ops or run the backend's conv3d.
//!
//! Shapes: `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]`,
//! `lse: [batch, heads, q_tokens]` (f32, natural log-sum-exp of the scaled scores).

use crate::BlockTable;
use burn::backend::NdArray;
use burn::backend::ndarray::{FloatNdArrayElement, IntNdArrayElement, NdArrayTensor, QuantElement, SharedArray};
use burn::tensor::{Tensor, TensorPrimitive, backend::Backend, ops::FloatTensor};

/// Which row norm [`AttentionBackend::fused_norm`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowNorm {
    /// `x / √(mean(x²) + eps)`.
    Rms,
    /// `(x − mean) / √(var + eps)` (biased variance).
    Layer,
}

/// A backend that may run block-sparse attention, the tanh GELU and the rotary embedding as fused
/// kernels.
pub trait AttentionBackend: Backend {
    /// Whether the `fused_*` methods run a kernel (return `Some`) on this backend (the CPU
    /// backends return `None` for dtypes other than f32).
    const FUSED_ATTENTION: bool = false;

    /// `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]`,
    /// softmax scale `1/sqrt(head_dim)`, keys restricted by `table`. `None`: no kernel here.
    fn fused_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, table: &BlockTable) -> Option<FloatTensor<Self>> {
        Self::fused_attention_lse(q, k, v, table).map(|(out, _)| out)
    }

    /// The forward and its per-row log-sum-exp `[batch, heads, q_tokens]` (f32), which the
    /// backward needs. `None`: no kernel here.
    fn fused_attention_lse(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        table: &BlockTable,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let _ = (q, k, v, table);
        None
    }

    /// Gradients `[dq, dk, dv]` from the forward's output `out`, its `lse` and the output
    /// gradient `grad`. `None`: no kernel here.
    #[allow(clippy::too_many_arguments)]
    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        out: FloatTensor<Self>,
        lse: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        table: &BlockTable,
    ) -> Option<[FloatTensor<Self>; 3]> {
        let _ = (q, k, v, out, lse, grad, table);
        None
    }

    /// Whether [`AttentionBackend::fused_attention_backward`] runs a kernel on `device`: the Cube
    /// backends' FlashAttention-2 backward adds dQ with f32 atomics, which some wgpu adapters lack
    /// (differentiated forwards then take the portable path).
    fn fused_backward_on(device: &Self::Device) -> bool {
        let _ = device;
        Self::FUSED_ATTENTION
    }

    /// Whether [`AttentionBackend::full_attention`] runs the backend's own attention op.
    const FULL_ATTENTION: bool = false;

    /// Dense attention, every query seeing every key, scale `1/sqrt(head_dim)`, through the
    /// backend's own attention op: on Cube backends Burn's, which autotunes cubek's flash
    /// attention (tensor cores on CUDA). Forward only: autodiff backends return `None` and keep
    /// the block-sparse kernel with its FlashAttention-2 backward. `None`: no such op here.
    fn full_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = (q, k, v);
        None
    }

    /// Whether the fused element-wise kernels (`fused_gelu_*`, `fused_rope`, `fused_norm*`,
    /// `fused_gate*`) run on this backend
    /// (f32 tensors).
    const FUSED_ELEMENTWISE: bool = false;

    /// The tanh-form GELU of a rank-1 tensor as one kernel. `None`: no kernel here.
    fn fused_gelu_tanh(x: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = x;
        None
    }

    /// `grad · gelu_tanh′(x)` of rank-1 tensors as one kernel. `None`: no kernel here.
    fn fused_gelu_tanh_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = (x, grad);
        None
    }

    /// `x: [batch, tokens, heads, head_dim]` with its pairs rotated by `cos, sin: [batch or 1,
    /// tokens, head_dim/2]` (a constant table: no gradient flows to it). `None`: no kernel here.
    fn fused_rope(x: FloatTensor<Self>, cos: FloatTensor<Self>, sin: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = (x, cos, sin);
        None
    }

    /// The norm `kind` of the rows of `x: [rows, dim]`, times `weight` (plus `bias`): `[groups,
    /// dim]`, one row per run of `rows / groups` consecutive rows ([`crate::cpu::norm`]). Autodiff
    /// backends differentiate it with [`AttentionBackend::fused_norm_backward`]. `None`: no
    /// kernel here.
    fn fused_norm(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        kind: RowNorm,
        eps: f64,
    ) -> Option<FloatTensor<Self>> {
        let _ = (x, weight, bias, kind, eps);
        None
    }

    /// `[dx, dweight, dbias]` of [`AttentionBackend::fused_norm`] from the output gradient `grad`
    /// (`dbias`: the sum of `grad` over each group's rows). `None`: no kernel here.
    fn fused_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        kind: RowNorm,
        eps: f64,
        grad: FloatTensor<Self>,
    ) -> Option<[FloatTensor<Self>; 3]> {
        let _ = (x, weight, kind, eps, grad);
        None
    }

    /// The gated residual update `x + y·gate` of `x, y: [rows, dim]` with `gate: [groups, dim]`,
    /// one row per run of `rows / groups` consecutive rows ([`crate::cpu::gate`]). Autodiff
    /// backends differentiate it with [`AttentionBackend::fused_gate_backward`]. `None`: no
    /// kernel here.
    fn fused_gate(x: FloatTensor<Self>, y: FloatTensor<Self>, gate: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = (x, y, gate);
        None
    }

    /// `[dy, dgate]` of [`AttentionBackend::fused_gate`] from the output gradient `grad` (`dx` is
    /// `grad`). `None`: no kernel here.
    fn fused_gate_backward(y: FloatTensor<Self>, gate: FloatTensor<Self>, grad: FloatTensor<Self>) -> Option<[FloatTensor<Self>; 2]> {
        let _ = (y, gate, grad);
        None
    }

    /// The VAE's channel RMS norm `x / max(‖x‖₂, 1e-12) · √C · γ` over the channels of `x:
    /// [batch, C, S]` with `gamma: [C]`, then SiLU when `silu` is set; forward only (autodiff
    /// backends return `None`; [`crate::cpu::channel_norm`]). `None`: no kernel here.
    fn fused_channel_norm(x: FloatTensor<Self>, gamma: FloatTensor<Self>, silu: bool) -> Option<FloatTensor<Self>> {
        let _ = (x, gamma, silu);
        None
    }

    /// The causal 3-D convolution of the VAE, forward only (autodiff backends return `None`):
    /// unit stride, `x: [batch, in, frames, h, w]`, `weight: [out, in, kt, kh, kw]`, `bias:
    /// [out]`, `time_pad` zero frames on the past side and `pad = [ph, pw]` zeros around each
    /// frame ([`crate::cpu::conv3d`]). `None`: no kernel here.
    fn fused_conv3d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        time_pad: usize,
        pad: [usize; 2],
    ) -> Option<FloatTensor<Self>> {
        let _ = (x, weight, bias, time_pad, pad);
        None
    }

    /// `region(inputs)` as one checkpointed region (activation checkpointing): an autodiff
    /// backend runs it without recording anything, keeps only `inputs` for the backward pass,
    /// and there runs `region` again with gradients, from which it takes the inputs' gradients
    /// (`backend/checkpoint.rs`). Every tracked tensor `region` uses must be one of `inputs` (at
    /// most [`CHECKPOINT_INPUTS`]); it may read untracked tensors it captured. Other backends
    /// run `region(inputs)`.
    fn checkpoint(inputs: Vec<FloatTensor<Self>>, region: Region<Self>) -> FloatTensor<Self> {
        region(inputs)
    }
}

/// A function of float tensors that [`AttentionBackend::checkpoint`] runs (and runs again in the
/// backward pass): the same inputs give the same output.
pub type Region<B> = std::sync::Arc<dyn Fn(Vec<FloatTensor<B>>) -> FloatTensor<B> + Send + Sync>;

/// The most inputs one [`AttentionBackend::checkpoint`] region takes (a DiT block with two
/// adapted roles has 4 activations and 51 parameters).
pub const CHECKPOINT_INPUTS: usize = 96;

/// The backend's fused kernel on tensors, or `None` where it has none.
pub fn kernel_attention<B: AttentionBackend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    table: &BlockTable,
) -> Option<Tensor<B, 4>> {
    let prim = |t: Tensor<B, 4>| t.into_primitive().tensor();
    B::fused_attention(prim(q), prim(k), prim(v), table).map(|out| Tensor::from_primitive(TensorPrimitive::Float(out)))
}

/// The CPU kernel ([`crate::cpu`]) as the `AttentionBackend` items of a CPU backend.
macro_rules! cpu_kernel {
    () => {
        const FUSED_ATTENTION: bool = true;

        fn fused_attention_lse(
            q: FloatTensor<Self>,
            k: FloatTensor<Self>,
            v: FloatTensor<Self>,
            table: &BlockTable,
        ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
            crate::cpu::forward_tensors::<Self>(q, k, v, table)
        }

        fn fused_attention_backward(
            q: FloatTensor<Self>,
            k: FloatTensor<Self>,
            v: FloatTensor<Self>,
            out: FloatTensor<Self>,
            lse: FloatTensor<Self>,
            grad: FloatTensor<Self>,
            table: &BlockTable,
        ) -> Option<[FloatTensor<Self>; 3]> {
            crate::cpu::backward_tensors::<Self>([q, k, v, out, grad], lse, table)
        }

        const FUSED_ELEMENTWISE: bool = true;

        fn fused_gelu_tanh(x: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
            crate::cpu::gelu::forward_tensor::<Self>(x)
        }

        fn fused_gelu_tanh_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
            crate::cpu::gelu::backward_tensor::<Self>(x, grad)
        }

        fn fused_rope(x: FloatTensor<Self>, cos: FloatTensor<Self>, sin: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
            crate::cpu::rope::rope_tensor::<Self>(x, cos, sin)
        }

        fn fused_norm(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: Option<FloatTensor<Self>>,
            kind: RowNorm,
            eps: f64,
        ) -> Option<FloatTensor<Self>> {
            crate::cpu::norm::norm_tensor::<Self>(x, weight, bias, kind, eps)
        }

        fn fused_norm_backward(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            kind: RowNorm,
            eps: f64,
            grad: FloatTensor<Self>,
        ) -> Option<[FloatTensor<Self>; 3]> {
            crate::cpu::norm::norm_backward_tensor::<Self>(x, weight, kind, eps, grad)
        }

        fn fused_gate(x: FloatTensor<Self>, y: FloatTensor<Self>, gate: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
            crate::cpu::gate::gate_tensor::<Self>(x, y, gate)
        }

        fn fused_gate_backward(y: FloatTensor<Self>, gate: FloatTensor<Self>, grad: FloatTensor<Self>) -> Option<[FloatTensor<Self>; 2]> {
            crate::cpu::gate::gate_backward_tensor::<Self>(y, gate, grad)
        }

        fn fused_channel_norm(x: FloatTensor<Self>, gamma: FloatTensor<Self>, silu: bool) -> Option<FloatTensor<Self>> {
            crate::cpu::channel_norm::channel_norm_tensor::<Self>(x, gamma, silu)
        }

        fn fused_conv3d(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            bias: FloatTensor<Self>,
            time_pad: usize,
            pad: [usize; 2],
        ) -> Option<FloatTensor<Self>> {
            crate::cpu::conv3d::conv3d_tensor::<Self>(x, weight, bias, time_pad, pad)
        }
    };
}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> AttentionBackend for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
    cpu_kernel!();
}

#[cfg(feature = "flex")]
impl AttentionBackend for burn::backend::Flex {
    cpu_kernel!();
}

#[cfg(feature = "cube")]
mod cube {
    use super::AttentionBackend;
    use crate::{BlockTable, kernel};
    use burn::tensor::ops::{FloatTensor, ModuleOps};
    use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> AttentionBackend for CubeBackend<R, F, I, BT> {
        const FUSED_ATTENTION: bool = true;

        const FULL_ATTENTION: bool = true;

        fn fused_backward_on(device: &Self::Device) -> bool {
            kernel::has_float_atomics::<R>(&R::client(device))
        }

        fn full_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
            // No explicit scale: an explicit one sends Burn to its naive fallback.
            Some(<Self as ModuleOps<Self>>::attention(q, k, v, None, None, Default::default()))
        }

        fn fused_attention_lse(
            q: FloatTensor<Self>,
            k: FloatTensor<Self>,
            v: FloatTensor<Self>,
            table: &BlockTable,
        ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
            let fwd = kernel::forward(q, k, v, table);
            Some((fwd.out, fwd.lse))
        }

        fn fused_attention_backward(
            q: FloatTensor<Self>,
            k: FloatTensor<Self>,
            v: FloatTensor<Self>,
            out: FloatTensor<Self>,
            lse: FloatTensor<Self>,
            grad: FloatTensor<Self>,
            table: &BlockTable,
        ) -> Option<[FloatTensor<Self>; 3]> {
            let g = kernel::backward(q, k, v, out, lse, grad, table);
            Some([g.dq, g.dk, g.dv])
        }
    }
}

mod autodiff;
mod checkpoint;
#[cfg(feature = "cube")]
mod fusion;
