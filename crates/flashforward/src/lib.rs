//! FlashForward as a library: load a model folder, generate a video from a prompt, write it.
//!
//! ```no_run
//! use flashforward::{Pipeline, Request};
//! let device = Default::default();
//! let pipe = Pipeline::<flashforward::Cpu>::load(flashforward::default_model_dir()?, &device)?;
//! let video = pipe.generate(&Request::new("a red circle bounces").seconds(5.0).seed(0))?;
//! video.write_mp4("x.mp4")?;
//! # Ok::<(), flashforward::Error>(())
//! ```
//!
//! * [`model`]: a model folder (Wan2.1 in either layout, the Hugging Face cache, an exported
//!   student with its manifest, the repository's default model) opened without loading weights.
//! * [`Request`] and [`plan`]: what to generate, checked against the model before anything loads;
//!   [`memory`] estimates what each device needs.
//! * [`Pipeline`]: the DiT and VAE on their devices; [`Pipeline::generate`] returns a [`Video`],
//!   [`Pipeline::generate_with`] hands each decoded chunk to a callback as it is made.
//! * [`video`]: frames, MP4 / GIF / PNG output and MP4 input (the default `video` feature).
//!
//! The building blocks are re-exported for work below this level: [`ff_model`] (DiT, VAE,
//! umT5), [`ff_sched`] (contract, schedules, executors) and, with the `train` feature,
//! `ff_train` (both training phases). Loading, prompt encoding, each DiT forward and each chunk
//! decode emit `tracing` spans; the library prints nothing. docs/ARCHITECTURE.md draws the data
//! flow.
#![warn(missing_docs)]

pub mod error;
pub mod executor;
mod generate;
pub mod memory;
pub mod model;
pub mod plan;
pub mod prompt;
pub mod request;
pub mod switch;
pub mod video;

pub use error::{Error, Result};
pub use executor::Executor;
pub use ff_model;
pub use ff_sched;
pub use ff_sched::{Graph, ScheduleKind};
#[cfg(feature = "train")]
pub use ff_train;
pub use generate::{Chunk, Pipeline, Report};
pub use model::files::{MODEL_DIR_ENV, default_model_dir};
pub use model::{Model, ModelFiles};
pub use plan::Plan;
pub use request::{ContractKnobs, Forward, ForwardHook, Length, Request, TeacherSampler};
pub use switch::{Carry, LiveSwitch, Segment, Switch, SwitchPolicy};
pub use video::{FPS, Frame, Video};

/// The CPU backend the binary runs: Burn's Flex (SIMD element-wise ops, rayon-parallel GEMM,
/// im2col convolutions), with the project's attention kernels. docs/BENCHMARKS.md has the
/// measurement that chose it.
pub type Cpu = burn::backend::Flex;
