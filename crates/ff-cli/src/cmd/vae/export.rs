//! Exporting a trained codec as a diffusers VAE folder (`config.json` +
//! `diffusion_pytorch_model.safetensors`), the layout `generate --vae` and `encode-videos` read.
//!
//! The latent statistics are measured with the exported weights: the per-channel mean and
//! standard deviation of the latent means of `stats_clips` clips of 17 frames (5 latents) from
//! scene seeds `2^41 + i`, a range no training run (seeds `first_seed + i` for `i < clips`, 0 and
//! 10⁶ by default) and no `vae eval` (seeds from `2^40`) uses. Normalised by them, latents have
//! zero mean and unit variance per channel, the scale the DiT's noise schedule assumes. A run
//! that trained only the decoder (`trainable = "decoder"`) keeps the statistics of the codec it
//! started from: its encoder, and so its latent space, did not move.
//!
//! Weights are written as f32, or as f16 with `--half` (half the size, for the shipped model).
//!
//! The folder is written as `.NAME.tmp` beside it and renamed into place, so a reader sees the
//! old folder or the new one.

use crate::backend::{CpuBackend, cpu_device};
use anyhow::{Context, Result, bail};
use ff_model::AttentionBackend;
use ff_model::io::write_atomic;
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::checkpoint::{Stored, latest, load_module_ema, read_module_state, write_tensors_as};
use ff_train::data::ClipSource;
use ff_train::engine::Trainable;
use ff_train::vae::{WorldClips, WorldClipsConfig};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The folder a finished `train vae` run exports to, inside the run directory.
pub const EXPORT_DIR: &str = "vae";
/// Scene seed of the first clip the latent statistics are measured on.
pub const STATS_FIRST_SEED: u64 = 1 << 41;
pub const CONFIG_FILE: &str = "config.json";
pub const WEIGHTS_FILE: &str = "diffusion_pytorch_model.safetensors";

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

/// Per-channel mean and standard deviation of the latent means of `clips` held-out clips.
pub fn latent_stats<B: AttentionBackend>(vae: &WanVae<B>, clips: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let data = WorldClips::new(WorldClipsConfig::new().with_frames(17).with_first_seed(STATS_FIRST_SEED).with_clips(clips.max(1)))?;
    let device = vae.quant_conv.bias.val().device();
    let z = vae.config().z_dim;
    let (mut sum, mut squares, mut count) = (vec![0f64; z], vec![0f64; z], 0usize);
    for i in 0..data.len() {
        let mean = vae.encode_mean(data.get(i)?.tensor::<B>(&device))?;
        let per_channel = mean.dims()[2] * mean.dims()[3] * mean.dims()[4];
        let values = mean.into_data().convert::<f32>().into_vec::<f32>().map_err(|e| anyhow::anyhow!("{e:?}"))?;
        for (c, chunk) in values.chunks(per_channel).enumerate() {
            sum[c % z] += chunk.iter().map(|v| f64::from(*v)).sum::<f64>();
            squares[c % z] += chunk.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>();
        }
        count += per_channel;
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / count as f64).collect();
    let std = squares.iter().zip(&mean).map(|(q, m)| (q / count as f64 - m * m).max(1e-12).sqrt()).collect();
    Ok((mean, std))
}

/// Where an exported codec's latent statistics come from.
#[derive(Clone, Copy, Debug)]
pub enum LatentStats {
    /// Measured with the exported weights on this many held-out clips ([`latent_stats`]).
    Measure(usize),
    /// The codec's own (a run that froze the encoder keeps the latent space it started from,
    /// in which a DiT may have been trained).
    Keep,
}

/// Writes `vae` with its latent statistics and its weights stored as `stored` to the folder
/// `out` (replacing it) and returns the config written.
pub fn export<B: AttentionBackend>(vae: &WanVae<B>, stats: LatentStats, stored: Stored, out: &Path) -> Result<WanVaeConfig> {
    let (latents_mean, latents_std) = match stats {
        LatentStats::Measure(clips) => latent_stats(vae, clips)?,
        LatentStats::Keep => (vae.config().latents_mean.clone(), vae.config().latents_std.clone()),
    };
    let config = WanVaeConfig { latents_mean, latents_std, ..vae.config().clone() };
    config.validate()?;
    let name = out.file_name().and_then(|n| n.to_str()).with_context(|| format!("{}: not a folder name", out.display()))?;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let (tmp, old) = (parent.join(format!(".{name}.tmp")), parent.join(format!(".{name}.old")));
    for dir in [&tmp, &old] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
    }
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let json = serde_json::to_string_pretty(&config.to_diffusers_json())?;
    write_atomic(&tmp.join(CONFIG_FILE), |w| w.write_all(json.as_bytes()))?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    write_tensors_as(&tmp.join(WEIGHTS_FILE), vae.diffusers_tensors()?, metadata, stored)?;
    if out.exists() {
        std::fs::rename(out, &old).with_context(|| format!("cannot move {} aside", out.display()))?;
    }
    std::fs::rename(&tmp, out).with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).with_context(|| format!("cannot remove {}", old.display()))?;
    }
    Ok(config)
}
