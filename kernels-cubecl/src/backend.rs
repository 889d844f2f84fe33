//! [`AttentionBackend`]: the backend extension behind [`crate::attention`].
//!
//! A backend with a fused block-sparse attention kernel returns it from
//! [`AttentionBackend::fused_attention`]; the others return `None` and the portable path (stock
//! tensor ops, differentiable by Burn's autodiff) runs instead. Every model that attends takes
//! `B: AttentionBackend`, so a kernel plugs in here for all callers.

use crate::BlockTable;
use burn::backend::NdArray;
use burn::backend::autodiff::{Autodiff, checkpoint::strategy::CheckpointStrategy};
use burn::backend::ndarray::{FloatNdArrayElement, IntNdArrayElement, NdArrayTensor, QuantElement, SharedArray};
use burn::tensor::{backend::Backend, ops::FloatTensor};

/// A backend that may run block-sparse attention as one fused kernel.
pub trait AttentionBackend: Backend {
    /// `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]`,
    /// softmax scale `1/sqrt(head_dim)`, keys restricted by `table`. `None`: no kernel here.
    fn fused_attention(q: FloatTensor<Self>, k: FloatTensor<Self>, v: FloatTensor<Self>, table: &BlockTable) -> Option<FloatTensor<Self>> {
        let _ = (q, k, v, table);
        None
    }
}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> AttentionBackend for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
}

impl<B: AttentionBackend, C: CheckpointStrategy> AttentionBackend for Autodiff<B, C> {}

#[cfg(feature = "flex")]
impl AttentionBackend for burn::backend::Flex {}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube {
    use super::AttentionBackend;
    use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
    use burn_fusion::{Fusion, FusionBackend};

    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> AttentionBackend for CubeBackend<R, F, I, BT> {}

    impl<B: FusionBackend + AttentionBackend> AttentionBackend for Fusion<B> {}
}
