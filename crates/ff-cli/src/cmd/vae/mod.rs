//! `flashforward vae`: the small world's codec after training. `export` writes a run's EMA
//! weights as a diffusers VAE folder with measured latent statistics; `eval` reports the
//! reconstruction PSNR (full and streaming decode) of a VAE folder on held-out clips.

pub mod eval;
pub mod export;

use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Write the EMA weights of a `train vae` run's newest checkpoint as `config.json` +
    /// `diffusion_pytorch_model.safetensors`, with latents_mean/std measured on held-out clips.
    Export(export::Args),
    /// Reconstruction PSNR of a VAE folder on held-out clips of the small world.
    Eval(eval::Args),
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Command::Export(args) => export::run(args),
        Command::Eval(args) => eval::run(args),
    }
}
