//! The configs of the model files, read and checked against each other: the text encoder's width
//! must be the DiT's `text_dim`, the VAE's latent channels the DiT's in/out channels, and frame
//! sizes multiples of the VAE factor times the DiT patch.

use std::path::PathBuf;

use crate::error::{Result, invalid};
use ff_model::dit::DitConfig;
use ff_model::text::Umt5Config;
use ff_model::vae::WanVaeConfig;

use super::files::ModelFiles;

/// The configs of the model files, checked against each other.
#[derive(Debug, Clone)]
pub struct Configs {
    /// The DiT's.
    pub dit: DitConfig,
    /// The VAE's.
    pub vae: WanVaeConfig,
    /// The text encoder's.
    pub text: Umt5Config,
}

impl Configs {
    /// Reads the configs of `files` and checks them against each other.
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
            invalid!(
                "mismatched model files: the text encoder ({}) outputs {}-d embeddings but the DiT ({}) takes text_dim {}",
                named(&files.text_encoder_config, "umT5-XXL"),
                text.d_model,
                files.dit_config.display(),
                dit.text_dim
            );
        }
        if vae.z_dim != dit.in_channels || vae.z_dim != dit.out_channels {
            invalid!(
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
                invalid!("{flag} {pixels} must be a positive multiple of {step} (VAE factor {s} × DiT patch {patch})");
            }
        }
        Ok([height / s, width / s])
    }

    /// Errors when `latents` frames exceed the DiT's RoPE table (positions are latent indices).
    pub fn check_latents(&self, latents: usize) -> Result<()> {
        let max = self.dit.rope_max_positions;
        if latents > max {
            invalid!("{latents} latent frames exceed the DiT's {max} RoPE positions: ask for a shorter video");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wan() -> Configs {
        Configs { dit: DitConfig::wan_t2v_1_3b(), vae: WanVaeConfig::wan2_1(), text: Umt5Config::umt5_xxl() }
    }

    #[test]
    fn frame_sizes_are_multiples_of_vae_factor_times_patch() {
        assert_eq!(wan().latent_size(480, 832).unwrap(), [60, 104]);
        assert_eq!(wan().latent_size(16, 16).unwrap(), [2, 2]);
        let err = wan().latent_size(480, 840).unwrap_err().to_string();
        assert!(err.contains("--width 840 must be a positive multiple of 16"), "{err}");
        assert!(wan().latent_size(0, 16).is_err());
    }

    #[test]
    fn lengths_stay_within_the_rope_table() {
        assert!(wan().check_latents(1024).is_ok());
        let err = wan().check_latents(1025).unwrap_err().to_string();
        assert!(err.contains("1025 latent frames exceed the DiT's 1024 RoPE positions"), "{err}");
    }
}
