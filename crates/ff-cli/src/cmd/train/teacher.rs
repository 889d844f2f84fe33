//! `flashforward train teacher --model-dir DIR --data DATA --out RUN --steps N --seed S
//! [--config FILE] [--resume]`: the small world's teacher. A bidirectional DiT of the `[teacher]`
//! preset (`tiny-world`) starts from random weights (or from `[teacher] init`, an exported
//! teacher, to continue an earlier run whose checkpoints are gone, deepened when `[teacher]
//! layers` asks for more blocks), every parameter trains, with plain flow
//! matching on whole clips and text dropout (`ff_train::teacher`); DIR is the small world's model
//! directory, whose text encoder gives the empty-prompt embedding. Conventions as `train sft`
//! (flags override the config file; `--resume`; progress, metrics.jsonl, loss.svg, Ctrl-C).
//!
//! At the end the EMA weights are exported to `RUN/transformer/{config.json,
//! diffusion_pytorch_model.safetensors}`, the layout `generate --model-dir` reads (copy the folder
//! into the model directory).

use super::flags::{RunFlags, apply, in_flag_terms};
use super::run::{finish, prepare, train};
use crate::backend::{CpuBackend, cpu_device};
use crate::world_dir::WorldDir;
use anyhow::{Context, Result, bail};
use ff_model::DitConfig;
use ff_train::TrainError;
use ff_train::engine::{TrainConfig, Trainable};
use ff_train::runner::export::export_teacher;
use ff_train::runner::{Outcome, RunConfig, Start};
use ff_train::teacher::{TeacherConfig, TeacherObjective};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The config section of the objective.
const SECTION: &str = "teacher";
/// The weights file of an exported teacher folder.
const WEIGHTS: &str = "diffusion_pytorch_model.safetensors";

/// The engine's defaults for a small model trained from scratch on a CPU (the paper's are for
/// LoRA fine-tuning of 1.3B): every parameter, AdamW with momentum, LR 5e-4 after 100 warm-up steps,
/// batch 8 in one batched forward per device (`micro_batch = 0`), EMA 0.995, a checkpoint every 100 steps.
fn default_train() -> TrainConfig {
    TrainConfig::new()
        .with_trainable(Trainable::All)
        .with_steps(3000)
        .with_lr(5e-4)
        .with_warmup_steps(100)
        .with_beta_1(0.9)
        .with_batch(8)
        .with_micro_batch(0)
        .with_ema_decay(0.995)
        .with_checkpoint_every(100)
}

#[derive(clap::Args)]
pub struct Args {
    /// Small-world model directory: its text encoder and tokenizer give the empty prompt.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Latent-clip dataset written by `world latents` (or `encode-videos`).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Exported teacher folder the run starts from (`[teacher] init`).
    #[arg(long)]
    init: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = RunConfig::defaults(SECTION, TeacherConfig::new());
    config.train = default_train();
    let mut config = apply(config, &args.run, &args.model_dir, &args.data)?;
    if let Some(init) = &args.init {
        config.objective.init = Some(init.display().to_string());
    }
    let dit = config.objective.dit_config().context("[teacher]")?;
    let model_dir = config.paths.model_dir.clone().ok_or_else(|| in_flag_terms(TrainError::Unset { key: "model_dir" }))?;
    let text = WorldDir(model_dir).text(dit.text_len)?;
    let empty = text.embed::<CpuBackend>(&[""], None, &cpu_device())?.remove(0).data;
    let objective = TeacherObjective::new(&config.objective, empty).context("[teacher]")?;
    let start = match &config.objective.init {
        Some(dir) => {
            let (weights, config) = (Path::new(dir).join(WEIGHTS), Path::new(dir).join("config.json"));
            if !weights.is_file() || !config.is_file() {
                bail!("[teacher] init = {dir:?}: expected an exported teacher folder with config.json and {WEIGHTS}");
            }
            Start::Grown { weights, from: DitConfig::from_json(&config)?, config: dit.clone() }
        }
        None => Start::Fresh(dit.clone()),
    };
    let (session, devices) = prepare(config, &args.run, Some(start))?;
    let outcome = train(&session, &objective, &devices)?;
    let code = finish(&outcome);
    // Node 0 exports; the other nodes of a multi-node run only trained beside it.
    if let Outcome::Finished { .. } = outcome
        && session.nodes.writes()
    {
        let dir = export_teacher::<CpuBackend>(&dit, &session.run, &cpu_device())?;
        println!("{}", dir.display());
    }
    Ok(code)
}
