//! A codec run's own config: the `[vae]` section ([`VaeSection`]), the engine's defaults for a
//! codec trained from scratch ([`train_defaults`]), and the codec a run starts from
//! ([`start_codec`]: random weights, or an exported codec, possibly inflated to video, with a
//! new decoder, or with interpolating time upsampling).

use super::{VaeObjectiveConfig, WorldClipsConfig, inflate_time, interpolate_time, with_initial_logvar};
use crate::engine::{TrainConfig, Trainable};
use crate::{Result, TrainError};
use ff_model::AttentionBackend;
use ff_model::vae::{WanVae, WanVaeConfig};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// `[vae]`: the codec's architecture, its training clips and loss weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VaeSection {
    /// Architecture (`latents_mean` / `latents_std` are measured at export).
    pub model: WanVaeConfig,
    /// The procedural clips it trains on.
    pub clips: WorldClipsConfig,
    /// Weights of L1, MSE and KL.
    pub loss: VaeObjectiveConfig,
    /// Held-out clips whose latents give the exported `latents_mean` / `latents_std`.
    pub stats_clips: usize,
    /// Initial bias of the posterior's log-variance channels ([`with_initial_logvar`]); 0 leaves
    /// the random initialisation's σ ≈ 1.
    #[serde(default)]
    pub initial_logvar: f64,
    /// With a starting codec: inflate its temporal taps ([`inflate_time`]), for a video run that
    /// follows a run on single frames. Only the parameters the run trains are inflated
    /// (`trainable = "decoder"`: the decoder).
    #[serde(default)]
    pub inflate: bool,
    /// With a starting codec: keep only its encoder side (encoder, `quant_conv`, latent
    /// statistics) and start the decoder of `model` (its `decoder_base_dim`) from random weights;
    /// with `trainable = "decoder"` the latent space a DiT was trained in stays.
    #[serde(default)]
    pub new_decoder: bool,
    /// With a starting codec: make its decoder's time upsampling interpolate between latents
    /// instead of holding each one ([`interpolate_time`]; after `inflate`).
    #[serde(default)]
    pub interpolate_time: bool,
}

impl Default for VaeSection {
    fn default() -> Self {
        Self {
            model: WanVaeConfig::tiny_world(),
            clips: WorldClipsConfig::new(),
            loss: VaeObjectiveConfig::new(),
            stats_clips: 32,
            initial_logvar: -6.0,
            inflate: false,
            new_decoder: false,
            interpolate_time: false,
        }
    }
}

/// The engine's defaults for the codec (a plain module trained from scratch: every parameter,
/// Adam with momentum, a learning rate for random initialisation).
pub fn train_defaults() -> TrainConfig {
    TrainConfig::new()
        .with_trainable(Trainable::All)
        .with_steps(3000)
        .with_lr(2e-3)
        .with_warmup_steps(50)
        .with_beta_1(0.9)
        .with_beta_2(0.99)
        .with_weight_decay(0.0)
        .with_ema_decay(0.99)
        .with_batch(2)
        .with_checkpoint_every(50)
}

/// The exported codec in `dir`, checked against the run's architecture (latent statistics
/// aside, and the decoder width when the run starts a new decoder).
pub fn starting_codec(dir: &Path, section: &VaeSection) -> Result<WanVaeConfig> {
    let found = WanVaeConfig::from_json(dir.join(super::export::CONFIG_FILE))?;
    let model = &section.model;
    let decoder_base_dim = if section.new_decoder { model.decoder_base_dim } else { found.decoder_base_dim };
    let same = WanVaeConfig {
        latents_mean: model.latents_mean.clone(),
        latents_std: model.latents_std.clone(),
        decoder_base_dim,
        ..found.clone()
    };
    if &same != model {
        return Err(TrainError::Config(format!(
            "the starting codec {} is not the run's architecture `[vae.model]`:\n  {found:?}\n  {model:?}",
            dir.display()
        )));
    }
    Ok(found)
}

/// The codec a run of `section` starts from on `device`: the exported codec in `from` as the
/// section asks (new decoder, inflated for the `trainable` set, interpolating), or random
/// weights of `section.model` with its initial log-variance.
pub fn start_codec<B: AttentionBackend>(
    section: &VaeSection,
    from: Option<&Path>,
    trainable: Trainable,
    device: &B::Device,
) -> Result<WanVae<B>> {
    let _span = tracing::info_span!("load_vae", from = ?from).entered();
    let Some(dir) = from else { return Ok(with_initial_logvar(section.model.init::<B>(device), section.initial_logvar)) };
    let mut vae = WanVae::load(dir.join(super::export::WEIGHTS_FILE), &starting_codec(dir, section)?, device)?;
    if section.new_decoder {
        vae = vae.with_new_decoder(section.model.decoder_width(), device);
    }
    if section.inflate {
        vae = inflate_time(vae, trainable);
    }
    Ok(if section.interpolate_time { interpolate_time(vae) } else { vae })
}
