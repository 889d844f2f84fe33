//! `[train] precision = "bf16"` through the engine on Burn's CPU backend with bf16 (Flex): Phase 1
//! steps of the tiny model follow the f32 run, and the master weights stay f32.

use super::{clip, small_config};
use crate::data::InMemoryClips;
use crate::engine::{Checkpointing, Precision, TrainConfig, Trainer};
use crate::sft::SftObjective;
use burn::backend::{Autodiff, Flex};
use burn::tensor::DType;
use ff_model::WanDit;
use ff_model::dit::DitConfig;
use ff_model::lora::LoraConfig;

type F = Autodiff<Flex>;

/// The losses of `steps` steps of `model` and the trained values' dtypes.
fn run(model: &WanDit<F>, config: &TrainConfig, steps: usize) -> (Vec<f64>, Vec<DType>) {
    let device = Default::default();
    let data = InMemoryClips((1..=4).map(|seed| clip(12, seed)).collect());
    let objective = SftObjective::new(small_config()).unwrap();
    let mut trainer = Trainer::new(config.clone(), model.clone(), vec![device], 4).unwrap();
    let losses = (0..steps).map(|_| trainer.step(&objective, &data).unwrap().loss).collect();
    (losses, trainer.trainable_values().values().map(|v| v.dtype()).collect())
}

#[test]
fn twenty_bf16_steps_follow_the_f32_losses() {
    // Tolerance: 1 % of the f32 loss at every step (measured: 1.3e-3 to 2.2e-3 at worst over three
    // random models, 3e-5 at step 1).
    // bf16 keeps 8 significant bits. At step 1 the weights are equal and only the forward's
    // rounding separates the losses (a squared error over many values averages it out); each
    // update then moves the two runs' weights apart by the bf16 gradients' error (5e-3 relative
    // L2 in ff-model's test), which AdamW's normalised step turns into a drift that grows with
    // the steps. The tolerance is below what 20 steps at lr 1e-3 train (the late losses fall by
    // about 2 %), so a run that skipped or garbled the updates would not pass.
    let config = TrainConfig::new().with_steps(20).with_lr(1e-3).with_warmup_steps(2).with_batch(2).with_lora_rank(4).with_lora_alpha(4.0);
    // One model for both runs: Burn's RNG is shared by the tests' threads.
    let model = DitConfig::tiny().init::<F>(&Default::default()).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    let (f32_losses, f32_dtypes) = run(&model, &config, 20);
    let half = config.clone().with_precision(Precision::Bf16).with_checkpointing(Checkpointing::Blocks);
    let (bf16_losses, dtypes) = run(&model, &half, 20);
    assert!(f32_dtypes.iter().chain(&dtypes).all(|d| *d == DType::F32), "master weights stay f32: {dtypes:?}");
    let worst = f32_losses.iter().zip(&bf16_losses).map(|(a, b)| (a - b).abs() / a).fold(0.0, f64::max);
    eprintln!("20 steps, bf16 against f32: worst relative loss difference {worst:.2e}");
    assert!(worst <= 0.01, "bf16 {bf16_losses:?}\nf32 {f32_losses:?}\nworst relative difference {worst}");
    assert!(worst > 0.0, "the bf16 run ran in bf16");
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let (early, late) = (mean(&bf16_losses[..5]), mean(&bf16_losses[15..]));
    let (f32_early, f32_late) = (mean(&f32_losses[..5]), mean(&f32_losses[15..]));
    assert!(late < early && f32_late < f32_early, "both runs learn: bf16 {early} → {late}, f32 {f32_early} → {f32_late}");
}
