//! The small world: a procedural text-to-video domain in which the project trains and measures
//! its own models (docs/ARCHITECTURE.md §11).
//!
//! * [`vocab`]: shapes, colours, backgrounds and motions, their palette and the caption parser.
//! * [`scene`]: a seeded [`Scene`] (one or two objects with simple physics) and its caption.
//! * [`render`]: RGB frames of a scene at 16 FPS, any length and size.
//! * [`detect`]: classical colour segmentation of one frame into coloured shapes.
//! * [`eval`]: prompt accuracy, identity persistence, smoothness, drift per 5 s window and the
//!   paper's seam statistics (Tab. 6) of a video.
//!
//! Everything is plain Rust on host bytes (no tensor backend), deterministic by seed.

pub mod detect;
pub mod eval;

pub mod render;
pub mod scene;
pub mod svg;

pub mod vocab;

pub use eval::{EvalOptions, IdentityFailures, Report, evaluate};
pub use render::{Clip, FPS};
pub use scene::{Scene, SceneConfig};
pub use vocab::{Background, Colour, Motion, Prompt, Shape};

/// Errors of the domain: a prompt outside the vocabulary, or a bad frame buffer.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("prompt '{prompt}': {message}. The domain knows {vocabulary}")]
    Prompt { prompt: String, message: String, vocabulary: String },
    #[error("frame {index}: {message}")]
    Frame { index: usize, message: String },
}

pub type Result<T> = std::result::Result<T, WorldError>;
