//! What the updates change (the generator update the student only, the critic update the
//! critic's adapters only, the teacher nothing), and bit-exact resume.

use super::{clips, empty_prompt, plain_dit, tiny_config, tiny_vae};
use crate::data::test_dir::TestDir;
use crate::dmd::{DmdConfig, DmdShared, DmdTrainer};
use crate::engine::params::params;
use crate::engine::tests::{B, tiny_model};
use crate::engine::{TrainConfig, Trainable};
use burn::module::AutodiffModule;
use burn::tensor::backend::Backend;
use ff_model::{DitConfig, WanDit};
use std::collections::BTreeMap;

type Host = BTreeMap<String, Vec<f32>>;

fn weights<Bk: Backend, M: burn::module::Module<Bk>>(m: &M) -> Host {
    params(m, |_| true).into_iter().map(|(k, v)| (k, v.into_data().to_vec::<f32>().unwrap())).collect()
}

/// Paths whose values differ between `a` and `b`.
fn changed(a: &Host, b: &Host) -> Vec<String> {
    a.iter().filter(|(k, v)| b[*k] != **v).map(|(k, _)| k.clone()).collect()
}

fn train_config() -> TrainConfig {
    DmdConfig::generator_defaults()
        .with_batch(1)
        .with_lr(1e-3)
        .with_epsilon(1e-6)
        .with_lora_rank(4)
        .with_lora_alpha(4.0)
        .with_checkpoint_every(1)
}

/// The models of a run, drawn once: student (roles), critic base, teacher.
struct Models {
    student: WanDit<B>,
    critic: WanDit<B>,
    teacher: WanDit<burn::backend::NdArray>,
}

fn models() -> Models {
    let device = Default::default();
    Models { student: tiny_model(), critic: DitConfig::tiny().with_text_len(8).init(&device), teacher: plain_dit() }
}

fn trainer(m: &Models) -> DmdTrainer<B> {
    trainer_with(m, tiny_config())
}

fn trainer_with(m: &Models, config: DmdConfig) -> DmdTrainer<B> {
    let device = Default::default();
    let shared = DmdShared::new(config, m.teacher.clone(), tiny_vae(), empty_prompt(), None).unwrap();
    DmdTrainer::new(train_config(), m.student.clone(), vec![device], m.critic.clone(), vec![device], shared, 2).unwrap()
}

#[test]
fn each_update_changes_only_its_own_network() {
    let mut t = trainer(&models());
    assert_eq!(t.generator.config().trainable, Trainable::All);
    let data = clips(2);
    let teacher = weights(&t.shared().teacher);
    let (student0, critic0) = (weights(&t.generator.model().valid()), weights(&t.critic.model().valid()));

    let report = t.generator_step(&data, 1).unwrap();
    assert!(report.loss.is_finite() && report.loss > 0.0, "{report:?}");
    let student1 = weights(&t.generator.model().valid());
    let moved = changed(&student0, &student1);
    assert!(moved.iter().any(|p| p.contains(".adapters.0.")), "the planner learns");
    assert!(moved.iter().any(|p| p.contains(".base.")), "the full student trains");
    assert_eq!(changed(&critic0, &weights(&t.critic.model().valid())), Vec::<String>::new(), "the generator update moved the critic");

    let report = t.critic_step(&data, 0).unwrap();
    assert!(report.loss.is_finite() && report.loss > 0.0, "{report:?}");
    let critic1 = weights(&t.critic.model().valid());
    let moved = changed(&critic0, &critic1);
    assert!(!moved.is_empty() && moved.iter().all(|p| p.contains(".adapters.1.")), "critic update moved {moved:?}");
    assert_eq!(changed(&student1, &weights(&t.generator.model().valid())), Vec::<String>::new(), "the critic update moved the student");
    assert_eq!(changed(&teacher, &weights(&t.shared().teacher)), Vec::<String>::new(), "the teacher changed");
}

/// With a critic warm-up of 2 updates: the first step holds them, a resumed run does not repeat
/// them.
#[test]
fn resume_is_bit_exact() {
    let data = clips(2);
    let dir = TestDir::new("dmd-resume");
    let m = models();
    let config = tiny_config().with_critic_warmup(2);
    let mut straight = trainer_with(&m, config.clone());
    let reports: Vec<_> = (0..2).map(|_| straight.step(&data).unwrap()).collect();
    assert_eq!(reports.iter().map(|r| r.critic.len()).collect::<Vec<_>>(), [3, 1], "the warm-up comes once, first");
    let mut first = trainer_with(&m, config.clone());
    let report = first.step(&data).unwrap();
    assert_eq!((report.step, report.critic.len()), (1, 3));
    let saved = first.save(dir.path(), None).unwrap();
    let mut other = trainer(&m);
    let err = other.restore(&saved).unwrap_err().to_string();
    assert!(err.contains("warm-up"), "a checkpoint with a warm-up restored into a run without one: {err}");
    let mut resumed = trainer_with(&m, config);
    resumed.restore(&saved).unwrap();
    resumed.step(&data).unwrap();
    assert_eq!(resumed.step_count(), 2);
    for (name, a, b) in [
        ("generator", weights(&straight.generator.model().valid()), weights(&resumed.generator.model().valid())),
        ("critic", weights(&straight.critic.model().valid()), weights(&resumed.critic.model().valid())),
        ("generator EMA", weights(&straight.generator.ema_model()), weights(&resumed.generator.ema_model())),
    ] {
        assert_eq!(changed(&a, &b), Vec::<String>::new(), "{name} differs after resume");
    }
}

/// With the anchor read detached the planner learns only when the scores see its anchors.
#[test]
fn a_scored_splice_moves_the_planner_through_the_generator_update() {
    let data = clips(2);
    let m = models();
    for (anchor_score, learns) in [(0.0, false), (1.0, true)] {
        let config = tiny_config().with_connect_anchor_read(false).with_anchor_score(anchor_score);
        let mut t = trainer_with(&m, config);
        let before = weights(&t.generator.model().valid());
        t.generator_step(&data, 1).unwrap();
        let moved = changed(&before, &weights(&t.generator.model().valid()));
        assert_eq!(moved.iter().any(|p| p.contains(".adapters.0.")), learns, "anchor_score {anchor_score}: moved {moved:?}");
        assert!(moved.iter().any(|p| p.contains(".adapters.1.")), "anchor_score {anchor_score}: the renderer learns");
    }
    let err = DmdShared::new(tiny_config().with_anchor_score(1.5), m.teacher.clone(), tiny_vae(), empty_prompt(), None).err().unwrap();
    assert!(err.to_string().contains("anchor_score 1.5"), "{err}");
}

/// A frozen planner is not trained: the student's planner adapters stay put even when the
/// scores see the anchors and the read is connected (above, that moves them), while the renderer
/// learns; and the config and the planner must agree.
#[test]
fn a_frozen_planner_gives_the_anchors_and_only_the_renderer_learns() {
    let data = clips(2);
    let m = models();
    let device = Default::default();
    let config = tiny_config().with_planner_steps(2).with_planner_guidance(2.0).with_anchor_score(1.0);
    let shared = DmdShared::new(config.clone(), m.teacher.clone(), tiny_vae(), empty_prompt(), Some(plain_dit())).unwrap();
    let mut t = DmdTrainer::new(train_config(), m.student.clone(), vec![device], m.critic.clone(), vec![device], shared, 2).unwrap();
    let before = weights(&t.generator.model().valid());
    t.generator_step(&data, 1).unwrap();
    let moved = changed(&before, &weights(&t.generator.model().valid()));
    assert!(!moved.iter().any(|p| p.contains(".adapters.0.")), "the student's planner moved: {moved:?}");
    assert!(moved.iter().any(|p| p.contains(".adapters.1.")), "the renderer does not learn: {moved:?}");
    let critic = weights(&t.critic.model().valid());
    t.critic_step(&data, 0).unwrap();
    assert!(!changed(&critic, &weights(&t.critic.model().valid())).is_empty(), "the critic learns on the frozen planner's rollouts");

    let err = |config: DmdConfig, planner: Option<WanDit<burn::backend::NdArray>>| {
        DmdShared::new(config, m.teacher.clone(), tiny_vae(), empty_prompt(), planner).err().unwrap().to_string()
    };
    assert!(err(config, None).contains("planner_steps = 2"));
    assert!(err(tiny_config(), Some(plain_dit())).contains("planner_steps > 0"));
    let with_roles = plain_dit().with_roles(&ff_model::LoraConfig::new(4));
    assert!(err(tiny_config().with_planner_steps(2), Some(with_roles)).contains("plain DiT"));
}
