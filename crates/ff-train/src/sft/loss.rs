//! The Phase 1 loss (App. C.1): per-token squared error of the velocity prediction, averaged
//! within each group of noised frames ([`Group`]: clip planner inputs, renderer inputs, crop
//! planner inputs) and summed over the groups. Every frame has the same number of tokens, so the
//! mean over a group's elements is its per-token mean. Computed in f32.

use super::layout::{Group, PackedLayout};
use burn::tensor::{DType, Int, Tensor, backend::Backend};

/// `prediction`, `targets`: `[1, C, F, h, w]`. Returns the sum of the group means and each
/// present group's mean (`[1]` each), in [`Group::ALL`] order.
pub fn grouped_loss<B: Backend>(
    prediction: Tensor<B, 5>,
    targets: Tensor<B, 5>,
    layout: &PackedLayout,
) -> (Tensor<B, 1>, Vec<(Group, Tensor<B, 1>)>) {
    let [_, c, f, h, w] = prediction.dims();
    let device = prediction.device();
    let err = (prediction.cast(DType::F32) - targets.cast(DType::F32)).powi_scalar(2);
    let per_frame: Tensor<B, 2> = err.swap_dims(1, 2).reshape([f, c * h * w]).mean_dim(1);
    let parts: Vec<(Group, Tensor<B, 1>)> = Group::ALL
        .into_iter()
        .filter_map(|g| {
            let frames: Vec<i64> = layout.group_frames(g).into_iter().map(|i| i as i64).collect();
            (!frames.is_empty())
                .then(|| (g, per_frame.clone().select(0, Tensor::<B, 1, Int>::from_ints(frames.as_slice(), &device)).mean()))
        })
        .collect();
    let total = parts.iter().map(|(_, l)| l.clone()).reduce(|a, b| a + b).unwrap_or_else(|| Tensor::zeros([1], &device));
    (total, parts)
}
