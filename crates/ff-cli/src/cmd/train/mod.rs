//! `flashforward train`: the training commands. Each phase is a subcommand over the same runner
//! (`ff_train::runner`: config file, loop, checkpoints, resume, metrics, export); this module
//! adds the flags over the config ([`flags`]), the backend, Ctrl-C and the progress bar ([`run`],
//! [`progress`]).

mod combine;
mod dmd;
mod flags;
mod progress;
mod run;
mod sft;
mod teacher;
mod vae;

use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Phase 1: packed time-rebased supervised fine-tuning of the planner and renderer roles.
    Sft(sft::Args),
    /// The small world's codec: a tiny Wan VAE trained on procedural clips (reconstruction + β·KL).
    Vae(vae::Args),
    /// Phase 2: self-rollout DMD distillation of the student against a frozen teacher and a LoRA critic.
    Dmd(dmd::Args),
    /// The small world's teacher: a bidirectional DiT from scratch, flow matching with text dropout.
    Teacher(teacher::Args),
    /// A student with another run's planner (a Phase 1 run's), sampled by guided Euler steps.
    Combine(combine::Args),
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Command::Sft(args) => sft::run(args),
        Command::Vae(args) => vae::run(args),
        Command::Dmd(args) => dmd::run(args),
        Command::Teacher(args) => teacher::run(args),
        Command::Combine(args) => combine::run(args),
    }
}
