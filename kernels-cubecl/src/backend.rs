//! [`AttentionBackend`]: the backend extension behind [`crate::attention`] (and
//! [`crate::gelu_tanh`], the model's other fused CPU kernel).
//!
//! A backend with a fused block-sparse attention kernel returns it from
//! [`AttentionBackend::fused_attention`]; the others return `None` and the portable path (stock
//! tensor ops, differentiable by Burn's autodiff) runs instead. Every model that attends takes
//! `B: AttentionBackend`, so a kernel plugs in here for all callers.
//!
//! Implementations: `CubeBackend` (wgpu, cuda) launches the CubeCL kernels of [`crate::kernel`];
//! `Fusion<B>` registers them as custom operations of the fusion stream; NdArray and Flex run the
//! CPU kernel of [`crate::cpu`] on f32 tensors (other dtypes take the portable path);
//! `Autodiff<B>` runs the inner kernel forward and differentiates through the inner backward
//! kernels (FlashAttention-2 from the saved log-sum-exp).
//!
//! Shapes: `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]`,
//! `lse: [batch, heads, q_tokens]` (f32, natural log-sum-exp of the scaled scores).

use crate::BlockTable;
use burn::backend::NdArray;
use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ndarray::{FloatNdArrayElement, IntNdArrayElement, NdArrayTensor, QuantElement, SharedArray};
use burn::tensor::{Tensor, TensorPrimitive, backend::Backend, ops::FloatTensor};

/// A backend that may run block-sparse attention as one fused kernel.
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

    /// Whether the fused element-wise kernels (`fused_gelu_*`, `fused_rope`) run on this backend
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
}

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
    };
}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> AttentionBackend for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
    cpu_kernel!();
}

/// State the autodiff backward keeps: inputs, output and log-sum-exp on the inner backend.
#[derive(Clone, Debug)]
struct Saved<B: Backend> {
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    out: FloatTensor<B>,
    lse: FloatTensor<B>,
    table: BlockTable,
}

#[cfg(feature = "flex")]
impl AttentionBackend for burn::backend::Flex {
    cpu_kernel!();
}

#[derive(Debug)]
struct FusedAttentionBackward;

impl<B: AttentionBackend> Backward<B, 3> for FusedAttentionBackward {
    type State = Saved<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let Saved { q, k, v, out, lse, table } = ops.state;
        let grads_qkv = B::fused_attention_backward(q, k, v, out, lse, grad, &table)
            .expect("the inner backend ran the fused forward, so it has the fused backward");
        for (parent, g) in ops.parents.into_iter().zip(grads_qkv) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

#[derive(Debug)]
struct FusedGeluBackward;

impl<B: AttentionBackend> Backward<B, 1> for FusedGeluBackward {
    /// The input.
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let dx = B::fused_gelu_tanh_backward(ops.state, grad).expect("the inner backend ran the fused GELU, so it has its backward");
        if let [Some(node)] = ops.parents {
            grads.register::<B>(node.id, dx);
        }
    }
}

#[derive(Debug)]
struct FusedRopeBackward;

impl<B: AttentionBackend> Backward<B, 1> for FusedRopeBackward {
    /// The table: cos, sin.
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (cos, sin) = ops.state;
        let dx = B::fused_rope(grad, cos, B::float_neg(sin)).expect("the inner backend ran the fused rotation, so it runs its inverse");
        if let [Some(node)] = ops.parents {
            grads.register::<B>(node.id, dx);
        }
    }
}

impl<B: AttentionBackend, C: CheckpointStrategy> AttentionBackend for Autodiff<B, C> {
    const FUSED_ATTENTION: bool = B::FUSED_ATTENTION;

    fn fused_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, table: &BlockTable) -> Option<FloatTensor<Self>> {
        if !B::FUSED_ATTENTION {
            return None;
        }
        let nodes = [q.node.clone(), k.node.clone(), v.node.clone()];
        match FusedAttentionBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (out, lse) = B::fused_attention_lse(q.primitive.clone(), k.primitive.clone(), v.primitive.clone(), table)?;
                let saved = Saved { q: q.primitive, k: k.primitive, v: v.primitive, out: out.clone(), lse, table: table.clone() };
                Some(prep.finish(saved, out))
            }
            OpsKind::UnTracked(prep) => Some(prep.finish(B::fused_attention(q.primitive, k.primitive, v.primitive, table)?)),
        }
    }

    const FUSED_ELEMENTWISE: bool = B::FUSED_ELEMENTWISE;

    fn fused_gelu_tanh(x: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        if !B::FUSED_ELEMENTWISE || burn::tensor::TensorMetadata::dtype(&x.primitive) != burn::tensor::DType::F32 {
            return None;
        }
        match FusedGeluBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::fused_gelu_tanh(x.primitive.clone())?;
                Some(prep.finish(x.primitive, out))
            }
            OpsKind::UnTracked(prep) => Some(prep.finish(B::fused_gelu_tanh(x.primitive)?)),
        }
    }

    fn fused_rope(x: FloatTensor<Self>, cos: FloatTensor<Self>, sin: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        if !B::FUSED_ELEMENTWISE || burn::tensor::TensorMetadata::dtype(&x.primitive) != burn::tensor::DType::F32 {
            return None;
        }
        match FusedRopeBackward.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::fused_rope(x.primitive, cos.primitive.clone(), sin.primitive.clone())?;
                Some(prep.finish((cos.primitive, sin.primitive), out))
            }
            OpsKind::UnTracked(prep) => Some(prep.finish(B::fused_rope(x.primitive, cos.primitive, sin.primitive)?)),
        }
    }
}

#[cfg(feature = "cube")]
mod cube {
    use super::AttentionBackend;
    use crate::{BlockTable, kernel};
    use burn::tensor::ops::FloatTensor;
    use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> AttentionBackend for CubeBackend<R, F, I, BT> {
        const FUSED_ATTENTION: bool = true;

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

#[cfg(feature = "cube")]
mod fusion;
