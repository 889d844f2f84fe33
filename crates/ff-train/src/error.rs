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
    #[error("invalid training configuration: {0}")]
    Config(String),
    #[error("{path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
    #[error("data-parallel worker failed: {0}")]
    Worker(String),
}
