//! Typed errors of the training crate: each names the file, key or shape at fault.

use std::path::PathBuf;

/// The result of every fallible operation in this crate.
pub type Result<T> = std::result::Result<T, TrainError>;

/// Every error of the training crate.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A file or directory operation that failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Training data that cannot be read (a bad or truncated shard, a clip index out of range).
    #[error("{path}: {message}")]
    Data {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An error of the model crate (loading weights, a forward's shapes).
    #[error("{0}")]
    Model(#[from] ff_model::ModelError),
    /// An error of the schedule crate (an invalid inference contract).
    #[error("{0}")]
    Sched(#[from] ff_sched::SchedError),
    /// A training configuration (or clip) the trainers cannot run with; the message says which
    /// value and why.
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
    /// A checkpoint that cannot be written, read or resumed from (a missing or inconsistent
    /// file, a config that differs from the run's).
    #[error("{path}: {message}")]
    Checkpoint {
        /// The checkpoint folder or file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A data-parallel worker thread that panicked or failed; the message says how.
    #[error("data-parallel worker failed: {0}")]
    Worker(String),
    /// A collective operation of data parallel across devices or nodes that failed or timed out
    /// (a node stopped or cannot be reached); the message names the node and the operation.
    #[error("data parallel: {0}")]
    Collective(String),
    /// A latent-clip manifest that cannot be parsed or contradicts itself.
    #[error("{manifest}: {message}")]
    Manifest {
        /// The manifest file.
        manifest: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A shard the manifest names is not on disk.
    #[error("{manifest}: shard {shard} of clip {clip} ({video}) does not exist")]
    MissingShard {
        /// The manifest file.
        manifest: PathBuf,
        /// The missing shard's path.
        shard: PathBuf,
        /// The index of the clip that lives in it.
        clip: usize,
        /// That clip's source video.
        video: String,
    },
    /// A tensor the manifest names is not in its shard.
    #[error("{shard}: no tensor '{key}' (clip {clip}, {video}, in the manifest)")]
    MissingKey {
        /// The shard file.
        shard: PathBuf,
        /// The tensor name the manifest gives.
        key: String,
        /// The index of the clip.
        clip: usize,
        /// That clip's source video.
        video: String,
    },
    /// A tensor whose shape is not the one the manifest (or the writer) expects.
    #[error("{path}: tensor '{key}' has shape {found:?}, expected {expected:?}")]
    ShapeMismatch {
        /// The file holding the tensor.
        path: PathBuf,
        /// The tensor's name.
        key: String,
        /// The shape expected.
        expected: Vec<usize>,
        /// The shape found.
        found: Vec<usize>,
    },
    /// A captions line whose video is not in the videos directory.
    #[error("{captions}:{line}: caption without a video: {video} does not exist")]
    CaptionWithoutVideo {
        /// The captions file.
        captions: PathBuf,
        /// The line number (1-based).
        line: usize,
        /// The video path the line names.
        video: PathBuf,
    },
    /// A captions line that is not `{"video": "...", "caption": "..."}`.
    #[error("{captions}:{line}: {message}")]
    Captions {
        /// The captions file.
        captions: PathBuf,
        /// The line number (1-based).
        line: usize,
        /// What is wrong with the line.
        message: String,
    },
    /// A clip or tensor whose shape does not fit (the message names which and the shape).
    #[error("{0}")]
    Shape(String),
}
