//! `flashforward train sft --model-dir DIR --data DATA --out RUN --steps N --seed S
//! [--config FILE] [--resume]`: Phase 1. Flags override the config file's keys; `--resume`
//! continues the run in RUN from its newest checkpoint up to `--steps` in total, with the
//! config saved in `RUN/config.toml` unless `--config` is given.
//!
//! The objective and its config section are chosen in one place, [`objective`]: it reads the
//! `[sft]` section. Until `ff_train::sft::SftObjective` is merged it trains the plain
//! flow-matching objective (`ff_train::flow`) on whole clips; the swap is that function, its
//! config type and default.

use super::config::RunConfig;
use super::run::{AnyBackendObjective, Session, train};
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use ff_model::{AttentionBackend, WanDit};
use ff_train::data::LatentClip;
use ff_train::sft::{SftConfig, SftObjective};
use ff_train::{Loss, Objective, TrainRng};
use std::path::PathBuf;
use std::process::ExitCode;

/// The config section of the objective.
const SECTION: &str = "sft";

/// The objective's config type (deserialised from `[sft]`).
pub type ObjectiveConfig = SftConfig;

fn default_objective_config() -> ObjectiveConfig {
    SftConfig::new()
}

/// The objective `train sft` optimises.
pub fn objective(config: &ObjectiveConfig) -> Result<SftObjective> {
    Ok(SftObjective::new(config.clone())?)
}

impl AnyBackendObjective for SftObjective {
    fn loss<B: AttentionBackend>(
        &self,
        model: &WanDit<Autodiff<B>>,
        clip: &LatentClip,
        rng: &mut TrainRng,
    ) -> ff_train::Result<Loss<Autodiff<B>>> {
        Objective::loss(self, model, clip, rng)
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Model directory in a layout `generate` reads; its DiT initialises the run.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Latent-clip dataset written by `encode-videos`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Run directory: checkpoints (`step-NNNNNN/`), metrics.jsonl, loss.svg, config.toml.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Optimizer steps of the whole run (`train.steps`).
    #[arg(long)]
    steps: Option<usize>,
    /// Seed of data order, noise and fresh adapters (`train.seed`).
    #[arg(long)]
    seed: Option<u64>,
    /// TOML config: top-level paths and devices, `[train]` and `[sft]` sections.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint.
    #[arg(long)]
    resume: bool,
    /// `cpu`, `cuda:0,1,..` or `wgpu:0,..`: one data-parallel worker per device.
    #[arg(long)]
    devices: Option<String>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = RunConfig::defaults(SECTION, default_objective_config());
    let saved = args.out.as_ref().map(|o| o.join(super::run::CONFIG_FILE)).filter(|p| args.resume && p.is_file());
    if let Some(file) = args.config.as_ref().or(saved.as_ref()) {
        config = config.overlay_file(file)?;
    }
    let paths = &mut config.paths;
    for (flag, value) in [(&mut paths.model_dir, &args.model_dir), (&mut paths.data, &args.data), (&mut paths.out, &args.out)] {
        if value.is_some() {
            flag.clone_from(value);
        }
    }
    if let Some(devices) = &args.devices {
        paths.devices.clone_from(devices);
    }
    config.train.steps = args.steps.unwrap_or(config.train.steps);
    config.train.seed = args.seed.unwrap_or(config.train.seed);
    let objective = objective(&config.objective).context("[sft]")?;
    let Some(out) = config.paths.out.clone() else { bail!("no run directory: pass --out RUN or set `out` in the config") };
    Session::prepare(config, out, args.resume, None).and_then(|session| train(session, objective))
}
