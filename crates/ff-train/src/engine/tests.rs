//! Engine invariants on a tiny random DiT (`Autodiff<NdArray>`), trained with the plain
//! flow-matching objective.

use super::params::{ParamMap, params};
use super::*;
use crate::data::{InMemoryClips, LatentClip};
use crate::flow::{FlowMatchConfig, FlowMatchObjective};
use crate::rng::TrainRng;
use burn::backend::{Autodiff, NdArray};
use burn::module::AutodiffModule;
use burn::tensor::{Tensor, TensorData};
use ff_model::{DitConfig, LoraConfig, WanDit};
use std::collections::BTreeMap;

pub(crate) type B = Autodiff<NdArray>;
type Inner = NdArray;

/// A tiny role model (2 layers, dim 32, context of 8 tokens) with every adapter's `B` non-zero,
/// so that every adapter receives a gradient from the first step.
pub(crate) fn tiny_model() -> WanDit<B> {
    let device = Default::default();
    let model = DitConfig::tiny().with_text_len(8).init::<B>(&device).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    let trainable = params(&model, |p| p.contains(".adapters.") && p.ends_with(".b"));
    let mut rng = TrainRng::new(11);
    let bumped: ParamMap<B> = trainable
        .into_iter()
        .map(|(k, v)| {
            let n = v.dims()[0];
            (k, Tensor::from_data(TensorData::new(rng.normal_data(vec![n]).to_vec::<f32>().unwrap(), [n]), &device) * 0.05)
        })
        .collect();
    super::params::assign(model, bumped)
}

/// `n` random clips of 3 latent frames at 4×4 with a 5-token prompt.
pub(crate) fn clips(n: usize) -> InMemoryClips {
    let mut rng = TrainRng::new(5);
    InMemoryClips(
        (0..n)
            .map(|i| LatentClip {
                latents: rng.normal_data(vec![16, 3, 4, 4]),
                prompt: rng.normal_data(vec![5, 24]),
                crops: None,
                caption: format!("clip {i}"),
            })
            .collect(),
    )
}

pub(crate) fn objective() -> FlowMatchObjective {
    FlowMatchObjective { config: FlowMatchConfig::new() }
}

pub(crate) fn config() -> TrainConfig {
    TrainConfig::new().with_lr(1e-3).with_warmup_steps(2).with_batch(2).with_epsilon(1e-6).with_lora_rank(4).with_lora_alpha(4.0)
}

fn host(map: &ParamMap<Inner>) -> BTreeMap<String, Vec<f32>> {
    map.iter().map(|(k, v)| (k.clone(), v.clone().into_data().to_vec::<f32>().unwrap())).collect()
}

fn max_diff(a: &BTreeMap<String, Vec<f32>>, b: &BTreeMap<String, Vec<f32>>) -> f32 {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    a.iter().flat_map(|(k, x)| x.iter().zip(&b[k]).map(|(x, y)| (x - y).abs())).fold(0.0, f32::max)
}

/// Trainable weights of `model` after `steps` steps.
fn train(model: &WanDit<B>, config: TrainConfig, devices: usize, steps: usize) -> BTreeMap<String, Vec<f32>> {
    let data = clips(4);
    let mut trainer = Trainer::new(config, model.clone(), vec![Default::default(); devices], data.0.len()).unwrap();
    for _ in 0..steps {
        trainer.step(&objective(), &data).unwrap();
    }
    host(&trainer.trainable_values())
}

#[test]
fn accumulation_equals_batch_and_data_parallel_equals_accumulation() {
    let model = tiny_model();
    let batch = train(&model, config().with_micro_batch(2), 1, 2);
    let accumulated = train(&model, config().with_micro_batch(1), 1, 2);
    let parallel = train(&model, config().with_micro_batch(1), 2, 2);
    let initial = host(&params(&model.valid(), |p| Trainable::Lora.contains(p)));
    assert!(max_diff(&batch, &initial) > 1e-4, "the steps move the weights");
    assert!(max_diff(&accumulated, &batch) <= 1e-5, "accumulation 2 × 1 vs batch 2: {}", max_diff(&accumulated, &batch));
    // Two peers: burn-collective's sum is one commutative addition, the accumulation's order.
    assert_eq!(parallel, accumulated, "2 devices × 1 vs accumulation: bit-identical");
}

#[test]
fn prefetching_the_next_clips_changes_nothing() {
    let model = tiny_model();
    let ahead = train(&model, config().with_steps(3), 1, 3);
    let inline = train(&model, config().with_steps(3).with_prefetch(false), 1, 3);
    assert_eq!(ahead, inline);
}

/// The flow-matching objective, failing on the clip captioned `bad`.
struct FailOn(&'static str);

impl crate::Objective<B> for FailOn {
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> crate::Result<crate::Loss<B>> {
        if clip.caption == self.0 {
            return Err(crate::TrainError::Shape(format!("{} is broken", self.0)));
        }
        crate::Objective::loss(&objective(), model, clip, rng)
    }
}

#[test]
fn a_worker_that_fails_fails_the_step_on_every_device_without_a_hang() {
    let data = clips(2);
    let mut trainer = Trainer::new(config().with_micro_batch(1), tiny_model(), vec![Default::default(); 2], 2).unwrap();
    let before = host(&trainer.trainable_values());
    for bad in ["clip 0", "clip 1"] {
        let err = trainer.step(&FailOn(bad), &data).unwrap_err().to_string();
        assert!(err.contains(&format!("{bad} is broken")), "{err}");
        assert_eq!((trainer.step_count(), host(&trainer.trainable_values())), (0, before.clone()));
    }
    // The collective is still usable: the next step runs on both devices.
    assert_eq!(trainer.step(&objective(), &data).unwrap().clips, 2);
}

/// The flow-matching objective, recording the rayon pool it runs in: (pool thread index, pool
/// size) of each loss.
struct Pooled(std::sync::Mutex<Vec<(Option<usize>, usize)>>);

impl crate::Objective<B> for Pooled {
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> crate::Result<crate::Loss<B>> {
        self.0.lock().unwrap().push((rayon::current_thread_index(), rayon::current_num_threads()));
        crate::Objective::loss(&objective(), model, clip, rng)
    }
}

#[test]
fn each_group_steps_inside_a_pool_of_its_share_of_the_callers_threads() {
    let data = clips(4);
    for (threads, devices, per_group) in [(2, 1, 2), (4, 2, 2), (1, 2, 1)] {
        let caller = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut trainer = Trainer::new(config().with_micro_batch(1), tiny_model(), vec![Default::default(); devices], 4).unwrap();
        let pooled = Pooled(Default::default());
        caller.install(|| trainer.step(&pooled, &data)).unwrap();
        let seen = pooled.0.into_inner().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(
            seen.iter().all(|&(index, size)| index.is_some() && size == per_group),
            "{threads} threads, {devices} devices: losses ran at {seen:?}"
        );
    }
}

#[test]
fn nodes_need_a_rank_below_the_count_and_a_coordinator() {
    let nodes =
        |count, rank, coordinator: Option<&str>| Nodes { count, rank, coordinator: coordinator.map(String::from), ..Nodes::default() };
    assert_eq!(nodes(1, 0, None).validate().unwrap(), None);
    assert_eq!(nodes(2, 1, Some("10.0.0.1:29500")).validate().unwrap(), Some(("10.0.0.1".to_string(), 29500)));
    for (bad, says) in [(nodes(2, 2, Some("h:1")), "rank 2"), (nodes(2, 0, None), "coordinator"), (nodes(2, 0, Some("h")), "HOST:PORT")] {
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    }
    let err =
        Trainer::new(config(), tiny_model(), vec![Default::default()], 2).unwrap().with_nodes(nodes(4, 0, Some("h:1"))).err().unwrap();
    assert!(err.to_string().contains("batch 2"), "{err}");
}

#[test]
fn frozen_backbone_stays_bit_identical_and_every_trainable_parameter_moves() {
    let data = clips(2);
    let model = tiny_model();
    let base_before = host(&params(&model.valid(), |p| !Trainable::Lora.contains(p)));
    let mut trainer = Trainer::new(config(), model, vec![Default::default()], 2).unwrap();
    let before = host(&trainer.trainable_values());
    let first = trainer.step(&objective(), &data).unwrap();
    trainer.step(&objective(), &data).unwrap();
    assert_eq!((first.step, first.clips, first.lr), (1, 2, 5e-4));
    assert!(first.loss.is_finite() && first.grad_norm > 0.0);
    let model = trainer.model().valid();
    assert_eq!(host(&params(&model, |p| !Trainable::Lora.contains(p))), base_before);
    let after = host(&trainer.trainable_values());
    // Planner parts see no planner frames (the objective runs the renderer role): no gradient,
    // no update, no weight decay; everything the renderer uses moves.
    for (path, value) in &after {
        let moved = value != &before[path];
        let renderer = path.contains(".adapters.1.") || path == "role_embedding";
        assert_eq!(moved, renderer, "{path}");
    }
}

#[test]
fn adamw_matches_the_reference_update_with_beta1_zero() {
    let config = TrainConfig::new().with_epsilon(1e-8).with_weight_decay(0.01);
    let mut optimizer = Optimizer::<Inner>::new(&config);
    let device = Default::default();
    let t = |v: &[f32]| Tensor::<Inner, 1>::from_data(TensorData::new(v.to_vec(), [v.len()]), &device);
    let (p0, g1, g2) = ([0.5f32, -1.0, 2.0], [0.1f32, -0.2, 0.0], [0.3f32, 0.1, -0.05]);
    let lr = 0.1;
    let p: ParamMap<Inner> = [("w".to_string(), t(&p0))].into();
    let p1 = optimizer.step(lr, &p, [("w".to_string(), t(&g1))].into());
    let p2 = optimizer.step(lr, &p1, [("w".to_string(), t(&g2))].into());
    let got = p2["w"].clone().into_data().to_vec::<f32>().unwrap();
    // PyTorch AdamW with β₁ = 0, β₂ = 0.999, in f64.
    let (b2, eps, wd) = (0.999f64, 1e-8, 0.01);
    for i in 0..3 {
        let mut p = p0[i] as f64;
        let mut v = 0.0;
        for (t, g) in [(1, g1[i] as f64), (2, g2[i] as f64)] {
            v = b2 * v + (1.0 - b2) * g * g;
            let v_hat = v / (1.0 - b2.powi(t));
            p = p * (1.0 - lr * wd) - lr * g / (v_hat.sqrt() + eps);
        }
        assert!((got[i] as f64 - p).abs() < 1e-6, "element {i}: {} vs {p}", got[i]);
    }
    assert_eq!(optimizer.state()["w"].time, 2);
}

#[test]
fn global_clip_scales_all_gradients_by_one_factor() {
    let device = Default::default();
    let t = |v: &[f32]| Tensor::<Inner, 1>::from_data(TensorData::new(v.to_vec(), [v.len()]), &device);
    let grads: ParamMap<Inner> = [("a".to_string(), t(&[3.0, 0.0])), ("b".to_string(), t(&[0.0, -4.0]))].into();
    let (clipped, norm) = clip_global_norm(grads.clone(), 1.0);
    assert!((norm - 5.0).abs() < 1e-9);
    let c = host(&clipped);
    let f = 1.0 / (5.0 + 1e-6);
    assert!((c["a"][0] as f64 - 3.0 * f).abs() < 1e-7 && (c["b"][1] as f64 + 4.0 * f).abs() < 1e-7, "{c:?}");
    let (kept, norm) = clip_global_norm(grads.clone(), 10.0);
    assert_eq!((host(&kept), norm), (host(&grads), 5.0));
}

#[test]
fn ema_follows_its_recurrence() {
    let device = Default::default();
    let t = |v: f32| Tensor::<Inner, 1>::from_data(TensorData::new(vec![v], [1]), &device);
    let mut ema = Ema::new(0.9, false, [("w".to_string(), t(1.0))].into());
    ema.update(&[("w".to_string(), t(2.0))].into(), 1);
    ema.update(&[("w".to_string(), t(4.0))].into(), 2);
    let got = ema.values()["w"].clone().into_scalar();
    assert!((got - (0.9 * (0.9 * 1.0 + 0.1 * 2.0) + 0.1 * 4.0)).abs() < 1e-6, "{got}");
}

#[test]
fn bad_configurations_are_refused_before_training() {
    let plain = DitConfig::tiny().with_text_len(8).init::<B>(&Default::default());
    let err = Trainer::new(config(), plain, vec![Default::default()], 2).err().unwrap().to_string();
    assert!(err.contains("roles"), "{err}");
    let err = Trainer::new(config().with_batch(3), tiny_model(), vec![Default::default(); 2], 2).err().unwrap().to_string();
    assert!(err.contains("batch 3"), "{err}");
}

#[test]
fn gradients_are_the_mean_over_clips_whatever_the_layout() {
    use super::parallel::{Job, Layout, run};
    let model = super::params::set_trainable(tiny_model(), |p| Trainable::Lora.contains(p));
    let data = clips(2);
    let job = |i: usize| Job { clip: data.0[i].clone(), rng: TrainRng::new(3).fork(i as u64) };
    let trainable = params(&model.valid(), |p| Trainable::Lora.contains(p));
    let layout = Layout { params: trainable.iter().map(|(k, v)| (k.clone(), v.dims()[0])).collect(), batch: 2 };
    let grads = |devices: usize, shares: Vec<Vec<Vec<Job>>>| {
        let (g, losses) =
            run(&model, &config(), &vec![Default::default(); devices], &Nodes::default(), &layout, 0, &objective(), shares, 0.5).unwrap();
        assert_eq!(losses.len(), 2);
        host(&g)
    };
    let batch = grads(1, vec![vec![vec![job(0), job(1)]]]);
    let accumulated = grads(1, vec![vec![vec![job(0)], vec![job(1)]]]);
    let parallel = grads(2, vec![vec![vec![job(0)]], vec![vec![job(1)]]]);
    // Reference: each clip's own gradient (scale 1), averaged on the host.
    let single = |i: usize| grads_of_one(&model, job(i));
    let (g0, g1) = (single(0), single(1));
    let mean: BTreeMap<String, Vec<f32>> =
        g0.iter().map(|(k, a)| (k.clone(), a.iter().zip(&g1[k]).map(|(a, b)| (a + b) / 2.0).collect())).collect();
    let scale = mean.values().flatten().fold(0f32, |m, x| m.max(x.abs()));
    assert!(scale > 1e-3, "non-trivial gradients");
    for (name, g) in [("batch 2", &batch), ("accumulation 2 × 1", &accumulated), ("2 devices × 1", &parallel)] {
        assert!(max_diff(g, &mean) <= 1e-5 * scale, "{name}: {} (scale {scale})", max_diff(g, &mean));
    }
}

fn grads_of_one(model: &WanDit<B>, mut job: super::parallel::Job) -> BTreeMap<String, Vec<f32>> {
    use crate::objective::Objective;
    let loss = objective().loss(model, &job.clip, &mut job.rng).unwrap();
    host(&super::params::gradients(model, &loss.total.backward()))
}

#[test]
fn a_failed_step_changes_nothing() {
    use crate::data::ClipSource;
    /// Clips whose index `bad` cannot be read (a missing shard, say).
    struct Broken(InMemoryClips, usize);
    impl ClipSource for Broken {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn get(&self, index: usize) -> crate::Result<LatentClip> {
            if index == self.1 {
                return Err(crate::TrainError::Data { path: "shard-00001.safetensors".into(), message: "missing".into() });
            }
            self.0.get(index)
        }
    }
    let model = tiny_model();
    let mut reference = Trainer::new(config(), model.clone(), vec![Default::default()], 2).unwrap();
    reference.step(&objective(), &clips(2)).unwrap();
    let mut trainer = Trainer::new(config(), model, vec![Default::default()], 2).unwrap();
    let before = host(&trainer.trainable_values());
    let err = trainer.step(&objective(), &Broken(clips(2), 1)).unwrap_err().to_string();
    assert!(err.contains("shard-00001"), "{err}");
    assert_eq!((trainer.step_count(), host(&trainer.trainable_values())), (0, before));
    // The data, random stream and optimizer carry on as if the failure had not happened.
    trainer.step(&objective(), &clips(2)).unwrap();
    assert_eq!(host(&trainer.trainable_values()), host(&reference.trainable_values()));
}

#[test]
fn the_exported_ema_warms_up_over_the_first_steps() {
    // With the paper's decay 0.999 and no warm-up, three steps leave the EMA 99.7 % at the start
    // weights. The warm-up decay of update t (0-based) is min(0.999, (1 + t) / (10 + t)):
    // 0.1, 0.18̅, 0.25, so the export already sits near the trained weights.
    let data = clips(4);
    let mut trainer = Trainer::new(config().with_ema_decay(0.999), tiny_model(), vec![Default::default()], 4).unwrap();
    let mut weights = vec![host(&trainer.trainable_values())];
    for _ in 0..3 {
        trainer.step(&objective(), &data).unwrap();
        weights.push(host(&trainer.trainable_values()));
    }
    let mut want = weights[0].clone();
    for (t, theta) in weights[1..].iter().enumerate() {
        let d = 0.999f64.min((1.0 + t as f64) / (10.0 + t as f64));
        for (k, e) in &mut want {
            e.iter_mut().zip(&theta[k]).for_each(|(e, x)| *e = (d * *e as f64 + (1.0 - d) * *x as f64) as f32);
        }
    }
    let (ema, exported) = (host(trainer.ema_values()), host(&params(&trainer.ema_model(), |p| Trainable::Lora.contains(p))));
    assert!(max_diff(&ema, &want) < 1e-6, "EMA against the hand recurrence: {}", max_diff(&ema, &want));
    assert_eq!(exported, ema, "the export is the EMA");
    let (from_start, moved) = (max_diff(&ema, &weights[0]), max_diff(&weights[3], &weights[0]));
    assert!(from_start > 0.5 * moved, "the EMA moved {from_start}, the weights {moved}");
}
