//! Text dropout by invariants: a dropped clip's loss does not depend on its prompt and equals the
//! loss of the same clip carrying the empty prompt; a kept clip's does depend on it; the dropped
//! fraction follows `text_dropout`.

use super::*;
use crate::engine::tests::B;
use burn::tensor::TensorData;

fn model() -> WanDit<B> {
    DitConfig::tiny().with_text_len(8).init::<B>(&Default::default())
}

fn clip(prompt_seed: u64) -> LatentClip {
    let latents = TrainRng::new(3).normal_data(vec![16, 2, 4, 4]);
    LatentClip {
        latents,
        prompt: TrainRng::new(prompt_seed).normal_data(vec![5, 24]),
        crops: None,
        caption: format!("prompt {prompt_seed}"),
    }
}

fn objective(text_dropout: f64) -> TeacherObjective {
    let empty = TrainRng::new(99).normal_data(vec![1, 24]);
    TeacherObjective::new(&TeacherConfig::new().with_dit("tiny".into()).with_text_dropout(text_dropout), empty).unwrap()
}

fn loss(objective: &TeacherObjective, model: &WanDit<B>, clip: &LatentClip) -> f32 {
    objective.loss(model, clip, &mut TrainRng::new(7)).unwrap().total.into_scalar()
}

#[test]
fn dropped_clips_see_the_empty_prompt() {
    let model = model();
    let (a, b) = (clip(1), clip(2));
    let always = objective(1.0);
    assert_eq!(loss(&always, &model, &a), loss(&always, &model, &b), "a dropped clip's prompt is never read");
    let empty = LatentClip { prompt: always.empty.clone(), ..a.clone() };
    assert_eq!(loss(&always, &model, &a), loss(&objective(0.0), &model, &empty), "it reads the empty prompt instead");
    let never = objective(0.0);
    assert_ne!(loss(&never, &model, &a), loss(&never, &model, &b), "a kept clip's prompt matters");
}

#[test]
fn the_dropped_fraction_follows_the_config() {
    let mut rng = TrainRng::new(5);
    for (p, range) in [(0.1, 900..=1100), (0.0, 0..=0), (1.0, 10_000..=10_000)] {
        let o = objective(p);
        let dropped = (0..10_000).filter(|_| o.drops(&mut rng)).count();
        assert!(range.contains(&dropped), "{dropped} of 10000 dropped at p = {p}");
    }
}

#[test]
fn bad_keys_are_named() {
    let err = TeacherObjective::new(&TeacherConfig::new().with_text_dropout(1.5), TensorData::zeros::<f32, _>([1, 24])).unwrap_err();
    assert!(err.to_string().contains("text_dropout 1.5"), "{err}");
    let err = TeacherConfig::new().with_dit("huge".into()).dit_config().unwrap_err().to_string();
    assert!(err.contains("dit: unknown preset 'huge'") && err.contains("tiny-world"), "{err}");
    let err = TeacherConfig::new().with_layers(Some(0)).dit_config().unwrap_err().to_string();
    assert!(err.contains("layers must be positive"), "{err}");
}

#[test]
fn layers_override_the_preset_depth_only() {
    let preset = DitConfig::tiny_world();
    assert_eq!(TeacherConfig::new().dit_config().unwrap(), preset);
    let deep = TeacherConfig::new().with_layers(Some(8)).dit_config().unwrap();
    assert_eq!(deep, DitConfig { num_layers: 8, ..preset });
    assert_ne!(preset.num_layers, 8);
}

#[test]
fn a_micro_batch_gives_each_clip_the_loss_it_has_alone() {
    let model = model();
    let o = objective(0.5);
    let clips: Vec<LatentClip> = (1..=6).map(clip).collect();
    let rngs: Vec<TrainRng> = (0..6).map(|i| TrainRng::new(40 + i)).collect();
    let dropped: Vec<bool> = rngs.iter().map(|r| o.drops(&mut r.clone())).collect();
    assert!(dropped.contains(&true) && dropped.contains(&false), "the batch mixes dropped and kept clips: {dropped:?}");
    let alone: Vec<f32> = clips.iter().zip(&rngs).map(|(c, r)| o.loss(&model, c, &mut r.clone()).unwrap().total.into_scalar()).collect();
    let refs: Vec<&LatentClip> = clips.iter().collect();
    let batched: Vec<f32> = o.losses(&model, &refs, &mut rngs.clone()).unwrap().into_iter().map(|l| l.total.into_scalar()).collect();
    for (i, (a, b)) in alone.iter().zip(&batched).enumerate() {
        assert!((a - b).abs() <= 1e-5 * a.abs(), "clip {i}: alone {a}, in the batch {b}");
    }
    let distinct = alone.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(distinct, 5, "each clip has its own noise, σ and prompt: {alone:?}");
}
