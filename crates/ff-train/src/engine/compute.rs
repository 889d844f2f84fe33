//! [`StepModule`]: the form of the trained module that a step runs, from `[train] precision`,
//! `[train] checkpointing` and `[train] context_parallel`. The trainer keeps the module as it is (f32 master weights); each
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
pub trait StepModule<B: Backend>: Sized {
    /// The module a step under `config` runs on the data-parallel group `group` (its first
    /// device holds `self`; `context_parallel` devices), differentiable back to `self`'s
    /// parameters; an error names a setting this module does not have.
    fn for_step(&self, config: &TrainConfig, group: &[B::Device]) -> Result<Self>;
}

impl<B: AttentionBackend> StepModule<B> for WanDit<B> {
    fn for_step(&self, config: &TrainConfig, group: &[B::Device]) -> Result<Self> {
        let model = self
            .clone()
            .with_block_checkpointing(config.checkpointing == Checkpointing::Blocks)
            .with_context_parallel(if group.len() > 1 { group.to_vec() } else { Vec::new() });
        Ok(match config.precision {
            Precision::F32 => model,
            Precision::Bf16 => model.with_precision(DType::BF16),
        })
    }
}

impl<B: Backend> StepModule<B> for WanVae<B> {
    fn for_step(&self, config: &TrainConfig, _: &[B::Device]) -> Result<Self> {
        match (config.precision, config.checkpointing, config.context_parallel) {
            (Precision::F32, Checkpointing::None, 1) => Ok(self.clone()),
            (precision, checkpointing, cp) => Err(TrainError::Config(format!(
                "precision = \"{}\", checkpointing = \"{}\", context_parallel = {cp}: the codec trains in f32, without \
                 checkpointing or context parallelism (DiT settings)",
                format!("{precision:?}").to_lowercase(),
                format!("{checkpointing:?}").to_lowercase()
            ))),
        }
    }
}
