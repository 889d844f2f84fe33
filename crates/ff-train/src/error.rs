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
    /// A configuration value out of range (the message names the key).
    #[error("{0}")]
    Config(String),
    /// A clip or tensor whose shape does not fit (the message names which and the shape).
    #[error("{0}")]
    Shape(String),
}
