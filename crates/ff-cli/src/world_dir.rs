//! The small world's model directory (`models/world/`), in the diffusers layout `generate
//! --model-dir` reads; `world text`, `world latents` and `train teacher` find its files here:
//!
//! | file | written by |
//! | --- | --- |
//! | `vae/{config.json,diffusion_pytorch_model.safetensors}` | `train vae` (scripts/world/train-vae.sh) |
//! | `tokenizer/tokenizer.json` | `world text` (word level over the domain's vocabulary) |
//! | `text_encoder/{config.json,model.safetensors}` | `world text` (umT5 at tiny width, frozen random) |
//! | `teacher/{config.json,diffusion_pytorch_model.safetensors}` | `train teacher` (scripts/train-world.sh) |
//! | `transformer/{config.json,planner/,renderer/,flashforward.json}` | `train dmd`, the student `generate` runs by default (scripts/train-default.sh) |

use anyhow::{Result, bail};
use ff_model::text::{PromptEncoderFiles, Umt5Config};
use ff_model::vae::WanVaeConfig;
use std::path::{Path, PathBuf};

/// Paths inside a small-world model directory.
pub struct WorldDir(pub PathBuf);

impl WorldDir {
    pub fn tokenizer(&self) -> PathBuf {
        self.0.join("tokenizer/tokenizer.json")
    }

    pub fn text_encoder_dir(&self) -> PathBuf {
        self.0.join("text_encoder")
    }

    pub fn vae_dir(&self) -> PathBuf {
        self.0.join("vae")
    }

    /// The prompt encoder of the directory, padding to `max_len` tokens (the DiT's `text_len`).
    pub fn text(&self, max_len: usize) -> Result<PromptEncoderFiles> {
        let dir = self.text_encoder_dir();
        let (config, weights) = (dir.join("config.json"), dir.join("model.safetensors"));
        need(&[&config, &weights, &self.tokenizer()], "run `flashforward world text --out DIR`")?;
        Ok(PromptEncoderFiles { tokenizer: self.tokenizer(), weights, config: Umt5Config::from_json(&config)?, max_len })
    }

    /// The VAE weights and config.
    pub fn vae(&self) -> Result<(PathBuf, WanVaeConfig)> {
        let dir = self.vae_dir();
        let (config, weights) = (dir.join("config.json"), dir.join("diffusion_pytorch_model.safetensors"));
        need(&[&config, &weights], "train a codec with scripts/world/train-vae.sh")?;
        Ok((weights, WanVaeConfig::from_json(&config)?))
    }
}

fn need(paths: &[&Path], hint: &str) -> Result<()> {
    let missing: Vec<String> = paths.iter().filter(|p| !p.is_file()).map(|p| p.display().to_string()).collect();
    if !missing.is_empty() {
        bail!("missing {} ({hint})", missing.join(", "));
    }
    Ok(())
}
