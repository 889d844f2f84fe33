//! `[train] context_parallel = D` through the engine: each packed sample sharded across the D
//! devices of a data-parallel group trains the weights of the unsharded step.

use super::{clip, small_config};
use crate::data::InMemoryClips;
use crate::engine::{TrainConfig, Trainer};
use crate::sft::SftObjective;
use burn::backend::{Autodiff, NdArray};
use ff_model::WanDit;
use ff_model::dit::DitConfig;
use ff_model::lora::LoraConfig;
use std::collections::BTreeMap;

type A = Autodiff<NdArray>;

type Weights = BTreeMap<String, Vec<f32>>;

/// Two steps of `model` on `devices` CPU devices in groups of `cp`: the losses, the trained
/// values before and after.
fn run(model: &WanDit<A>, cp: usize, devices: usize) -> (Vec<f64>, Weights, Weights) {
    // ε = 1: AdamW's first steps move each weight by about lr·g (not lr·sign(g)), so weights
    // compare as gradients do.
    let config = TrainConfig::new().with_steps(2).with_lr(1e-2).with_warmup_steps(1).with_batch(2).with_epsilon(1.0).with_lora_rank(4);
    let device = Default::default();
    let data = InMemoryClips((1..=4).map(|seed| clip(12, seed)).collect());
    let objective = SftObjective::new(small_config()).unwrap();
    let mut trainer = Trainer::new(config.with_context_parallel(cp), model.clone(), vec![device; devices], 4).unwrap();
    let host = |t: &Trainer<A>| -> Weights {
        t.trainable_values().into_iter().map(|(k, v)| (k, v.into_data().to_vec::<f32>().unwrap())).collect()
    };
    let before = host(&trainer);
    let losses = (0..2).map(|_| trainer.step(&objective, &data).unwrap().loss).collect();
    (losses, before, host(&trainer))
}

#[test]
fn context_parallel_steps_train_the_unsharded_weights() {
    // Tolerances: losses within 1e-5 relative, every trained value within 1e-4 of the largest
    // change two steps make. f32 rounding only: the shards' matmuls run over fewer query rows and
    // the backward sums over shards in another order (ff-model's sharded-step test bounds the
    // gradients within 1e-5 of their largest entry); a shard that saw a wrong key set or lost its
    // part of the graph would be off by the size of the change itself.
    // One model for every run: Burn's RNG is shared by the tests' threads.
    let model = DitConfig::tiny().init::<A>(&Default::default()).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    let (want_losses, before, want) = run(&model, 1, 1);
    let change = want.iter().flat_map(|(k, v)| v.iter().zip(&before[k]).map(|(a, b)| (a - b).abs())).fold(0.0f32, f32::max);
    assert!(change > 0.0, "the steps trained");
    for (cp, devices) in [(2, 2), (3, 3), (2, 4)] {
        let (losses, _, got) = run(&model, cp, devices);
        for (l, w) in losses.iter().zip(&want_losses) {
            assert!((l - w).abs() <= 1e-5 * w.abs(), "context_parallel = {cp} on {devices} devices: loss {l} against {w}");
        }
        let off = got.iter().flat_map(|(k, v)| v.iter().zip(&want[k]).map(|(a, b)| (a - b).abs())).fold(0.0f32, f32::max);
        eprintln!("context_parallel = {cp} on {devices} devices: weights off by {off:.2e} of a change of {change:.2e}");
        assert!(off <= 1e-4 * change, "context_parallel = {cp} on {devices} devices: weights off by {off} (change {change})");
        assert!(off > 0.0, "the sharded forward ran (its matmuls over fewer rows round differently)");
    }
}

#[test]
fn context_parallel_must_divide_the_devices() {
    let model = DitConfig::tiny().init::<A>(&Default::default()).with_roles(&LoraConfig::new(4));
    let config = TrainConfig::new().with_batch(2).with_lora_rank(4).with_context_parallel(2);
    let err = Trainer::new(config, model, vec![Default::default(); 3], 4).err().expect("3 devices in groups of 2").to_string();
    assert!(err.contains("context_parallel = 2") && err.contains("3 devices"), "{err}");
}
