//! Gradient routing of the rollout (Alg. 3): the planner learns only through the renderer's
//! exit-stage read of the anchor bank, and stages before the exit contribute nothing.

use super::tiny_config;
use crate::dmd::rollout::{AnchorRead, Student, rollout};
use crate::engine::params::{ParamMap, gradients};
use crate::engine::tests::{B, tiny_model};
use crate::rng::TrainRng;
use burn::module::Module;
use burn::tensor::Tensor;
use ff_model::WanDit;
use ff_sched::exec::NoiseSpec;

const NOISE: NoiseSpec = NoiseSpec { seed: 5, channels: 16, height: 2, width: 2 };

/// Gradients of a fixed random projection of the rollout's x̂₀ (of its splice with the anchors
/// when `splice`).
fn projected(model: &WanDit<B>, frozen: &WanDit<B>, exit: usize, read: AnchorRead, splice: bool) -> ParamMap<burn::backend::NdArray> {
    let config = tiny_config();
    let contract = config.contract().unwrap();
    let device = Default::default();
    let mut rng = TrainRng::new(3);
    let prompt = Tensor::<B, 3>::from_data(rng.normal_data(vec![1, 8, 24]), &device);
    let out = rollout(&Student { live: model, frozen }, prompt, &contract, &NOISE, exit, read, None).unwrap();
    let x = if splice { out.spliced(&contract.anchors) } else { out.x0 };
    let weights = Tensor::<B, 5>::from_data(rng.normal_data(x.dims().to_vec()), &device);
    let g = (x * weights).sum().backward();
    gradients(model, &g)
}

fn grads(model: &WanDit<B>, frozen: &WanDit<B>, exit: usize, read: AnchorRead) -> ParamMap<burn::backend::NdArray> {
    projected(model, frozen, exit, read, false)
}

/// Largest |gradient| over the parameters whose path contains `part` (0 when none got one).
fn largest(grads: &ParamMap<burn::backend::NdArray>, part: &str) -> f32 {
    grads.iter().filter(|(k, _)| k.contains(part)).map(|(_, g)| g.clone().abs().max().into_scalar()).fold(0.0, f32::max)
}

/// Largest |gradient| of role `row` of the role-vector table.
fn role_row(grads: &ParamMap<burn::backend::NdArray>, row: usize, dim: usize) -> f32 {
    grads.get("role_embedding").map_or(0.0, |g| g.clone().narrow(0, row * dim, dim).abs().max().into_scalar())
}

#[test]
fn planner_learns_only_through_the_connected_anchor_read() {
    let model = tiny_model();
    let frozen = model.clone().no_grad();
    let dim = model.config().dim;
    for exit in [0, 1] {
        let connected = grads(&model, &frozen, exit, AnchorRead::Connected);
        assert!(largest(&connected, ".adapters.0.") > 0.0, "exit {exit}: planner adapters get no gradient");
        assert!(role_row(&connected, 0, dim) > 0.0 && role_row(&connected, 1, dim) > 0.0, "exit {exit}");
        let detached = grads(&model, &frozen, exit, AnchorRead::Detached);
        assert_eq!(largest(&detached, ".adapters.0."), 0.0, "exit {exit}: planner adapters reached without the anchor read");
        assert_eq!(role_row(&detached, 0, dim), 0.0, "exit {exit}: planner role vector reached without the anchor read");
        assert!(largest(&detached, ".adapters.1.") > 0.0, "exit {exit}: the renderer still learns");
    }
}

#[test]
fn stages_before_the_exit_contribute_no_gradient() {
    // The same rollout with the earlier stages on the differentiable model: its gradients must
    // not change (the earlier stages' outputs enter the exit stage as constants).
    let model = tiny_model();
    let frozen = model.clone().no_grad();
    let want = grads(&model, &frozen, 1, AnchorRead::Connected);
    let got = grads(&model, &model, 1, AnchorRead::Connected);
    assert_eq!(want.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>());
    for (k, g) in &want {
        let (a, b) = (g.clone().into_data().to_vec::<f32>().unwrap(), got[k].clone().into_data().to_vec::<f32>().unwrap());
        assert!(a == b, "{k}: gradients differ when the stage before the exit is differentiable");
    }
    // And the exit stage's gradient does depend on where it exits.
    let at_zero = grads(&model, &frozen, 0, AnchorRead::Connected);
    let k = ".self_attn.q.adapters.1.b";
    let key = want.keys().find(|p| p.ends_with(k)).unwrap();
    assert_ne!(want[key].clone().into_data().to_vec::<f32>().unwrap(), at_zero[key].clone().into_data().to_vec::<f32>().unwrap());
}

#[test]
fn a_scored_splice_trains_the_planner_without_the_anchor_read() {
    let model = tiny_model();
    let frozen = model.clone().no_grad();
    let dim = model.config().dim;
    let spliced = projected(&model, &frozen, 1, AnchorRead::Detached, true);
    assert!(largest(&spliced, ".adapters.0.") > 0.0, "the splice gives the planner adapters no gradient");
    assert!(role_row(&spliced, 0, dim) > 0.0, "the splice gives the planner role vector no gradient");
    assert!(largest(&spliced, ".adapters.1.") > 0.0, "the renderer still learns from the other positions");
}

#[test]
fn the_splice_holds_the_anchors_at_their_positions_and_the_render_elsewhere() {
    let model = tiny_model();
    let contract = tiny_config().contract().unwrap();
    let prompt = Tensor::<B, 3>::from_data(TrainRng::new(3).normal_data(vec![1, 8, 24]), &Default::default());
    let out = rollout(&Student { live: &model, frozen: &model }, prompt, &contract, &NOISE, 1, AnchorRead::Connected, None).unwrap();
    let spliced = out.spliced(&contract.anchors);
    assert_eq!(spliced.dims(), out.x0.dims());
    let frame = |x: &Tensor<B, 5>, f: usize| x.clone().narrow(2, f, 1).into_data().to_vec::<f32>().unwrap();
    assert!(contract.anchors.len() >= 2 && *contract.anchors.last().unwrap() == spliced.dims()[2] - 1);
    assert_ne!(frame(&out.anchors, 0), frame(&out.x0, 0), "anchors and render must differ for the test to mean anything");
    for f in 0..spliced.dims()[2] {
        let want = match contract.anchors.iter().position(|&p| p == f) {
            Some(a) => frame(&out.anchors, a),
            None => frame(&out.x0, f),
        };
        assert_eq!(frame(&spliced, f), want, "latent {f}");
    }
}
