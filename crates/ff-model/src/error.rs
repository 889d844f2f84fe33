//! Typed errors of the model crate. Every variant names the file, key, shape or field at fault.

use std::path::PathBuf;

/// Errors raised while configuring, loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: invalid JSON: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path}: corrupt or truncated file: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: tensor '{key}' has unsupported dtype {dtype}")]
    UnsupportedDtype { path: PathBuf, key: String, dtype: String },
    #[error("{path}: {} missing key(s): {}", keys.len(), keys.join(", "))]
    MissingKeys { path: PathBuf, keys: Vec<String> },
    #[error("{path}: {} unexpected key(s) (not used by the model): {}", keys.len(), keys.join(", "))]
    UnexpectedKeys { path: PathBuf, keys: Vec<String> },
    #[error("{path}: tensor '{key}' of {dtype} {shape:?} has more bytes than a u64 counts (hostile header?)")]
    TensorTooLarge { path: PathBuf, key: String, dtype: String, shape: Vec<usize> },
    #[error("{path}: tensor '{key}' has shape {found:?}, the model expects {expected:?}")]
    ShapeMismatch { path: PathBuf, key: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("{path}: tensor '{key}' could not be loaded: {reason}")]
    Load { path: PathBuf, key: String, reason: String },
    #[error("{path}: no tensor named '{key}'")]
    NoSuchTensor { path: PathBuf, key: String },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid input: {0}")]
    Input(String),
    #[error("{0}")]
    Tokenizer(String),
}

/// Result alias of the model crate.
pub type Result<T> = std::result::Result<T, ModelError>;

impl ModelError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt { path: path.into(), reason: reason.into() }
    }
}
