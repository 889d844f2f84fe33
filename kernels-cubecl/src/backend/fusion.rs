//! [`AttentionBackend`] for `Fusion<B>` (Burn's `Wgpu` and `Cuda` are fusion-wrapped): the
//! kernels run as custom operations of the fusion stream, executed by the inner backend.
//!
//! Forward: inputs `q, k, v` → outputs `out` (input dtype), `lse: [batch, heads, q_tokens]` (f32).
//! Backward: inputs `q, k, v, out, lse, grad` → outputs `dq, dk, dv`.

use super::AttentionBackend;
use crate::BlockTable;
use burn::tensor::{
    DType, Shape,
    ops::{FloatTensor, ModuleOps},
};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{Fusion, FusionBackend, FusionRuntime};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};
use std::marker::PhantomData;

type Handles<B> = HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

#[derive(Clone, Debug)]
struct ForwardOp<B> {
    desc: CustomOpIr,
    table: BlockTable,
    _b: PhantomData<B>,
}

impl<B: FusionBackend + AttentionBackend> Operation<B::FusionRuntime> for ForwardOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let ([q, k, v], [out, lse]) = self.desc.as_fixed();
        let (q, k, v) = (handles.get_float_tensor::<B>(q), handles.get_float_tensor::<B>(k), handles.get_float_tensor::<B>(v));
        let (o, l) = B::fused_attention_lse(q, k, v, &self.table).expect("fused attention op registered for a backend without the kernel");
        handles.register_float_tensor::<B>(&out.id, o);
        handles.register_float_tensor::<B>(&lse.id, l);
    }
}

#[derive(Clone, Debug)]
struct BackwardOp<B> {
    desc: CustomOpIr,
    table: BlockTable,
    _b: PhantomData<B>,
}

impl<B: FusionBackend + AttentionBackend> Operation<B::FusionRuntime> for BackwardOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let ([q, k, v, out, lse, grad], [dq, dk, dv]) = self.desc.as_fixed();
        let mut get = |t: &TensorIr| handles.get_float_tensor::<B>(t);
        let (q, k, v, out, lse, grad) = (get(q), get(k), get(v), get(out), get(lse), get(grad));
        let grads = B::fused_attention_backward(q, k, v, out, lse, grad, &self.table)
            .expect("fused attention op registered for a backend without the kernel");
        for (ir, g) in [dq, dk, dv].into_iter().zip(grads) {
            handles.register_float_tensor::<B>(&ir.id, g);
        }
    }
}

impl<B: FusionBackend + AttentionBackend> AttentionBackend for Fusion<B> {
    const FUSED_ATTENTION: bool = B::FUSED_ATTENTION;

    fn fused_attention_lse(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        table: &BlockTable,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        if !B::FUSED_ATTENTION {
            return None;
        }
        let client = q.client.clone();
        let streams = OperationStreams::with_inputs([&q, &k, &v]);
        let lse_shape = Shape::new([q.shape[0], q.shape[1], q.shape[2]]);
        let out = TensorIr::uninit(client.create_empty_handle(), q.shape.clone(), q.dtype);
        let lse = TensorIr::uninit(client.create_empty_handle(), lse_shape, DType::F32);
        let desc = CustomOpIr::new("block_sparse_attention_forward", &[q.into_ir(), k.into_ir(), v.into_ir()], &[out, lse]);
        let op = ForwardOp::<B> { desc: desc.clone(), table: table.clone(), _b: PhantomData };
        let mut outputs = client.register(streams, OperationIr::Custom(desc), op).into_iter();
        Some((outputs.next()?, outputs.next()?))
    }

    const FULL_ATTENTION: bool = B::FULL_ATTENTION;

    fn fused_backward_on(device: &Self::Device) -> bool {
        B::fused_backward_on(device)
    }

    fn full_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        // Burn's fusion backend records its attention op and runs the inner backend's.
        B::FULL_ATTENTION.then(|| <Self as ModuleOps<Self>>::attention(q, k, v, None, None, Default::default()))
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
        if !B::FUSED_ATTENTION {
            return None;
        }
        let client = q.client.clone();
        let streams = OperationStreams::with_inputs([&q, &k, &v, &out, &lse, &grad]);
        let grad_of = |t: &FloatTensor<Self>| TensorIr::uninit(client.create_empty_handle(), t.shape.clone(), t.dtype);
        let outputs = [grad_of(&q), grad_of(&k), grad_of(&v)];
        let inputs = [q.into_ir(), k.into_ir(), v.into_ir(), out.into_ir(), lse.into_ir(), grad.into_ir()];
        let desc = CustomOpIr::new("block_sparse_attention_backward", &inputs, &outputs);
        let op = BackwardOp::<B> { desc: desc.clone(), table: table.clone(), _b: PhantomData };
        let mut grads = client.register(streams, OperationIr::Custom(desc), op).into_iter();
        Some([grads.next()?, grads.next()?, grads.next()?])
    }
}
