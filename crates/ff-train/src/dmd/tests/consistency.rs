//! Training and inference are the same graph: the packed rollout stopped at the last stage
//! equals the serial FlashForward executor's video for the same seed.

use super::{host, tiny_config};
use crate::dmd::rollout::{AnchorRead, Student, rollout};
use crate::rng::TrainRng;
use burn::backend::NdArray;
use burn::tensor::Tensor;
use ff_model::{DitConfig, LoraConfig, WanDit};
use ff_sched::ScheduleKind;
use ff_sched::exec::{DitRunner, NoiseSpec, Placement, execute};

#[test]
fn rollout_at_the_last_stage_is_the_serial_flashforward_generation() {
    let device = Default::default();
    let mut model: WanDit<NdArray> = DitConfig::tiny().with_text_len(8).init(&device).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    // Distinct roles: non-zero adapters and role vectors, so a role mix-up shows.
    let mut rng = TrainRng::new(12);
    let bumped = crate::engine::params::params(&model, |p| p.ends_with(".b") || p == "role_embedding")
        .into_iter()
        .map(|(k, v)| {
            let n = v.dims()[0];
            (k, Tensor::<NdArray, 1>::from_data(rng.normal_data(vec![n]), &device) * 0.1)
        })
        .collect();
    model = crate::engine::params::assign(model, bumped);
    let config = tiny_config().with_stages(4);
    let contract = config.contract().unwrap();
    let prompt = Tensor::<NdArray, 3>::from_data(rng.normal_data(vec![1, 8, 24]), &device);
    let noise = NoiseSpec { seed: 21, channels: 16, height: 4, width: 4 };

    let student = Student { live: &model, frozen: &model };
    let packed = rollout(&student, prompt.clone(), &contract, &noise, 3, AnchorRead::Connected).unwrap();
    let runner = DitRunner::new(&model, prompt.clone(), &contract, noise);
    let graph = ScheduleKind::FlashForward.build(&contract).unwrap();
    let serial = execute(&graph, &Placement::serial(), vec![runner]).unwrap();
    let want = host(Tensor::cat(serial.outputs, 2));
    let got = host(packed.x0);
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    let err = got.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(err <= 1e-4 * scale.max(1.0), "packed rollout differs from the serial executor by {err} (scale {scale})");
    // An earlier exit is a different output (the comparison can fail).
    let early = host(rollout(&student, prompt, &contract, &noise, 2, AnchorRead::Connected).unwrap().x0);
    assert!(early.iter().zip(&want).any(|(a, b)| (a - b).abs() > 1e-2));
}
