//! A training session: everything cheap is checked and prepared before a backend starts (the
//! run directory and its resume point, the engine's config against the workers, the dataset, the
//! effective config saved as `RUN/config.toml`); [`train`] then runs it on a backend: the start
//! DiT with fresh roles (or the run's newest checkpoint), one optimizer step after another
//! through [`drive`].

use super::config::{CONFIG_FILE, RunConfig};
use super::steps::Engine;
use super::{Outcome, Plan, Progress, drive};
use crate::checkpoint::latest;
use crate::data::{ClipSource, ShardDataset};
use crate::engine::{Nodes, Trainer};
use crate::{Objective, Result, TrainError};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use ff_model::io::write_atomic;
use ff_model::{AttentionBackend, DitConfig, LoraConfig, WanDit};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The DiT a run starts from.
#[derive(Clone, Debug, PartialEq)]
pub enum Start {
    /// Base DiT weights and their config (e.g. a model directory's); the run adds fresh roles and
    /// its checkpoints name the weights instead of storing the frozen backbone.
    Base {
        /// The weights file (or a checkpoint folder's base, as `checkpoint::load_dit` reads).
        weights: PathBuf,
        /// Their config.
        config: DitConfig,
    },
    /// Random weights of this config, no roles (every parameter is in the checkpoints).
    Fresh(DitConfig),
    /// The weights `weights` of config `from`, deepened into `config` by
    /// [`grow`](crate::engine::grow) (`from` itself when equal), no roles.
    Grown {
        /// The weights file.
        weights: PathBuf,
        /// Its config.
        from: DitConfig,
        /// The config trained: `from` with more layers, or `from` itself.
        config: DitConfig,
    },
}

impl Start {
    /// The config of the DiT the run trains.
    pub fn config(&self) -> &DitConfig {
        match self {
            Self::Base { config, .. } | Self::Fresh(config) | Self::Grown { config, .. } => config,
        }
    }

    /// The base weights the checkpoints refer to ([`Start::Base`]).
    pub fn base(&self) -> Option<&Path> {
        match self {
            Self::Base { weights, .. } => Some(weights),
            _ => None,
        }
    }

    /// The DiT on `device` (with roles of `lora` on a base DiT).
    pub fn model<B: AttentionBackend>(&self, lora: &LoraConfig, device: &B::Device) -> Result<WanDit<B>> {
        let _span = tracing::info_span!("load_dit", start = ?self).entered();
        Ok(match self {
            Self::Base { weights, config } => WanDit::<B>::load(config, weights, device)?.with_roles(lora),
            Self::Fresh(config) => config.init::<B>(device),
            Self::Grown { weights, from, config } => crate::engine::grow(WanDit::<B>::load(from, weights, device)?, config)?,
        })
    }
}

/// Everything a training run needs before the backend starts.
pub struct Session<C> {
    /// The run's effective config.
    pub config: RunConfig<C>,
    /// The run directory (`config.paths.out`).
    pub run: PathBuf,
    /// The DiT the run starts from (a resumed run restores its checkpoint over it).
    pub start: Start,
    /// The dataset (`config.paths.data`).
    pub data: ShardDataset,
    /// The checkpoint to resume from.
    pub resume: Option<PathBuf>,
    /// The effective config as saved in `RUN/config.toml`.
    pub effective: String,
    /// Where this process stands among the run's nodes (node 0 writes the run's files).
    pub nodes: Nodes,
}

impl<C: Serialize + DeserializeOwned> Session<C> {
    /// Checks the config (the run directory and dataset set, the engine's keys valid for
    /// `devices` data-parallel workers on each of the `nodes`) and the run directory (a checkpoint
    /// to `resume` from, or none for a new run), opens the dataset and, on node 0, saves the
    /// effective config as `RUN/config.toml`.
    pub fn prepare(config: RunConfig<C>, devices: usize, nodes: Nodes, resume: bool, start: Start) -> Result<Self> {
        let run = config.paths.out.clone().ok_or(TrainError::Unset { key: "out" })?;
        let data = config.paths.data.clone().ok_or(TrainError::Unset { key: "data" })?;
        config.train.validate()?;
        nodes.validate()?;
        config.train.accumulation(config.train.workers(devices)? * nodes.count)?;
        let resume = resume_checkpoint(&run, resume)?;
        let data = ShardDataset::open(&data)?;
        let effective = match nodes.writes() {
            true => save_effective_config(&config, &run)?,
            false => config.to_toml()?,
        };
        Ok(Self { config, run, start, data, resume, effective, nodes })
    }
}

impl<C> Session<C> {
    /// The loop's plan: the run directory, `[train] steps` and `checkpoint_every`, the resume point.
    pub fn plan(&self) -> Plan<'_> {
        let train = &self.config.train;
        let (run, resume, writes) = (&self.run, self.resume.as_deref(), self.nodes.writes());
        Plan { run, steps: train.steps, checkpoint_every: train.checkpoint_every, resume, writes }
    }
}

/// The checkpoint a run continues from: the newest of `run` when resuming (an error when there
/// is none), none for a new run (an error when `run` already holds one).
pub fn resume_checkpoint(run: &Path, resume: bool) -> Result<Option<PathBuf>> {
    match (resume, latest(run)?) {
        (true, Some(dir)) => Ok(Some(dir)),
        (true, None) => Err(TrainError::NothingToResume { run: run.to_path_buf() }),
        (false, Some(checkpoint)) => Err(TrainError::RunExists { run: run.to_path_buf(), checkpoint }),
        (false, None) => Ok(None),
    }
}

/// Saves the effective config as `RUN/config.toml` (creating `run`); returns its text.
pub fn save_effective_config<C: Serialize + DeserializeOwned>(config: &RunConfig<C>, run: &Path) -> Result<String> {
    let effective = config.to_toml()?;
    std::fs::create_dir_all(run).map_err(|source| TrainError::Io { path: run.to_path_buf(), source })?;
    write_atomic(&run.join(CONFIG_FILE), |w| w.write_all(effective.as_bytes()))?;
    tracing::info!(run = %run.display(), "effective config saved");
    Ok(effective)
}

/// Trains `session` with `objective` on `devices` (one data-parallel worker each, on this node of
/// `session.nodes`; the trained weights, optimizer state, EMA and checkpoints are f32 whatever
/// `[train] precision` is): the start DiT or the resume checkpoint, then [`drive`] to the end or
/// until `stop` is set.
pub fn train<B, C, O>(
    session: &Session<C>,
    objective: &O,
    devices: Vec<B::Device>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome>
where
    B: AttentionBackend,
    O: Objective<Autodiff<B>> + Sync,
{
    let train = &session.config.train;
    Autodiff::<B>::seed(&devices[0], train.seed);
    let model = session.start.model::<Autodiff<B>>(&train.lora(), &devices[0])?;
    let trainer = Trainer::new(train.clone(), model, devices, session.data.len())?.with_nodes(session.nodes.clone())?;
    let mut engine = Engine { trainer, objective, base: session.start.base() };
    drive(&session.plan(), &session.data, &mut engine, stop, progress)
}
