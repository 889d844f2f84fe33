//! `Autodiff<B>` runs the inner backend's kernels forward and registers their backward kernels:
//! attention (FlashAttention-2 from the saved log-sum-exp), the tanh GELU (from the saved input),
//! the rotary embedding (the inverse rotation; the cos/sin table is a constant), the row norms
//! (from the saved input and weight) and the gated residual (from the saved branch and gate);
//! checkpointed regions are `checkpoint.rs`.

use super::{AttentionBackend, RowNorm};
use crate::BlockTable;
use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::{DType, TensorMetadata, backend::Backend, ops::FloatTensor};

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

/// The row norms' backward: `N` = 2 parents (input, weight) or 3 (and the bias).
#[derive(Debug)]
struct FusedNormBackward {
    kind: RowNorm,
    eps: f64,
}

impl<B: AttentionBackend, const N: usize> Backward<B, N> for FusedNormBackward {
    /// The input and the weight.
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (x, weight) = ops.state;
        let dxwb = B::fused_norm_backward(x, weight, self.kind, self.eps, grad)
            .expect("the inner backend ran the fused norm, so it has its backward");
        for (parent, g) in ops.parents.into_iter().zip(dxwb) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

#[derive(Debug)]
struct FusedGateBackward;

impl<B: AttentionBackend> Backward<B, 3> for FusedGateBackward {
    /// The branch `y` and the gate.
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let (y, gate) = ops.state;
        let [x_node, y_node, gate_node] = ops.parents;
        let [dy, dgate] = match (&y_node, &gate_node) {
            (None, None) => [None, None],
            _ => B::fused_gate_backward(y, gate, grad.clone())
                .expect("the inner backend ran the fused gate, so it has its backward")
                .map(Some),
        };
        for (node, g) in [(x_node, Some(grad)), (y_node, dy), (gate_node, dgate)] {
            if let (Some(node), Some(g)) = (node, g) {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

/// The fused norm of `parents[0]` with weight `parents[1]` (and bias `parents[2]`), recorded.
fn record_norm<B: AttentionBackend, C: CheckpointStrategy, const N: usize>(
    parents: [&FloatTensor<Autodiff<B, C>>; N],
    kind: RowNorm,
    eps: f64,
) -> Option<FloatTensor<Autodiff<B, C>>> {
    let (x, weight) = (parents[0].primitive.clone(), parents[1].primitive.clone());
    let bias = parents.get(2).map(|b| b.primitive.clone());
    let backward = FusedNormBackward { kind, eps };
    match backward.prepare::<C>(parents.map(|p| p.node.clone())).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let out = B::fused_norm(x.clone(), weight.clone(), bias, kind, eps)?;
            Some(prep.finish((x, weight), out))
        }
        OpsKind::UnTracked(prep) => Some(prep.finish(B::fused_norm(x, weight, bias, kind, eps)?)),
    }
}

impl<B: AttentionBackend, C: CheckpointStrategy> AttentionBackend for Autodiff<B, C> {
    fn checkpoint(inputs: Vec<FloatTensor<Self>>, region: super::Region<Self>) -> FloatTensor<Self> {
        super::checkpoint::checkpoint::<B, C>(inputs, region)
    }

    const FUSED_ATTENTION: bool = B::FUSED_ATTENTION;

    fn fused_backward_on(device: &Self::Device) -> bool {
        B::fused_backward_on(device)
    }

    fn fused_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, table: &BlockTable) -> Option<FloatTensor<Self>> {
        if !B::FUSED_ATTENTION {
            return None;
        }
        let nodes = [q.node.clone(), k.node.clone(), v.node.clone()];
        match FusedAttentionBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                if !B::fused_backward_on(&B::float_device(&q.primitive)) {
                    return None;
                }
                let (out, lse) = B::fused_attention_lse(q.primitive.clone(), k.primitive.clone(), v.primitive.clone(), table)?;
                let saved = Saved { q: q.primitive, k: k.primitive, v: v.primitive, out: out.clone(), lse, table: table.clone() };
                Some(prep.finish(saved, out))
            }
            OpsKind::UnTracked(prep) => Some(prep.finish(B::fused_attention(q.primitive, k.primitive, v.primitive, table)?)),
        }
    }

    const FUSED_ELEMENTWISE: bool = B::FUSED_ELEMENTWISE;

    fn fused_gelu_tanh(x: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        if !B::FUSED_ELEMENTWISE || x.primitive.dtype() != DType::F32 {
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

    fn fused_norm(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        kind: RowNorm,
        eps: f64,
    ) -> Option<FloatTensor<Self>> {
        let f32s = [Some(&x), Some(&weight), bias.as_ref()].into_iter().flatten().all(|t| t.primitive.dtype() == DType::F32);
        if !B::FUSED_ELEMENTWISE || !f32s {
            return None;
        }
        match &bias {
            None => record_norm::<B, C, 2>([&x, &weight], kind, eps),
            Some(b) => record_norm::<B, C, 3>([&x, &weight, b], kind, eps),
        }
    }

    fn fused_gate(x: FloatTensor<Self>, y: FloatTensor<Self>, gate: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let f32s = [&x, &y, &gate].iter().all(|t| t.primitive.dtype() == DType::F32);
        if !B::FUSED_ELEMENTWISE || !f32s {
            return None;
        }
        let nodes = [x.node.clone(), y.node.clone(), gate.node.clone()];
        match FusedGateBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::fused_gate(x.primitive, y.primitive.clone(), gate.primitive.clone())?;
                Some(prep.finish((y.primitive, gate.primitive), out))
            }
            OpsKind::UnTracked(prep) => Some(prep.finish(B::fused_gate(x.primitive, y.primitive, gate.primitive)?)),
        }
    }

    fn fused_rope(x: FloatTensor<Self>, cos: FloatTensor<Self>, sin: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        if !B::FUSED_ELEMENTWISE || x.primitive.dtype() != DType::F32 {
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
