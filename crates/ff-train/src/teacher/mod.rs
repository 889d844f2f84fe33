//! [`TeacherObjective`]: the small world's teacher, a bidirectional DiT trained from scratch with
//! plain flow matching on whole clips ([`FlowMatchObjective`], every frame in the base role) and
//! text dropout for classifier-free guidance: with probability `text_dropout` a clip's prompt
//! embedding is replaced by the empty prompt's, so the same model also predicts the unconditional
//! velocity that `ff_model::flow::cfg` guides against.
//!
//! Shapes: as [`FlowMatchObjective`]; the empty-prompt embedding is `[tokens, text_dim]` f32 from
//! the same text encoder as the dataset's prompts.

use crate::TrainError; // not `Result`: the `Config` derive expands to code that uses std's
use crate::data::LatentClip;
use crate::flow::{FlowMatchConfig, FlowMatchObjective};
use crate::objective::{Loss, Objective};
use crate::rng::TrainRng;
use burn::config::Config;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use ff_model::{AttentionBackend, DitConfig, Role, WanDit};

/// The `[teacher]` section of `train teacher`.
#[derive(Config, Debug, PartialEq)]
pub struct TeacherConfig {
    /// DiT preset the run starts from (random weights): see `DitConfig::preset`.
    #[config(default = "String::from(\"tiny-world\")")]
    pub dit: String,
    /// Timestep shift of the training σ distribution.
    #[config(default = 5.0)]
    pub shift: f64,
    /// Probability that a clip trains on the empty prompt instead of its own (for CFG).
    #[config(default = 0.1)]
    pub text_dropout: f64,
    /// Transformer blocks, when not the preset's.
    pub layers: Option<usize>,
    /// Weights the run starts from instead of random ones: an exported teacher folder
    /// (`RUN/transformer/`, `models/world/teacher/`) of this section's architecture, or of a
    /// shallower one that [`grow`] deepens. It continues an earlier run whose checkpoints are gone
    /// (fresh optimizer moments and EMA).
    pub init: Option<String>,
}

impl TeacherConfig {
    /// The DiT this config trains; an unknown preset or a dropout outside [0, 1] is an error
    /// naming the key.
    pub fn dit_config(&self) -> crate::Result<DitConfig> {
        if !(0.0..=1.0).contains(&self.text_dropout) {
            return Err(TrainError::Config(format!("text_dropout {} must lie in [0, 1]", self.text_dropout)));
        }
        if self.layers == Some(0) {
            return Err(TrainError::Config("layers must be positive".into()));
        }
        let preset = DitConfig::preset(&self.dit)
            .ok_or_else(|| TrainError::Config(format!("dit: unknown preset '{}' ({})", self.dit, DitConfig::PRESETS.join(", "))))?;
        Ok(DitConfig { num_layers: self.layers.unwrap_or(preset.num_layers), ..preset })
    }
}

/// Flow matching with text dropout against `empty`, the empty prompt's embedding.
#[derive(Clone, Debug)]
pub struct TeacherObjective {
    flow: FlowMatchObjective,
    text_dropout: f64,
    empty: TensorData,
}

impl TeacherObjective {
    /// The objective of `config` (its σ shift and text dropout; every frame in the base role),
    /// `empty`: the empty prompt's embedding `[tokens, text_dim]` f32. A config that
    /// [`TeacherConfig::dit_config`] rejects is an error.
    pub fn new(config: &TeacherConfig, empty: TensorData) -> crate::Result<Self> {
        config.dit_config()?;
        let flow = FlowMatchObjective { config: FlowMatchConfig::new().with_shift(config.shift).with_role(Role::Base) };
        Ok(Self { flow, text_dropout: config.text_dropout, empty })
    }

    /// Whether the next clip trains on the empty prompt. One draw per clip, before the flow
    /// objective's σ and noise, whatever the outcome: a clip's noise does not depend on it.
    pub fn drops(&self, rng: &mut TrainRng) -> bool {
        rng.uniform() < self.text_dropout
    }
}

impl<B: AutodiffBackend + AttentionBackend> Objective<B> for TeacherObjective
where
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> crate::Result<Loss<B>> {
        Ok(self.losses(model, &[clip], std::slice::from_mut(rng))?.remove(0))
    }

    /// One batched forward of the micro-batch (clips of one shape; else clip by clip), each clip
    /// on its own prompt or the empty one.
    fn losses(&self, model: &WanDit<B>, clips: &[&LatentClip], rngs: &mut [TrainRng]) -> crate::Result<Vec<Loss<B>>> {
        let prompts: Vec<&TensorData> =
            clips.iter().zip(rngs.iter_mut()).map(|(clip, rng)| if self.drops(rng) { &self.empty } else { &clip.prompt }).collect();
        if clips.iter().any(|c| c.latents.shape != clips[0].latents.shape) {
            let mut losses = Vec::with_capacity(clips.len());
            for ((clip, prompt), rng) in clips.iter().zip(&prompts).zip(rngs) {
                losses.extend(self.flow.batched(model, &[clip], &[prompt], std::slice::from_mut(rng))?);
            }
            return Ok(losses);
        }
        self.flow.batched(model, clips, &prompts, rngs)
    }
}

/// Kept here too: the teacher is what grows ([`TeacherConfig::init`] with more `layers`).
pub use crate::engine::grow;

#[cfg(test)]
mod tests;
