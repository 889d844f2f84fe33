//! The configs of the model files, read and checked against each other: the text encoder's width
//! must be the DiT's `text_dim`, the VAE's latent channels the DiT's in/out channels, and frame
//! sizes multiples of the VAE factor times the DiT patch.

use std::path::PathBuf;

use anyhow::{Result, bail};
use ff_model::dit::DitConfig;
use ff_model::text::Umt5Config;
use ff_model::vae::WanVaeConfig;

use super::paths::ModelFiles;

/// The configs of the model files, checked against each other.
pub struct Configs {
    pub dit: DitConfig,
    pub vae: WanVaeConfig,
    pub text: Umt5Config,
}

impl Configs {
    pub fn read(files: &ModelFiles) -> Result<Self> {
        let dit = DitConfig::from_json(&files.dit_config)?;
        let vae = match &files.vae_config {
            Some(path) => WanVaeConfig::from_json(path)?,
            None => WanVaeConfig::wan2_1(),
        };
        let text = match &files.text_encoder_config {
            Some(path) => Umt5Config::from_json(path)?,
            None => Umt5Config::umt5_xxl(),
        };
        let named = |p: &Option<PathBuf>, preset: &str| match p {
            Some(p) => p.display().to_string(),
            None => format!("the {preset} preset"),
        };
        if text.d_model != dit.text_dim {
            bail!(
                "mismatched model files: the text encoder ({}) outputs {}-d embeddings but the DiT ({}) takes text_dim {}",
                named(&files.text_encoder_config, "umT5-XXL"),
                text.d_model,
                files.dit_config.display(),
                dit.text_dim
            );
        }
        if vae.z_dim != dit.in_channels || vae.z_dim != dit.out_channels {
            bail!(
                "mismatched model files: the VAE ({}) has {} latent channels but the DiT ({}) takes {} and makes {}",
                named(&files.vae_config, "Wan2.1 VAE"),
                vae.z_dim,
                files.dit_config.display(),
                dit.in_channels,
                dit.out_channels
            );
        }
        Ok(Self { dit, vae, text })
    }

    /// Latent height and width of `height × width` frames.
    pub fn latent_size(&self, height: usize, width: usize) -> Result<[usize; 2]> {
        let [_, ph, pw] = self.dit.patch_size;
        let s = self.vae.spatial_factor();
        for (flag, pixels, patch) in [("--height", height, ph), ("--width", width, pw)] {
            let step = s * patch;
            if pixels == 0 || pixels % step != 0 {
                bail!(
                    "{flag} {pixels} must be a positive multiple of {step} (VAE factor {s} × DiT patch {patch})"
                );
            }
        }
        Ok([height / s, width / s])
    }
}
