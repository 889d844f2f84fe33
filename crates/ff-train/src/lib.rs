//! FlashForward training: latent-clip datasets, the training engine (optimizer, EMA,
//! checkpoints, data-parallel workers), the two phases (packed time-rebased SFT, self-rollout
//! DMD distillation), the [`runner`] that drives a run (config file, checkpoints, resume,
//! metrics, stop flag, export) and, with the `world` feature, the small world's codec (`vae`)
//! and teacher (`teacher`). Written against `B: AutodiffBackend`; tests run on
//! `Autodiff<NdArray>`.

#![warn(missing_docs)]

pub mod checkpoint;
pub mod data;
pub mod dmd;
pub mod engine;
pub mod error;
pub mod flow;
pub mod objective;
pub mod rng;
pub mod runner;
pub mod sft;
#[cfg(feature = "world")]
pub mod teacher;
#[cfg(feature = "world")]
pub mod vae;

pub use error::{Result, TrainError};
pub use objective::{Loss, Objective};
pub use rng::TrainRng;
