//! [`DmdTrainer`]: Phase 2's alternating updates over the shared engine: two [`Trainer`]s (the
//! generator: the full student with AdamW and EMA; the critic: its LoRA with AdamW) and the
//! frozen parts in [`DmdShared`].
//!
//! One DMD step = one generator update, then `critic_updates` critic updates (1:5); each update
//! draws its exit stage `k*` from the run's own stream (one draw per update, so every clip and
//! every data-parallel worker of the update uses the same `k*`). Checkpoints: the generator's
//! files at the top of `RUN/step-NNNNNN/` (so `generate --dit RUN` and
//! [`crate::checkpoint::load_dit`] read the trained student), the critic's in `critic/`, and
//! `dmd.json` (the exit stream and the DMD config).

use super::config::DmdConfig;
use super::objective::{CriticObjective, DmdShared, GeneratorObjective};
use crate::checkpoint::{read_state, restore, save_folder, write_trainer};
use crate::data::ClipSource;
use crate::engine::params::{assign, params};
use crate::engine::{StepReport, TrainConfig, Trainer};
use crate::{Result, TrainError, TrainRng};
use burn::module::AutodiffModule;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use ff_model::{AttentionBackend, WanDit};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The DMD state file of a checkpoint.
pub const DMD_FILE: &str = "dmd.json";
/// The critic's folder inside a checkpoint.
pub const CRITIC_DIR: &str = "critic";

#[derive(Serialize, Deserialize)]
struct DmdState {
    rng: TrainRng,
    dmd: DmdConfig,
}

/// What one DMD step did.
#[derive(Clone, Debug, PartialEq)]
pub struct DmdReport {
    /// Generator steps done, this one included.
    pub step: usize,
    /// Exit stage of the generator update.
    pub exit: usize,
    /// The generator update.
    pub generator: StepReport,
    /// The critic updates of this step, in order (the first step's begin with the warm-up).
    pub critic: Vec<StepReport>,
}

impl DmdReport {
    /// Mean critic loss over the step's critic updates.
    pub fn critic_loss(&self) -> f64 {
        self.critic.iter().map(|r| r.loss).sum::<f64>() / self.critic.len().max(1) as f64
    }
}

/// Phase 2's trainer: a generator (the student) and a critic (a plain DiT with its own LoRA),
/// each on the shared engine with its own devices, alternating [`DmdConfig::critic_updates`]
/// critic updates per generator update, over the frozen teacher and VAE.
pub struct DmdTrainer<B: AutodiffBackend + AttentionBackend>
where
    B::InnerBackend: AttentionBackend,
{
    /// The student's engine (the generator updates).
    pub generator: Trainer<B>,
    /// The critic's engine (its LoRA's flow-matching updates).
    pub critic: Trainer<B>,
    shared: DmdShared<B::InnerBackend>,
    rng: TrainRng,
}

/// `model` with every adapter's `A` drawn from `rng` as `N(0, 1/rank)` (LoRA's init, from the
/// run's seed rather than the backend's generator, so a run is reproducible from its config).
fn fresh_adapters<B: AutodiffBackend + AttentionBackend>(model: WanDit<B>, rank: usize, rng: &mut TrainRng) -> WanDit<B> {
    let device = model.device();
    let std = 1.0 / (rank as f64).sqrt();
    let drawn = params(&model, |p| p.contains(".adapters.") && p.ends_with(".a"))
        .into_iter()
        .map(|(k, v)| (k, Tensor::from_data(rng.normal_data(vec![v.dims()[0]]), &device) * std))
        .collect();
    assign(model, drawn)
}

impl<B: AutodiffBackend + AttentionBackend> DmdTrainer<B>
where
    B::InnerBackend: AttentionBackend,
{
    /// `student`: the Phase 1 model with roles, on `devices[0]` (the generator's data-parallel
    /// devices); `critic`: a plain DiT on `critic_devices[0]`, which gets the critic's LoRA;
    /// the frozen teacher and VAE of `shared` live wherever they were loaded.
    pub fn new(
        train: TrainConfig,
        student: WanDit<B>,
        devices: Vec<B::Device>,
        critic: WanDit<B>,
        critic_devices: Vec<B::Device>,
        shared: DmdShared<B::InnerBackend>,
        clips: usize,
    ) -> Result<Self> {
        if student.role_embedding.is_none() {
            return Err(TrainError::Config("dmd: the student needs its roles (a Phase 1 checkpoint, or WanDit::with_roles)".into()));
        }
        if critic.role_embedding.is_some() {
            return Err(TrainError::Config("dmd: the critic must be a plain DiT (it gets its own LoRA)".into()));
        }
        if train.context_parallel != 1 {
            return Err(TrainError::Config(format!(
                "dmd: context_parallel = {} shards Phase 1's packed forwards; Phase 2's rollouts run whole chunks (set it to 1)",
                train.context_parallel
            )));
        }
        let critic_train = shared.config.critic_train(&train);
        let critic = fresh_adapters(critic.with_roles(&critic_train.lora()), critic_train.lora_rank, &mut TrainRng::new(critic_train.seed));
        let rng = TrainRng::new(train.seed).fork(0xD3D);
        Ok(Self {
            generator: Trainer::new(train, student, devices, clips)?,
            critic: Trainer::new(critic_train, critic, critic_devices, clips)?,
            shared,
            rng,
        })
    }

    /// This trainer as node `nodes.rank` of `nodes.count`: the generator's and the critic's
    /// updates are data parallel over every node's devices ([`Trainer::with_nodes`]).
    pub fn with_nodes(self, nodes: crate::engine::Nodes) -> Result<Self> {
        Ok(Self { generator: self.generator.with_nodes(nodes.clone())?, critic: self.critic.with_nodes(nodes)?, ..self })
    }

    /// Phase 2's numbers.
    pub fn config(&self) -> &DmdConfig {
        &self.shared.config
    }

    /// The frozen parts (teacher, VAE, config, contract).
    pub fn shared(&self) -> &DmdShared<B::InnerBackend> {
        &self.shared
    }

    /// Generator steps done.
    pub fn step_count(&self) -> usize {
        self.generator.step_count()
    }

    /// Critic updates done before the first generator update of this run.
    fn warmup(&self) -> usize {
        self.shared.config.critic_warmup
    }

    /// One generator update, then the critic updates, each at its own exit draw; the run's first
    /// step starts with the critic's warm-up updates. A failed step leaves the run unusable for
    /// bit-exact continuation; resume from the last checkpoint.
    pub fn step(&mut self, data: &dyn ClipSource) -> Result<DmdReport> {
        let stages = self.shared.config.stages;
        let mut reports = Vec::with_capacity(self.shared.config.critic_updates);
        if self.step_count() == 0 && self.critic.step_count() == 0 {
            for _ in 0..self.warmup() {
                let exit = self.rng.below(stages);
                reports.push(self.critic_step(data, exit)?);
            }
        }
        let exit = self.rng.below(stages);
        let generator = self.generator_step(data, exit)?;
        for _ in 0..self.shared.config.critic_updates {
            let exit = self.rng.below(stages);
            reports.push(self.critic_step(data, exit)?);
        }
        Ok(DmdReport { step: generator.step, exit, generator, critic: reports })
    }

    /// One generator update exiting at stage `exit`, scored by the current critic.
    pub fn generator_step(&mut self, data: &dyn ClipSource, exit: usize) -> Result<StepReport> {
        let critic = self.critic.model().valid();
        self.generator.step(&GeneratorObjective { shared: &self.shared, critic: &critic, exit }, data)
    }

    /// One critic update on samples of the current student exiting at stage `exit`.
    pub fn critic_step(&mut self, data: &dyn ClipSource, exit: usize) -> Result<StepReport> {
        let student = self.generator.model().valid();
        self.critic.step(&CriticObjective { shared: &self.shared, student: &student, exit }, data)
    }

    /// Saves the run's state into `run/step-NNNNNN/` (see the module docs). `critic_base`: the
    /// DiT file the critic's frozen weights come from.
    pub fn save(&self, run: &Path, critic_base: Option<&Path>) -> Result<PathBuf> {
        let keep = self.generator.config().keep_checkpoints;
        save_folder(run, self.step_count(), keep, |dir| {
            write_trainer(dir, &self.generator, None)?;
            write_trainer(&dir.join(CRITIC_DIR), &self.critic, critic_base)?;
            let state = DmdState { rng: self.rng.clone(), dmd: self.shared.config.clone() };
            let json = serde_json::to_vec_pretty(&state)
                .map_err(|e| TrainError::Checkpoint { path: dir.join(DMD_FILE), message: e.to_string() })?;
            ff_model::io::write_atomic(&dir.join(DMD_FILE), |w| std::io::Write::write_all(w, &json)).map_err(Into::into)
        })
    }

    /// Restores a checkpoint folder written by [`DmdTrainer::save`] into this trainer (built over
    /// the same models and dataset).
    pub fn restore(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join(DMD_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| TrainError::Io { path: path.clone(), source })?;
        let state: DmdState = serde_json::from_str(&text)
            .map_err(|e| TrainError::Checkpoint { path: path.clone(), message: format!("invalid DMD state: {e}") })?;
        let critic = dir.join(CRITIC_DIR);
        let steps = read_state(dir)?.step;
        let warmup = if steps > 0 { self.warmup() } else { 0 };
        if read_state(&critic)?.step != self.shared.config.critic_updates * steps + warmup {
            return Err(TrainError::Checkpoint {
                path: critic,
                message: "critic steps do not match the generator's at this ratio and warm-up".into(),
            });
        }
        restore(&mut self.generator, dir)?;
        restore(&mut self.critic, &critic)?;
        self.rng = state.rng;
        Ok(())
    }
}
