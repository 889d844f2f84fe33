//! `flashforward vae export --run RUN --out DIR [--stats-clips N] [--encoder DIR] [--half]`: a
//! `train vae` run's EMA weights as a diffusers VAE folder with its latent statistics
//! (`ff_train::vae::export`: measured on held-out clips, or kept from `--encoder` for a run that
//! trained only the decoder). Weights are written as f32, or as f16 with `--half` (half the size,
//! for the shipped model).

use crate::backend::{CpuBackend, cpu_device};
use anyhow::{Context, Result, bail};
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::checkpoint::{Stored, latest, load_module_ema, read_module_state};
use ff_train::engine::Trainable;
use ff_train::vae::export::{CONFIG_FILE, LatentStats, WEIGHTS_FILE, export};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A `train vae` run directory (its newest checkpoint) or one checkpoint folder.
    #[arg(long)]
    run: PathBuf,
    /// Output folder (replaced).
    #[arg(long)]
    out: PathBuf,
    /// Held-out clips the latent mean/std are measured on.
    #[arg(long, default_value_t = 32)]
    stats_clips: usize,
    /// For a run that trained only the decoder (`trainable = "decoder"`): the codec folder whose
    /// encoder side (encoder, `quant_conv`, latent statistics) it trained against, the run's
    /// `--model-dir`. Its latent statistics are exported unchanged.
    #[arg(long)]
    encoder: Option<PathBuf>,
    /// Store the weights as f16 (half the size; loaders read them as f32).
    #[arg(long)]
    half: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let dir = match latest(&args.run)? {
        Some(dir) => dir,
        None if args.run.join("state.json").is_file() => args.run.clone(),
        None => bail!("{} holds no checkpoint of a `train vae` run", args.run.display()),
    };
    let state = read_module_state(&dir)?;
    let config: WanVaeConfig =
        serde_json::from_value(state.model).with_context(|| format!("{}: the run's model is not a Wan VAE config", dir.display()))?;
    let (start, stats) = match (state.train.trainable, &args.encoder) {
        (Trainable::Decoder, Some(encoder)) => (encoder_side(encoder, &config)?, LatentStats::Keep),
        (Trainable::Decoder, None) => {
            bail!("{}: the run trained only the decoder; pass --encoder DIR, the codec it started from", dir.display())
        }
        (_, Some(_)) => bail!("--encoder is for runs that trained only the decoder; {} trained {:?}", dir.display(), state.train.trainable),
        (_, None) => (config.init::<CpuBackend>(&cpu_device()), LatentStats::Measure(args.stats_clips)),
    };
    let vae = load_module_ema(start, &dir)?;
    let stored = if args.half { Stored::F16 } else { Stored::F32 };
    let exported = export(&vae, stats, stored, &args.out)?;
    eprintln!("step {}: latents_mean {:?}\nlatents_std {:?}", state.step, exported.latents_mean, exported.latents_std);
    println!("{}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// The codec in `dir` with a new decoder of `config`'s width, checked to be `config` (the run's
/// codec, latent statistics included), for the run's decoder weights to be loaded into.
fn encoder_side(dir: &Path, config: &WanVaeConfig) -> Result<WanVae<CpuBackend>> {
    let found = WanVaeConfig::from_json(dir.join(CONFIG_FILE))?;
    let weights = dir.join(WEIGHTS_FILE);
    let vae = WanVae::<CpuBackend>::load(&weights, &found, &cpu_device())
        .with_context(|| format!("cannot load {}", weights.display()))?
        .with_new_decoder(config.decoder_width(), &cpu_device());
    if vae.config() != config {
        bail!("{} is not the codec the run started from:\n  {:?}\n  {config:?}", dir.display(), vae.config());
    }
    Ok(vae)
}
