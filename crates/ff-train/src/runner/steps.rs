//! [`Steps`]: a run as [`drive`](super::drive) sees it, one optimizer step (of whatever kind)
//! at a time, with its checkpoints; and the runs of this crate's trainers: [`Engine`] (the
//! engine's [`Trainer`] with one [`Objective`]: Phase 1, the teacher), [`DmdSteps`] (Phase 2)
//! and, with the `world` feature, `Codec` (the small world's VAE).
//!
//! [`AnyBackendObjective`] is an objective on every backend at once, for callers that pick the
//! backend at run time (a generic `fn run<B>` cannot bound its objective by `Objective<B>`);
//! [`OnBackend`] turns it back into an [`Objective`].

use crate::checkpoint::{self, restore};
use crate::data::{LatentClip, ShardDataset};
use crate::dmd::DmdTrainer;
use crate::engine::{StepReport, Trainer};
use crate::{Loss, Objective, Result, TrainRng};
use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::{CheckpointStrategy, NoCheckpointing};
use ff_model::{AttentionBackend, WanDit};
use std::path::{Path, PathBuf};

/// A run the training loop drives: one optimizer step at a time over data `D` (latent clips by
/// default; the codec's procedural clips), and its checkpoints.
pub trait Steps<D: ?Sized = ShardDataset> {
    /// Steps done.
    fn done(&self) -> usize;
    /// One optimizer step; its report is logged to the metrics.
    fn step(&mut self, data: &D) -> Result<StepReport>;
    /// Saves a checkpoint into the run directory `run`; returns its folder.
    fn save(&self, run: &Path) -> Result<PathBuf>;
    /// Restores the state of the checkpoint folder `dir` (its step count included).
    fn restore(&mut self, dir: &Path) -> Result<()>;
    /// Ends the run's collective work (a multi-node run's closing barrier); nothing by default.
    fn close(&mut self) {}
}

/// The engine's trainer with one objective; `base`: the base DiT weights its checkpoints name.
/// `C`: the autodiff checkpointing strategy ([`Checkpointing`](crate::engine::Checkpointing)).
pub struct Engine<'a, B: AttentionBackend, O, C: CheckpointStrategy = NoCheckpointing> {
    /// The trainer (model, optimizer, EMA, data position).
    pub trainer: Trainer<Autodiff<B, C>>,
    /// What each step optimises.
    pub objective: &'a O,
    /// The base DiT weights the checkpoints name ([`Start::base`](super::Start::base)).
    pub base: Option<&'a Path>,
}

impl<B: AttentionBackend, O: Objective<Autodiff<B, C>> + Sync, C: CheckpointStrategy> Steps for Engine<'_, B, O, C> {
    fn done(&self) -> usize {
        self.trainer.step_count()
    }
    fn step(&mut self, data: &ShardDataset) -> Result<StepReport> {
        self.trainer.step(self.objective, data)
    }
    fn save(&self, run: &Path) -> Result<PathBuf> {
        checkpoint::save(run, &self.trainer, self.base)
    }
    fn restore(&mut self, dir: &Path) -> Result<()> {
        checkpoint::check_base(dir, self.base)?;
        restore(&mut self.trainer, dir)
    }
    fn close(&mut self) {
        self.trainer.close();
    }
}

/// Phase 2's trainer; `critic_base`: the critic's base weights its checkpoints name.
pub struct DmdSteps<B: AttentionBackend> {
    /// The generator, critic and frozen scores.
    pub trainer: DmdTrainer<Autodiff<B>>,
    /// The critic's base weights.
    pub critic_base: PathBuf,
}

impl<B: AttentionBackend> Steps for DmdSteps<B> {
    fn done(&self) -> usize {
        self.trainer.step_count()
    }

    /// The generator's report with the step's losses as parts: `generator_loss`, `critic_loss`
    /// (mean over the step's critic updates), the critic's gradient norm and the exit stage.
    fn step(&mut self, data: &ShardDataset) -> Result<StepReport> {
        let r = self.trainer.step(data)?;
        let critic_norm = r.critic.iter().map(|c| c.grad_norm).sum::<f64>() / r.critic.len().max(1) as f64;
        let parts = vec![
            ("generator_loss", r.generator.loss),
            ("critic_loss", r.critic_loss()),
            ("critic_grad_norm", critic_norm),
            ("exit", r.exit as f64),
        ];
        Ok(StepReport { parts, ..r.generator })
    }

    fn save(&self, run: &Path) -> Result<PathBuf> {
        self.trainer.save(run, Some(&self.critic_base))
    }

    fn restore(&mut self, dir: &Path) -> Result<()> {
        checkpoint::check_base(&dir.join(crate::dmd::CRITIC_DIR), Some(&self.critic_base))?;
        self.trainer.restore(dir)
    }

    fn close(&mut self) {
        self.trainer.generator.close();
    }
}

/// The small world's codec trainer; `described`: the VAE config its checkpoints record (and
/// are checked against on resume).
#[cfg(feature = "world")]
pub struct Codec<'a, B: AttentionBackend> {
    /// The codec's trainer.
    pub trainer: Trainer<Autodiff<B>, ff_model::vae::WanVae<Autodiff<B>>>,
    /// Reconstruction and KL weights.
    pub objective: &'a crate::vae::VaeObjective,
    /// The VAE config recorded in the checkpoints.
    pub described: serde_json::Value,
}

#[cfg(feature = "world")]
impl<B: AttentionBackend> Steps<crate::vae::WorldClips> for Codec<'_, B> {
    fn done(&self) -> usize {
        self.trainer.step_count()
    }
    fn step(&mut self, data: &crate::vae::WorldClips) -> Result<StepReport> {
        self.trainer.step(self.objective, data)
    }
    fn save(&self, run: &Path) -> Result<PathBuf> {
        checkpoint::save_module(run, &self.trainer, self.described.clone())
    }
    fn restore(&mut self, dir: &Path) -> Result<()> {
        checkpoint::restore_module(&mut self.trainer, dir, &self.described)
    }
}

/// An objective on every backend: the engine trains `Autodiff<B, C>` for the `B` (and the
/// checkpointing strategy `C`) a caller picks at run time.
pub trait AnyBackendObjective: Sync {
    /// [`Objective::loss`] on `Autodiff<B, C>`.
    fn loss<B: AttentionBackend, C: CheckpointStrategy>(
        &self,
        model: &WanDit<Autodiff<B, C>>,
        clip: &LatentClip,
        rng: &mut TrainRng,
    ) -> Result<Loss<Autodiff<B, C>>>;

    /// [`Objective::losses`] on `Autodiff<B, C>`.
    fn losses<B: AttentionBackend, C: CheckpointStrategy>(
        &self,
        model: &WanDit<Autodiff<B, C>>,
        clips: &[&LatentClip],
        rngs: &mut [TrainRng],
    ) -> Result<Vec<Loss<Autodiff<B, C>>>>;
}

/// [`AnyBackendObjective`] for objectives that are an [`Objective`] on every `Autodiff<B>` (Rust
/// cannot state "for every backend" as a bound, hence one impl per type).
macro_rules! any_backend_objective {
    ($($objective:ty),*) => {$(
        impl AnyBackendObjective for $objective {
            fn loss<B: AttentionBackend, C: CheckpointStrategy>(
                &self,
                model: &WanDit<Autodiff<B, C>>,
                clip: &LatentClip,
                rng: &mut TrainRng,
            ) -> Result<Loss<Autodiff<B, C>>> {
                Objective::loss(self, model, clip, rng)
            }

            fn losses<B: AttentionBackend, C: CheckpointStrategy>(
                &self,
                model: &WanDit<Autodiff<B, C>>,
                clips: &[&LatentClip],
                rngs: &mut [TrainRng],
            ) -> Result<Vec<Loss<Autodiff<B, C>>>> {
                Objective::losses(self, model, clips, rngs)
            }
        }
    )*};
}
any_backend_objective!(crate::sft::SftObjective, crate::flow::FlowMatchObjective);
#[cfg(feature = "world")]
any_backend_objective!(crate::teacher::TeacherObjective);

/// An [`AnyBackendObjective`] as the engine's [`Objective`] on one backend.
pub struct OnBackend<'a, O>(pub &'a O);

impl<B: AttentionBackend, C: CheckpointStrategy, O: AnyBackendObjective> Objective<Autodiff<B, C>> for OnBackend<'_, O> {
    fn loss(&self, model: &WanDit<Autodiff<B, C>>, clip: &LatentClip, rng: &mut TrainRng) -> Result<Loss<Autodiff<B, C>>> {
        self.0.loss::<B, C>(model, clip, rng)
    }

    fn losses(&self, model: &WanDit<Autodiff<B, C>>, clips: &[&LatentClip], rngs: &mut [TrainRng]) -> Result<Vec<Loss<Autodiff<B, C>>>> {
        self.0.losses::<B, C>(model, clips, rngs)
    }
}
