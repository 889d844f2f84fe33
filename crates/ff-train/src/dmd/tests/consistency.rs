//! Training and inference are the same graph: the packed rollout stopped at the last stage
//! equals the serial FlashForward executor's video for the same seed, with the student's own
//! planner and around a frozen one.

use super::{host, tiny_config};
use crate::dmd::rollout::{AnchorRead, FrozenPlanner, Student, rollout};
use crate::dmd::rollout_seed;
use crate::rng::TrainRng;
use burn::backend::NdArray;
use burn::tensor::Tensor;
use ff_model::{DitConfig, LoraConfig, Role, WanDit};
use ff_sched::exec::{DitRunner, NoiseSpec, Placement, execute};
use ff_sched::{Contract, ScheduleKind};

/// A tiny student with distinct roles (non-zero adapters and role vectors, so a role mix-up
/// shows) and a prompt `[1, 8, 24]`.
fn student(rng: &mut TrainRng) -> (WanDit<NdArray>, Tensor<NdArray, 3>) {
    let device = Default::default();
    let model: WanDit<NdArray> = DitConfig::tiny().with_text_len(8).init(&device).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    let bumped = crate::engine::params::params(&model, |p| p.ends_with(".b") || p == "role_embedding")
        .into_iter()
        .map(|(k, v)| {
            let n = v.dims()[0];
            (k, Tensor::<NdArray, 1>::from_data(rng.normal_data(vec![n]), &device) * 0.1)
        })
        .collect();
    let prompt = Tensor::<NdArray, 3>::from_data(rng.normal_data(vec![1, 8, 24]), &device);
    (crate::engine::params::assign(model, bumped), prompt)
}

/// The serial FlashForward video of `runner`.
fn serial(contract: &Contract, runner: DitRunner<NdArray>) -> Vec<f32> {
    let graph = ScheduleKind::FlashForward.build(contract).unwrap();
    host(Tensor::cat(execute(&graph, &Placement::serial(), vec![runner]).unwrap().outputs, 2))
}

/// Asserts `got` is `want` up to f32 rounding.
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    let err = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(err <= 1e-4 * scale.max(1.0), "{what}: packed rollout differs from the serial executor by {err} (scale {scale})");
}

fn differs(a: &[f32], b: &[f32]) -> bool {
    a.iter().zip(b).any(|(a, b)| (a - b).abs() > 1e-2)
}

#[test]
fn rollout_at_the_last_stage_is_the_serial_flashforward_generation() {
    let (model, prompt) = student(&mut TrainRng::new(12));
    let contract = tiny_config().with_stages(4).contract().unwrap();
    let noise = NoiseSpec { seed: 21, channels: 16, height: 4, width: 4 };

    let student = Student { live: &model, frozen: &model };
    let packed = rollout(&student, prompt.clone(), &contract, &noise, 3, AnchorRead::Connected, None).unwrap();
    let want = serial(&contract, DitRunner::new(&model, prompt.clone(), &contract, noise));
    assert_close(&host(packed.x0), &want, "student planner");
    // An earlier exit is a different output (the comparison can fail).
    let early = host(rollout(&student, prompt, &contract, &noise, 2, AnchorRead::Connected, None).unwrap().x0);
    assert!(differs(&early, &want));
}

#[test]
fn rollout_around_a_frozen_planner_is_the_serial_generation_of_the_combined_student() {
    let mut rng = TrainRng::new(13);
    let (model, prompt) = student(&mut rng);
    let device = Default::default();
    let planner: WanDit<NdArray> = DitConfig::tiny().with_text_len(8).init(&device);
    let empty = Tensor::<NdArray, 3>::from_data(rng.normal_data(vec![1, 8, 24]), &device);
    let contract = tiny_config().with_stages(4).with_planner_steps(3).with_planner_guidance(2.0).contract().unwrap();
    let caption = "a red circle bounces";
    // Inference draws both streams from one seed; the frozen planner's comes from the caption.
    let noise = NoiseSpec { seed: rollout_seed(caption), channels: 16, height: 4, width: 4 };

    let frozen = FrozenPlanner::new(planner.clone());
    let plan = || frozen.plan(&contract, caption, prompt.clone(), empty.clone(), [16, 4, 4]).unwrap();
    let planned = plan();
    let anchors = host(planned.anchors.clone());
    let student = Student { live: &model, frozen: &model };
    let packed = host(rollout(&student, prompt.clone(), &contract, &noise, 3, AnchorRead::Connected, Some(planned)).unwrap().x0);
    let runner = DitRunner::from_role_models(planner, model.merge(Role::Renderer), prompt.clone(), &contract, noise);
    let want = serial(&contract, runner.with_empty_prompt(empty.clone()));
    assert_close(&packed, &want, "frozen planner");
    // The kept anchors are the drawn ones; the student's own planner gives another video.
    assert_eq!(host(plan().anchors), anchors);
    let own = tiny_config().with_stages(4).contract().unwrap();
    assert!(differs(&host(rollout(&student, prompt, &own, &noise, 3, AnchorRead::Connected, None).unwrap().x0), &want));
}

#[test]
fn the_frozen_planners_anchor_store_is_bounded_and_redraws_what_it_dropped() {
    let mut rng = TrainRng::new(14);
    let device = Default::default();
    let planner: WanDit<NdArray> = DitConfig::tiny().with_text_len(8).init(&device);
    let prompt = Tensor::<NdArray, 3>::from_data(rng.normal_data(vec![1, 8, 24]), &device);
    let contract = tiny_config().with_stages(2).with_planner_steps(1).contract().unwrap();
    let one = 16 * contract.anchors.len() * 4 * 4 * 4;
    let frozen = FrozenPlanner::new(planner).with_store_bytes(2 * one);
    let plan = |caption: &str| host(frozen.plan(&contract, caption, prompt.clone(), prompt.clone(), [16, 4, 4]).unwrap().anchors);
    let first = plan("caption 0");
    for i in 1..5 {
        plan(&format!("caption {i}"));
        assert!(frozen.stored().1 <= 2 * one, "{:?} after {} captions", frozen.stored(), i + 1);
    }
    assert_eq!(frozen.stored(), (2, 2 * one), "the newest two are kept");
    assert_eq!(plan("caption 0"), first, "a dropped caption is drawn again to the same anchors");
}
