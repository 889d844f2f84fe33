//! Typed errors of the training crate: each names the file, key or shape at fault.

use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, TrainError>;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Data { path: PathBuf, message: String },
    #[error("{0}")]
    Model(#[from] ff_model::ModelError),
    #[error("{0}")]
    Sched(#[from] ff_sched::SchedError),
    #[error("invalid training configuration: {0}")]
    Config(String),
    /// A run config file that cannot be read as the run's config (an unknown key, a bad value,
    /// invalid TOML); the message names the key or section.
    #[error("{origin}: {message}")]
    ConfigFile {
        /// The file (or where the text came from).
        origin: PathBuf,
        /// What is wrong, naming the key or section.
        message: String,
    },
    /// A path the run needs that its config does not set (`data`, `out`, ...).
    #[error("the run config sets no `{key}`")]
    Unset {
        /// The key.
        key: &'static str,
    },
    /// A resumed run whose directory holds no checkpoint.
    #[error("{run}: holds no checkpoint to resume from")]
    NothingToResume {
        /// The run directory.
        run: PathBuf,
    },
    /// A new run into a directory that already holds one.
    #[error("{run} already holds a run (checkpoint {checkpoint}): resume it, or choose another run directory")]
    RunExists {
        /// The run directory.
        run: PathBuf,
        /// Its newest checkpoint.
        checkpoint: PathBuf,
    },
    #[error("{path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
    #[error("data-parallel worker failed: {0}")]
    Worker(String),
    /// A latent-clip manifest that cannot be parsed or contradicts itself.
    #[error("{manifest}: {message}")]
    Manifest { manifest: PathBuf, message: String },
    /// A shard the manifest names is not on disk.
    #[error("{manifest}: shard {shard} of clip {clip} ({video}) does not exist")]
    MissingShard { manifest: PathBuf, shard: PathBuf, clip: usize, video: String },
    /// A tensor the manifest names is not in its shard.
    #[error("{shard}: no tensor '{key}' (clip {clip}, {video}, in the manifest)")]
    MissingKey { shard: PathBuf, key: String, clip: usize, video: String },
    /// A tensor whose shape is not the one the manifest (or the writer) expects.
    #[error("{path}: tensor '{key}' has shape {found:?}, expected {expected:?}")]
    ShapeMismatch { path: PathBuf, key: String, expected: Vec<usize>, found: Vec<usize> },
    /// A captions line whose video is not in the videos directory.
    #[error("{captions}:{line}: caption without a video: {video} does not exist")]
    CaptionWithoutVideo { captions: PathBuf, line: usize, video: PathBuf },
    /// A captions line that is not `{"video": "...", "caption": "..."}`.
    #[error("{captions}:{line}: {message}")]
    Captions { captions: PathBuf, line: usize, message: String },
    /// A clip or tensor whose shape does not fit (the message names which and the shape).
    #[error("{0}")]
    Shape(String),
}
