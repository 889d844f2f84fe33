//! FlashForward training: latent-clip datasets, the training engine (optimizer, EMA,
//! checkpoints, data-parallel workers), the two phases (packed time-rebased SFT, self-rollout
//! DMD distillation) and the small world's codec ([`vae`]). Written against `B: AutodiffBackend`;
//! tests run on `Autodiff<NdArray>`.

pub mod checkpoint;
pub mod data;
pub mod dmd;
pub mod engine;
pub mod error;
pub mod flow;
pub mod objective;
pub mod rng;
pub mod sft;
pub mod teacher;
pub mod vae;

pub use error::{Result, TrainError};
pub use objective::{Loss, Objective};
pub use rng::TrainRng;
