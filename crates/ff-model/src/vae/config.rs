//! Configuration of the Wan VAE: the preset of Wan2.1 and the reader of a diffusers
//! `vae/config.json` (or the `config` object of a fixture `meta.json`).

use crate::error::{self, ModelError};
use burn::config::Config;
use serde::Deserialize;
use std::path::Path;

/// Per-channel mean of Wan2.1 latents (diffusers `latents_mean`).
const WAN2_1_LATENTS_MEAN: [f64; 16] = [
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503,
    -0.2921,
];
/// Per-channel standard deviation of Wan2.1 latents (diffusers `latents_std`).
const WAN2_1_LATENTS_STD: [f64; 16] =
    [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160];

/// Hyper-parameters of [`WanVae`](super::WanVae), named as in diffusers `AutoencoderKLWan`.
#[derive(Config, Debug, PartialEq)]
pub struct WanVaeConfig {
    /// Channels of the first encoder stage (and of the last decoder stage unless
    /// `decoder_base_dim` is set).
    pub base_dim: usize,
    /// Channels of the last decoder stage when the decoder is wider than the encoder (diffusers'
    /// `decoder_base_dim`, Wan2.2's VAE); `None` is `base_dim`.
    #[config(default = "None")]
    pub decoder_base_dim: Option<usize>,
    /// Latent channels.
    pub z_dim: usize,
    /// Channel multiplier per stage; `len - 1` spatial 2× down/up-samplings.
    pub dim_mult: Vec<usize>,
    /// Residual blocks per encoder stage (the decoder has one more).
    pub num_res_blocks: usize,
    /// Encoder scales (1, 0.5, ...) that get an attention block after each residual block.
    pub attn_scales: Vec<f64>,
    /// Per downsampling stage: whether it also halves time (reversed for the decoder).
    pub temperal_downsample: Vec<bool>,
    /// Per-channel latent mean used by [`WanVae::normalize`](super::WanVae::normalize).
    pub latents_mean: Vec<f64>,
    /// Per-channel latent standard deviation used by [`WanVae::normalize`](super::WanVae::normalize).
    pub latents_std: Vec<f64>,
}

/// The fields of a diffusers `AutoencoderKLWan` config this crate reads; absent ones take
/// diffusers' defaults (which are Wan2.1's).
#[derive(Deserialize)]
struct DiffusersVaeJson {
    base_dim: Option<usize>,
    decoder_base_dim: Option<usize>,
    z_dim: Option<usize>,
    dim_mult: Option<Vec<usize>>,
    num_res_blocks: Option<usize>,
    attn_scales: Option<Vec<f64>>,
    temperal_downsample: Option<Vec<bool>>,
    latents_mean: Option<Vec<f64>>,
    latents_std: Option<Vec<f64>>,
    is_residual: Option<bool>,
    in_channels: Option<usize>,
    out_channels: Option<usize>,
    patch_size: Option<usize>,
}

impl WanVaeConfig {
    /// The Wan2.1 VAE (`Wan-AI/Wan2.1-T2V-1.3B-Diffusers/vae`, `Wan2.1_VAE.pth`).
    pub fn wan2_1() -> Self {
        Self::new(96, 16, vec![1, 2, 4, 4], 2, vec![], vec![false, true, true], WAN2_1_LATENTS_MEAN.to_vec(), WAN2_1_LATENTS_STD.to_vec())
    }

    /// The small world's codec (docs/ARCHITECTURE.md §11): Wan2.1's structure (4× time / 8× space, causal
    /// cache, mid-block attention) at width 8, one residual block per stage, 16 latent channels.
    /// Its latent statistics are placeholders (0, 1) until a trained encoder measures them.
    pub fn tiny_world() -> Self {
        Self::new(8, 16, vec![1, 2, 4, 4], 1, vec![], vec![false, true, true], vec![0.0; 16], vec![1.0; 16])
    }

    /// The diffusers `vae/config.json` of this VAE (read back by [`WanVaeConfig::from_json`]).
    pub fn to_diffusers_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "_class_name": "AutoencoderKLWan",
            "base_dim": self.base_dim,
            "z_dim": self.z_dim,
            "dim_mult": self.dim_mult,
            "num_res_blocks": self.num_res_blocks,
            "attn_scales": self.attn_scales,
            "temperal_downsample": self.temperal_downsample,
            "dropout": 0.0,
            "latents_mean": self.latents_mean,
            "latents_std": self.latents_std,
        });
        if let Some(width) = self.decoder_base_dim {
            json["decoder_base_dim"] = width.into();
        }
        json
    }

    /// Reads a diffusers `vae/config.json`, or a fixture `meta.json` whose `config` object holds
    /// those fields. Wan2.2-style options (`is_residual`, `patch_size`, other than 3 video
    /// channels) are rejected; a separate decoder width (`decoder_base_dim`) is read.
    pub fn from_json(path: impl AsRef<Path>) -> error::Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| ModelError::Json { path: path.to_path_buf(), source })?;
        let object = json.get("config").cloned().unwrap_or(json);
        let raw: DiffusersVaeJson =
            serde_json::from_value(object).map_err(|source| ModelError::Json { path: path.to_path_buf(), source })?;
        let bad = |what: String| ModelError::Config(format!("{}: {what}", path.display()));
        if raw.is_residual == Some(true) {
            return Err(bad("is_residual = true (Wan2.2 VAE) is not supported".into()));
        }
        if raw.patch_size.is_some_and(|p| p > 1) {
            return Err(bad("patch_size > 1 (Wan2.2 VAE) is not supported".into()));
        }
        if raw.in_channels.unwrap_or(3) != 3 || raw.out_channels.unwrap_or(3) != 3 {
            return Err(bad("only 3 video channels (in_channels = out_channels = 3) are supported".into()));
        }
        let preset = Self::wan2_1();
        let base_dim = raw.base_dim.unwrap_or(preset.base_dim);
        let config = Self {
            base_dim,
            decoder_base_dim: raw.decoder_base_dim.filter(|d| *d != base_dim),
            z_dim: raw.z_dim.unwrap_or(preset.z_dim),
            dim_mult: raw.dim_mult.unwrap_or(preset.dim_mult),
            num_res_blocks: raw.num_res_blocks.unwrap_or(preset.num_res_blocks),
            attn_scales: raw.attn_scales.unwrap_or(preset.attn_scales),
            temperal_downsample: raw.temperal_downsample.unwrap_or(preset.temperal_downsample),
            latents_mean: raw.latents_mean.unwrap_or(preset.latents_mean),
            latents_std: raw.latents_std.unwrap_or(preset.latents_std),
        };
        config.validate().map_err(|e| bad(e.to_string()))?;
        Ok(config)
    }

    /// Checks that the fields are consistent with each other.
    pub fn validate(&self) -> error::Result<()> {
        let err = |m: String| Err(ModelError::Config(m));
        if self.base_dim == 0 || self.decoder_base_dim == Some(0) || self.z_dim == 0 || self.num_res_blocks == 0 {
            return err("base_dim, decoder_base_dim, z_dim and num_res_blocks must be positive".into());
        }
        if self.dim_mult.is_empty() || self.dim_mult.contains(&0) {
            return err(format!("dim_mult {:?} must be non-empty and positive", self.dim_mult));
        }
        if self.temperal_downsample.len() + 1 != self.dim_mult.len() {
            return err(format!(
                "temperal_downsample has {} entries, dim_mult {:?} needs {}",
                self.temperal_downsample.len(),
                self.dim_mult,
                self.dim_mult.len() - 1
            ));
        }
        if self.latents_mean.len() != self.z_dim || self.latents_std.len() != self.z_dim {
            return err(format!(
                "latents_mean/latents_std have {}/{} entries, z_dim is {}",
                self.latents_mean.len(),
                self.latents_std.len(),
                self.z_dim
            ));
        }
        if self.latents_std.iter().any(|s| *s <= 0.0) {
            return err("latents_std entries must be positive".into());
        }
        Ok(())
    }

    /// Channels of each encoder stage boundary: `base_dim · [1, dim_mult...]`.
    pub(crate) fn encoder_dims(&self) -> Vec<usize> {
        std::iter::once(1).chain(self.dim_mult.iter().copied()).map(|m| self.base_dim * m).collect()
    }

    /// Channels of the last decoder stage: `decoder_base_dim`, else `base_dim`.
    pub fn decoder_width(&self) -> usize {
        self.decoder_base_dim.unwrap_or(self.base_dim)
    }

    /// Channels of each decoder stage boundary: `decoder_width · [dim_mult.last, dim_mult reversed...]`.
    pub(crate) fn decoder_dims(&self) -> Vec<usize> {
        let last = *self.dim_mult.last().expect("validated non-empty dim_mult");
        std::iter::once(last).chain(self.dim_mult.iter().rev().copied()).map(|m| self.decoder_width() * m).collect()
    }

    /// Temporal factor between video frames and latent frames (4 for Wan2.1).
    pub fn temporal_factor(&self) -> usize {
        1 << self.temperal_downsample.iter().filter(|t| **t).count()
    }

    /// Spatial factor between video pixels and latent pixels (8 for Wan2.1).
    pub fn spatial_factor(&self) -> usize {
        1 << self.temperal_downsample.len()
    }
}
