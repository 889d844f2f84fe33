//! [`StepModule`]: the form of the trained module that a step runs, from `[train] precision` and
//! `[train] checkpointing`. The trainer keeps the module as it is (f32 master weights); each
//! worker runs a step on `module.for_step(config)`, whose parameters are ops of the autodiff graph
//! over the master's (a cast), or the master's own, so that the gradients arrive at the master's
//! f32 leaves either way.

use super::config::{Checkpointing, Precision, TrainConfig};
use crate::{Result, TrainError};
use burn::tensor::DType;
use burn::tensor::backend::Backend;
use ff_model::vae::WanVae;
use ff_model::{AttentionBackend, WanDit};

/// A module the engine trains, with the form its steps run.
pub trait StepModule: Sized {
    /// The module a step under `config` runs (differentiable back to `self`'s parameters); an
    /// error names a setting this module does not have.
    fn for_step(&self, config: &TrainConfig) -> Result<Self>;
}

impl<B: AttentionBackend> StepModule for WanDit<B> {
    fn for_step(&self, config: &TrainConfig) -> Result<Self> {
        let model = self.clone().with_block_checkpointing(config.checkpointing == Checkpointing::Blocks);
        Ok(match config.precision {
            Precision::F32 => model,
            Precision::Bf16 => model.with_precision(DType::BF16),
        })
    }
}

impl<B: Backend> StepModule for WanVae<B> {
    fn for_step(&self, config: &TrainConfig) -> Result<Self> {
        match (config.precision, config.checkpointing) {
            (Precision::F32, Checkpointing::None) => Ok(self.clone()),
            (precision, checkpointing) => Err(TrainError::Config(format!(
                "precision = \"{}\", checkpointing = \"{}\": the codec trains in f32 without checkpointing (both are DiT settings)",
                format!("{precision:?}").to_lowercase(),
                format!("{checkpointing:?}").to_lowercase()
            ))),
        }
    }
}
