//! Loading Wan VAE checkpoints through the crate's loader, in either key layout:
//!
//! * diffusers `AutoencoderKLWan` (`encoder.conv_in.weight`, `encoder.down_blocks.N.conv1.weight`,
//!   `decoder.up_blocks.I.resnets.J...`, `decoder.up_blocks.I.upsamplers.0...`, `quant_conv`, ...);
//! * the original `Wan2.1_VAE.pth` (`encoder.conv1.weight`, `encoder.downsamples.N.residual.{0,2,3,6}`,
//!   `shortcut`, `middle.{0,1,2}`, `head.{0,2}`, flat `decoder.upsamples.N`, top-level `conv1` /
//!   `conv2` for quant / post-quant).
//!
//! The original table is rewritten to diffusers names first, then both go through the same
//! diffusers -> Burn table (which names the variant of each encoder layer and drops the
//! `nn.Sequential` index of `resample.1`). [`WanVae::diffusers_tensors`] goes the other way, for
//! exporting a trained VAE in the diffusers layout.

use super::config::WanVaeConfig;
use super::model::WanVae;
use crate::error::{ModelError, Result};
use crate::load::{CheckpointFiles, KeyRemap, checkpoint_keys, load_checkpoint};
use burn::tensor::TensorData;
use burn::tensor::backend::Backend;
use burn_store::ModuleSnapshot;
use std::path::Path;

/// The key layout of a VAE checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VaeLayout {
    /// diffusers `AutoencoderKLWan` state dict.
    Diffusers,
    /// The original Wan2.1 `WanVAE_` state dict (`Wan2.1_VAE.pth`).
    Original,
}

/// diffusers key -> Burn module path.
const DIFFUSERS_RULES: [(&str, &str); 5] = [
    (r"^encoder\.down_blocks\.(\d+)\.(norm1|conv1|norm2|conv2|conv_shortcut)\.", "encoder.down_blocks.$1.Residual.$2."),
    (r"^encoder\.down_blocks\.(\d+)\.(norm|to_qkv|proj)\.", "encoder.down_blocks.$1.Attention.$2."),
    (r"^encoder\.down_blocks\.(\d+)\.(resample|time_conv)\.", "encoder.down_blocks.$1.Resample.$2."),
    (r"\.upsamplers\.0\.", ".upsampler."),
    (r"\.resample\.1\.", ".resample."),
];

/// Original key -> diffusers key, except the flat decoder index (see [`VaeLayout::remap`]).
const ORIGINAL_RULES: [(&str, &str); 14] = [
    (r"^conv1\.", "quant_conv."),
    (r"^conv2\.", "post_quant_conv."),
    (r"^(encoder|decoder)\.conv1\.", "$1.conv_in."),
    (r"^(encoder|decoder)\.head\.0\.", "$1.norm_out."),
    (r"^(encoder|decoder)\.head\.2\.", "$1.conv_out."),
    (r"^(encoder|decoder)\.middle\.0\.", "$1.mid_block.resnets.0."),
    (r"^(encoder|decoder)\.middle\.1\.", "$1.mid_block.attentions.0."),
    (r"^(encoder|decoder)\.middle\.2\.", "$1.mid_block.resnets.1."),
    (r"^encoder\.downsamples\.", "encoder.down_blocks."),
    (r"\.residual\.0\.", ".norm1."),
    (r"\.residual\.2\.", ".conv1."),
    (r"\.residual\.3\.", ".norm2."),
    (r"\.residual\.6\.", ".conv2."),
    (r"\.shortcut\.", ".conv_shortcut."),
];

impl VaeLayout {
    /// Tells the layout from a checkpoint's keys (`*.conv_in.*` vs `*.conv1.*` at the top of the
    /// encoder or decoder).
    pub fn detect(keys: &[String], origin: &Path) -> Result<Self> {
        let has = |prefixes: &[&str]| keys.iter().any(|k| prefixes.iter().any(|p| k.starts_with(p)));
        match (has(&["encoder.conv_in.", "decoder.conv_in."]), has(&["encoder.conv1.", "decoder.conv1."])) {
            (true, false) => Ok(Self::Diffusers),
            (false, true) => Ok(Self::Original),
            _ => Err(ModelError::corrupt(
                origin,
                "not a Wan VAE checkpoint: expected either 'encoder.conv_in.*' (diffusers) or 'encoder.conv1.*' (Wan2.1 .pth) keys",
            )),
        }
    }

    /// The table from this layout's keys to the module paths of a VAE built from `config`.
    pub fn remap(self, config: &WanVaeConfig) -> KeyRemap {
        let diffusers = KeyRemap::new(&DIFFUSERS_RULES);
        match self {
            Self::Diffusers => diffusers,
            Self::Original => {
                // The original decoder lists its stages flat: per stage `num_res_blocks + 1`
                // residual blocks, then one resample layer (none after the last stage).
                let per_stage = config.num_res_blocks + 2;
                let mut table = KeyRemap::new(&ORIGINAL_RULES);
                for stage in 0..config.dim_mult.len() {
                    for j in 0..per_stage {
                        let target = match j {
                            j if j <= config.num_res_blocks => format!("decoder.up_blocks.{stage}.resnets.{j}."),
                            _ => format!("decoder.up_blocks.{stage}.upsamplers.0."),
                        };
                        table = table.with_rule(&format!(r"^decoder\.upsamples\.{}\.", stage * per_stage + j), target);
                    }
                }
                table.then(&diffusers)
            }
        }
    }
}

/// Burn module path -> diffusers key: the inverse of `DIFFUSERS_RULES`.
pub fn diffusers_key(path: &str) -> String {
    let key = path.replace(".Residual.", ".").replace(".Attention.", ".").replace(".Resample.", ".");
    let key = key.replace(".upsampler.", ".upsamplers.0.");
    match key.strip_suffix(".resample.weight").or_else(|| key.strip_suffix(".resample.bias")) {
        Some(stem) => format!("{stem}.resample.1.{}", &key[stem.len() + ".resample.".len()..]),
        None => key,
    }
}

impl<B: Backend> WanVae<B> {
    /// Every parameter under its diffusers key with its module shape (the VAE has no `Linear`
    /// layer, so no transpose): the tensors of a `diffusion_pytorch_model.safetensors` that
    /// [`WanVae::load`] reads back.
    pub fn diffusers_tensors(&self) -> Result<Vec<(String, TensorData)>> {
        self.collect(None, None, false)
            .into_iter()
            .map(|s| {
                let path = s.full_path();
                let data = s.to_data().map_err(|e| ModelError::Input(format!("parameter '{path}': {e}")))?;
                Ok((diffusers_key(&path), data))
            })
            .collect()
    }

    /// Loads a checkpoint (safetensors file, sharded index, directory or `.pth`) in either key
    /// layout, told from its keys.
    pub fn load(path: impl AsRef<Path>, config: &WanVaeConfig, device: &B::Device) -> Result<Self> {
        let _span = tracing::debug_span!("load_vae_weights", path = %path.as_ref().display()).entered();
        Self::load_layout(path, None, config, device)
    }

    /// As [`WanVae::load`], with the layout given (`None`: detect it).
    pub fn load_layout(path: impl AsRef<Path>, layout: Option<VaeLayout>, config: &WanVaeConfig, device: &B::Device) -> Result<Self> {
        config.validate()?;
        let files = CheckpointFiles::resolve(path)?;
        let layout = match layout {
            Some(layout) => layout,
            None => VaeLayout::detect(&checkpoint_keys(&files)?, &files.origin)?,
        };
        let mut vae = config.init(device);
        load_checkpoint(&mut vae, &files, &layout.remap(config), |_| false)?;
        Ok(vae)
    }
}
