//! The training engine both phases share: a [`Trainer`] runs optimizer steps of an
//! [`Objective`](crate::Objective) over a [`ClipSource`](crate::data::ClipSource).
//!
//! * [`TrainConfig`]: every hyper-parameter, defaults from the paper (App. C.1).
//! * Trainable set ([`Trainable`]): the role adapters and role vectors, or every parameter;
//!   frozen parameters get no gradient.
//! * [`Optimizer`]: Burn's AdamW with β₁, β₂, ε and weight decay set explicitly, state by
//!   parameter path; [`clip_global_norm`]: clipping by the norm over all gradients.
//! * [`Ema`]: the moving average used for evaluation and export.
//! * [`StepModule`]: what a step runs: the DiT in bf16 over f32 master weights
//!   ([`Precision`]), its blocks recomputed in the backward pass ([`Checkpointing`]).
//! * [`grow`]: a trained DiT deepened to more blocks, computing what it did, to train further.
//! * Gradient accumulation to the global batch and data parallel over devices and nodes (one
//!   worker thread per device, one process per node, gradients summed by burn-collective's
//!   all-reduce: [`parallel`]); the next step's clips are read while a step runs.
//!
//! Parameters, gradients, moments and averages are maps from module path to a flattened tensor
//! ([`params`]); checkpoints ([`crate::checkpoint`]) save them by that name.

mod compute;
mod config;
mod ema;
mod grow;
mod optim;
pub mod parallel;
pub mod params;
#[cfg(test)]
pub(crate) mod tests;
mod trainer;

pub use compute::StepModule;
pub use config::{Checkpointing, Precision, TrainConfig, Trainable};
pub use ema::Ema;
pub use grow::grow;
pub use optim::{Moments, Optimizer, clip_global_norm};
pub use parallel::Nodes;
pub use trainer::{StepReport, Trainer};
