//! `flashforward train sft --model-dir DIR --data DATA --out RUN --steps N --seed S
//! [--config FILE] [--resume]`: Phase 1. Flags override the config file's keys; `--resume`
//! continues the run in RUN from its newest checkpoint up to `--steps` in total, with the
//! config saved in `RUN/config.toml` unless `--config` is given.
//!
//! The objective and its config section are chosen in one place, [`objective`]: it reads the
//! `[sft]` section. Until `ff_train::sft::SftObjective` is merged it trains the plain
//! flow-matching objective (`ff_train::flow`) on whole clips; the swap is that function, its
//! config type and default.

use super::flags::{RunFlags, apply};
use super::run::{finish, prepare, train};
use anyhow::{Context, Result};
use ff_train::runner::RunConfig;
use ff_train::sft::{SftConfig, SftObjective};
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

#[derive(clap::Args)]
pub struct Args {
    /// Model directory in a layout `generate` reads; its DiT initialises the run.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Latent-clip dataset written by `encode-videos`.
    #[arg(long)]
    data: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let config = apply(RunConfig::defaults(SECTION, default_objective_config()), &args.run, &args.model_dir, &args.data)?;
    let objective = objective(&config.objective).context("[sft]")?;
    let (session, devices) = prepare(config, &args.run, None)?;
    Ok(finish(&train(&session, &objective, &devices)?))
}
