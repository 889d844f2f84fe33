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
//!
//! A scene drawn by the generator scores perfectly against its own caption:
//!
//! ```
//! use ff_world::render::{frames_for_seconds, render};
//! use ff_world::{EvalOptions, Prompt, Scene, SceneConfig, evaluate};
//!
//! let scene = Scene::sample(0, &SceneConfig { gradient: 0.5, ..Default::default() });
//! assert_eq!(Prompt::parse(&scene.caption()).unwrap(), scene.prompt);
//! let clip = render(&scene, frames_for_seconds(5)); // 81 frames of 64 × 64 RGB8
//! assert_eq!((clip.frames.len(), clip.frames[0].len()), (81, 64 * 64 * 3));
//! let report = evaluate(&clip, &scene.prompt, &EvalOptions::default()).unwrap();
//! assert_eq!((report.prompt_accuracy, report.identity_persistence), (1.0, 1.0));
//! ```

#![warn(missing_docs)]

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
    /// A caption [`Prompt::parse`] does not accept.
    #[error("prompt '{prompt}': {message}. The domain knows {vocabulary}")]
    Prompt {
        /// The caption as given.
        prompt: String,
        /// What is wrong: the unknown words, or what is missing or misplaced.
        message: String,
        /// The whole vocabulary in one line ([`vocab::vocabulary`]).
        vocabulary: String,
    },
    /// A frame whose buffer is not `3 · width · height` bytes of RGB8 ([`evaluate`]).
    #[error("frame {index}: {message}")]
    Frame {
        /// Index of the frame in its clip.
        index: usize,
        /// Its length against the size the clip declares.
        message: String,
    },
    /// An evaluation asked for something the clip cannot give (e.g. a prompt switch after its
    /// last frame).
    #[error("{0}")]
    Invalid(String),
}

/// The domain's result, with [`WorldError`].
pub type Result<T> = std::result::Result<T, WorldError>;
