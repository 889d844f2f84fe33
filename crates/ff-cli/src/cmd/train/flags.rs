//! The flags every `train` subcommand takes, and how they apply over the run's config
//! (`ff_train::runner::RunConfig`: the TOML file's keys over the defaults, the flags over both).

use crate::backend::Precision;
use anyhow::{Result, anyhow};
use ff_train::TrainError;
use ff_train::engine::{Nodes, Precision as TrainPrecision};
use ff_train::runner::{CONFIG_FILE, RunConfig};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::time::Duration;

/// The flags every `train` subcommand takes (each overrides its config key).
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// Run directory: checkpoints (`step-NNNNNN/`), metrics.jsonl, loss.svg, config.toml, and what
    /// the phase exports when it finishes.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Optimizer steps of the whole run (`train.steps`).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Seed of the run's weights, data order and noise (`train.seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// TOML config: top-level paths and devices, `[train]` and the phase's section.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// `cpu`, `cuda:0,1,..` or `wgpu:0,..`: one data-parallel worker per device.
    #[arg(long)]
    pub devices: Option<String>,
    /// Processes (nodes) of a data-parallel run, each started with the same flags (and the same
    /// number of devices) but its own --node-rank; the batch divides over all their devices.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: u32,
    /// This process's node, 0..nodes. Node 0 starts the coordinator and writes the run's files
    /// (checkpoints, metrics, exports); the others only log.
    #[arg(long, default_value_t = 0)]
    pub node_rank: u32,
    /// HOST:PORT of node 0's coordinator (with --nodes > 1). Node r also listens on PORT + 1 + r.
    #[arg(long)]
    pub coordinator: Option<String>,
    /// The dtype of the steps' forward and backward (`train.precision`): `bf16` runs the DiT's
    /// token path in bf16 over f32 master weights (optimizer state, EMA and checkpoints stay f32).
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
    /// Seconds a node waits for the others in a step's all-reduce before it stops with an error
    /// (a node that died or hangs); longer than the slowest node's step.
    #[arg(long, default_value_t = 600)]
    pub collective_timeout: u64,
}

impl RunFlags {
    /// Where this process stands among the run's nodes (--nodes, --node-rank, --coordinator).
    pub fn nodes(&self) -> Result<Nodes> {
        let nodes = Nodes {
            count: self.nodes as usize,
            rank: self.node_rank as usize,
            coordinator: self.coordinator.clone(),
            timeout: Duration::from_secs(self.collective_timeout),
        };
        nodes.validate().map_err(|e| anyhow!("--nodes {} --node-rank {}: {e}", self.nodes, self.node_rank))?;
        Ok(nodes)
    }
}

/// `config` overlaid with `--config` (on `--resume` without it: the run's saved config), then
/// with the flags that are given: the shared ones and the phase's `model_dir` / `data`.
pub fn apply<O: Serialize + DeserializeOwned>(
    config: RunConfig<O>,
    flags: &RunFlags,
    model_dir: &Option<PathBuf>,
    data: &Option<PathBuf>,
) -> Result<RunConfig<O>> {
    let saved = flags.out.as_ref().map(|o| o.join(CONFIG_FILE)).filter(|p| flags.resume && p.is_file());
    let mut config = match flags.config.as_ref().or(saved.as_ref()) {
        Some(file) => config.overlay_file(file)?,
        None => config,
    };
    let paths = &mut config.paths;
    for (key, value) in [(&mut paths.model_dir, model_dir), (&mut paths.data, data), (&mut paths.out, &flags.out)] {
        if value.is_some() {
            key.clone_from(value);
        }
    }
    if let Some(devices) = &flags.devices {
        paths.devices.clone_from(devices);
    }
    config.train.steps = flags.steps.unwrap_or(config.train.steps);
    config.train.seed = flags.seed.unwrap_or(config.train.seed);
    if let Some(precision) = flags.precision {
        config.train.precision = match precision {
            Precision::F32 => TrainPrecision::F32,
            Precision::Bf16 => TrainPrecision::Bf16,
        };
    }
    Ok(config)
}

/// The runner's error in the flags' words: a path the config does not set and the resume
/// checks name the flag that sets them.
pub fn in_flag_terms(e: TrainError) -> anyhow::Error {
    match e {
        TrainError::Unset { key: "out" } => anyhow!("no run directory: pass --out RUN or set `out` in the config"),
        TrainError::Unset { key: "data" } => anyhow!("no data: pass --data DATA or set `data` in the config"),
        TrainError::Unset { key: "model_dir" } => anyhow!("no model: pass --model-dir DIR or set `model_dir` in the config"),
        TrainError::NothingToResume { run } => anyhow!("--resume: {} holds no checkpoint", run.display()),
        TrainError::RunExists { run, checkpoint } => anyhow!(
            "{} already holds a run (checkpoint {}): pass --resume to continue it, or choose another --out",
            run.display(),
            checkpoint.display()
        ),
        other => other.into(),
    }
}
