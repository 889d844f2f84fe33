//! The two Phase 2 losses (f32).
//!
//! * [`dmd_loss`]: `½·mean((x̂₀ − sg(x̂₀ − g))²)` over the whole clip (DMD2 / Self-Forcing): its
//!   value is `½·mean(g²)` and its gradient with respect to x̂₀ is `g / N`.
//! * [`flow_loss`]: the critic's flow-matching denoising loss on a detached student sample, the
//!   mean over the target frames of `(v̂ − (ε − x))²` (Self-Forcing's `flow` loss, no timestep
//!   weighting); head frames are left out, as their predictions are discarded.

use burn::tensor::{DType, Tensor, backend::Backend};

/// `x0`, `grad`: `[1, C, L, h, w]`; `grad` carries no gradient. Returns `[1]`.
pub fn dmd_loss<B: Backend>(x0: Tensor<B, 5>, grad: Tensor<B, 5>) -> Tensor<B, 1> {
    let x0 = x0.cast(DType::F32);
    let target = (x0.clone() - grad.cast(DType::F32)).detach();
    (x0 - target).square().mean() * 0.5
}

/// Sum of squared velocity errors over frames `head..` of one window and their element count:
/// `v`, `eps`, `x`: `[1, C, n, h, w]`.
pub fn flow_loss<B: Backend>(v: Tensor<B, 5>, eps: Tensor<B, 5>, x: Tensor<B, 5>, head: usize) -> (Tensor<B, 1>, usize) {
    let n = v.dims()[2];
    let err = (v.cast(DType::F32) - (eps - x).cast(DType::F32)).narrow(2, head, n - head);
    let count = err.shape().num_elements();
    (err.square().sum(), count)
}
