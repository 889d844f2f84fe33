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
//! The folder is written as `.NAME.tmp` beside it and renamed into place, so a reader sees the
//! old folder or the new one.

use super::{WorldClips, WorldClipsConfig};
use crate::checkpoint::{Stored, write_tensors_as};
use crate::data::ClipSource;
use crate::{Result, TrainError};
use ff_model::AttentionBackend;
use ff_model::io::write_atomic;
use ff_model::vae::{WanVae, WanVaeConfig};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The folder a finished `train vae` run exports to, inside the run directory.
pub const EXPORT_DIR: &str = "vae";
/// Scene seed of the first clip the latent statistics are measured on.
pub const STATS_FIRST_SEED: u64 = 1 << 41;
/// The config file of an exported codec.
pub const CONFIG_FILE: &str = "config.json";
/// The weights file of an exported codec.
pub const WEIGHTS_FILE: &str = "diffusion_pytorch_model.safetensors";

/// Per-channel mean and standard deviation of the latent means of `clips` held-out clips.
pub fn latent_stats<B: AttentionBackend>(vae: &WanVae<B>, clips: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let data = WorldClips::new(WorldClipsConfig::new().with_frames(17).with_first_seed(STATS_FIRST_SEED).with_clips(clips.max(1)))?;
    let device = vae.quant_conv.bias.val().device();
    let z = vae.config().z_dim;
    let (mut sum, mut squares, mut count) = (vec![0f64; z], vec![0f64; z], 0usize);
    for i in 0..data.len() {
        let mean = vae.encode_mean(data.get(i)?.tensor::<B>(&device))?;
        let per_channel = mean.dims()[2] * mean.dims()[3] * mean.dims()[4];
        let values = mean.into_data().convert::<f32>().into_vec::<f32>().map_err(|e| TrainError::Shape(format!("{e:?}")))?;
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
    let _span = tracing::info_span!("export", out = %out.display()).entered();
    let (latents_mean, latents_std) = match stats {
        LatentStats::Measure(clips) => latent_stats(vae, clips)?,
        LatentStats::Keep => (vae.config().latents_mean.clone(), vae.config().latents_std.clone()),
    };
    let config = WanVaeConfig { latents_mean, latents_std, ..vae.config().clone() };
    config.validate()?;
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| TrainError::Checkpoint { path: out.to_path_buf(), message: "not a folder name".into() })?;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let (tmp, old) = (parent.join(format!(".{name}.tmp")), parent.join(format!(".{name}.old")));
    for dir in [&tmp, &old] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(io(dir))?;
        }
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    let json = serde_json::to_string_pretty(&config.to_diffusers_json()).map_err(|e| TrainError::Config(e.to_string()))?;
    write_atomic(&tmp.join(CONFIG_FILE), |w| w.write_all(json.as_bytes()))?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    write_tensors_as(&tmp.join(WEIGHTS_FILE), vae.diffusers_tensors()?, metadata, stored)?;
    if out.exists() {
        std::fs::rename(out, &old).map_err(io(out))?;
    }
    std::fs::rename(&tmp, out).map_err(io(out))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    Ok(config)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io { path: path.to_path_buf(), source }
}
