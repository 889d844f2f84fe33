//! `flashforward vae eval --vae DIR [--clips N] [--seconds S] [--chunk C] [--two-objects P]
//! [--latent-noise σ --noise-seed S] [--json]`: the
//! reconstruction PSNR of a VAE folder on held-out clips of the small world: `N` clips of `S`
//! seconds from t = 0 of the scenes of seeds `2^40 + i` (no training run uses them: training
//! seeds are `first_seed + i` for `i < clips`, 0 and 10⁶ by default), decoded whole and streaming
//! (`C` latents at a time), on 8-bit frames, and the fraction of frames whose decode keeps the
//! clip's objects (`ff_train::vae::Reconstruction::objects_kept`) and of clips whose decode keeps
//! the identity that `flashforward eval` reads (`identity_kept`: the colour and shape accuracy a
//! generator in this latent space can reach at best), and the codec's seam: the frame-to-frame jump
//! where two latents meet over the mean jump (`boundary_ratio`; the original clip's beside it).
//! Prints a table, or one JSON object with `--json`.

use crate::backend::{CpuBackend, cpu_device};
use anyhow::{Context, Result};
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::TrainRng;
use ff_train::data::ClipSource;
use ff_train::vae::{WorldClips, WorldClipsConfig, reconstruct};
use ff_world::render::frames_for_seconds;
use std::path::PathBuf;
use std::process::ExitCode;

/// Scene seed of the first held-out clip.
pub const EVAL_FIRST_SEED: u64 = 1 << 40;

#[derive(clap::Args)]
pub struct Args {
    /// VAE folder (`config.json` + `diffusion_pytorch_model.safetensors`).
    #[arg(long)]
    vae: PathBuf,
    /// Held-out clips.
    #[arg(long, default_value_t = 8)]
    clips: usize,
    /// Seconds per clip (16·s + 1 frames).
    #[arg(long, default_value_t = 5)]
    seconds: usize,
    /// Latent frames per streaming-decode chunk.
    #[arg(long, default_value_t = 3)]
    chunk: usize,
    /// Scene seed of the first clip.
    #[arg(long, default_value_t = EVAL_FIRST_SEED)]
    first_seed: u64,
    /// Probability of a second object per clip (the codec trains on 0.5).
    #[arg(long, default_value_t = 0.5)]
    two_objects: f64,
    /// Noise σ added to the latents before decoding, in units of the codec's `latents_std` (the
    /// scale a DiT samples in): how much of the objects the decoder keeps from imperfect latents.
    #[arg(long, default_value_t = 0.0)]
    latent_noise: f64,
    /// Seed of the latent noise.
    #[arg(long, default_value_t = 0)]
    noise_seed: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let config = WanVaeConfig::from_json(args.vae.join(ff_train::vae::export::CONFIG_FILE))?;
    let weights = args.vae.join(ff_train::vae::export::WEIGHTS_FILE);
    let vae = WanVae::<CpuBackend>::load(&weights, &config, &cpu_device()).with_context(|| format!("cannot load {}", weights.display()))?;
    let clips = WorldClipsConfig::new()
        .with_frames(frames_for_seconds(args.seconds))
        .with_first_seed(args.first_seed)
        .with_clips(args.clips)
        .with_max_start_seconds(0)
        .with_two_objects(args.two_objects);
    let data = WorldClips::new(clips)?;
    anyhow::ensure!(
        args.latent_noise.is_finite() && args.latent_noise >= 0.0,
        "--latent-noise {} must be finite and ≥ 0",
        args.latent_noise
    );
    let mut rng = TrainRng::new(args.noise_seed);
    let mut rows = Vec::new();
    if !args.json {
        println!(
            "{:>20} {:>8} {:>10} {:>12} {:>16} {:>13} {:>9} {:>15}",
            "seed", "latents", "PSNR dB", "stream dB", "stream−full max", "objects kept", "identity", "boundary ratio"
        );
    }
    for i in 0..data.len() {
        let r = reconstruct(&vae, &data.get(i)?, args.chunk, args.latent_noise, &mut rng)?;
        if !args.json {
            println!(
                "{:>20} {:>8} {:>10.2} {:>12.2} {:>16} {:>13.3} {:>9} {:>8.2} ({:.2})",
                data.seed(i),
                r.latents,
                r.psnr,
                r.stream_psnr,
                r.stream_max_diff,
                r.objects_kept,
                if r.identity_kept { "kept" } else { "lost" },
                r.boundary_ratio,
                r.source_boundary_ratio
            );
        }
        rows.push(serde_json::json!({
            "seed": data.seed(i), "latents": r.latents, "psnr": r.psnr, "stream_psnr": r.stream_psnr, "stream_max_diff": r.stream_max_diff,
            "objects_kept": r.objects_kept, "identity_kept": r.identity_kept,
            "boundary_ratio": r.boundary_ratio, "source_boundary_ratio": r.source_boundary_ratio,
        }));
    }
    let mean = |key: &str| rows.iter().filter_map(|r| r[key].as_f64()).sum::<f64>() / rows.len().max(1) as f64;
    let (psnr, stream, kept, ratio) = (mean("psnr"), mean("stream_psnr"), mean("objects_kept"), mean("boundary_ratio"));
    let identity = rows.iter().filter(|r| r["identity_kept"] == true).count() as f64 / rows.len().max(1) as f64;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "psnr": psnr, "stream_psnr": stream, "objects_kept": kept, "identity_kept": identity, "boundary_ratio": ratio, "clips": rows.len(), "seconds": args.seconds, "latent_noise": args.latent_noise, "per_clip": rows,
            })
        );
    } else {
        println!(
            "mean over {} clips of {} s (latent noise σ {}): PSNR {psnr:.2} dB, streaming {stream:.2} dB, objects kept in {:.1} % of frames, \
             identity kept in {:.1} % of clips, latent boundary / all jumps {ratio:.2} (original {:.2})",
            rows.len(),
            args.seconds,
            args.latent_noise,
            100.0 * kept,
            100.0 * identity,
            mean("source_boundary_ratio")
        );
    }
    Ok(ExitCode::SUCCESS)
}
