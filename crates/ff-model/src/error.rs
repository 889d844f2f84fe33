//! Typed errors of the model crate. Every variant names the file, key, shape or field at fault.

use std::path::PathBuf;

/// Errors raised while configuring, loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A JSON file (a config, a shard index, a tokenizer) that does not parse.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// A file whose contents are malformed, truncated or of an unknown format.
    #[error("{path}: corrupt or truncated file: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A checkpoint tensor of a dtype the loader does not read (it reads f32, f16, bf16, f64).
    #[error("{path}: tensor '{key}' has unsupported dtype {dtype}")]
    UnsupportedDtype {
        /// The file holding the tensor.
        path: PathBuf,
        /// The tensor's key in the file.
        key: String,
        /// The dtype found.
        dtype: String,
    },
    /// Model parameters the checkpoint does not provide.
    #[error("{path}: {} missing key(s): {}", keys.len(), keys.join(", "))]
    MissingKeys {
        /// The checkpoint as the caller named it.
        path: PathBuf,
        /// The missing parameters' paths in the module.
        keys: Vec<String>,
    },
    /// Checkpoint tensors the model has no parameter for.
    #[error("{path}: {} unexpected key(s) (not used by the model): {}", keys.len(), keys.join(", "))]
    UnexpectedKeys {
        /// The first file holding one of them.
        path: PathBuf,
        /// The tensors' keys as written in the files.
        keys: Vec<String>,
    },
    /// A safetensors header entry whose byte size overflows a u64.
    #[error("{path}: tensor '{key}' of {dtype} {shape:?} has more bytes than a u64 counts (hostile header?)")]
    TensorTooLarge {
        /// The file.
        path: PathBuf,
        /// The tensor's key.
        key: String,
        /// Its declared dtype.
        dtype: String,
        /// Its declared shape.
        shape: Vec<usize>,
    },
    /// A checkpoint tensor whose shape differs from its parameter's.
    #[error("{path}: tensor '{key}' has shape {found:?}, the model expects {expected:?}")]
    ShapeMismatch {
        /// The file holding the tensor.
        path: PathBuf,
        /// The tensor's key in the file.
        key: String,
        /// The parameter's shape.
        expected: Vec<usize>,
        /// The tensor's shape in the file.
        found: Vec<usize>,
    },
    /// A tensor that could not be applied to the model (e.g. two keys mapping onto one
    /// parameter).
    #[error("{path}: tensor '{key}' could not be loaded: {reason}")]
    Load {
        /// The file, or the checkpoint as the caller named it.
        path: PathBuf,
        /// The tensor's key (empty when the failure names no single tensor).
        key: String,
        /// What went wrong.
        reason: String,
    },
    /// A tensor a reader asked for by name that the file does not hold.
    #[error("{path}: no tensor named '{key}'")]
    NoSuchTensor {
        /// The file.
        path: PathBuf,
        /// The key asked for.
        key: String,
    },
    /// A configuration the model cannot be built from; the message names the field.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An input of the wrong shape or content for the model (the message names the input and
    /// the shape expected).
    #[error("invalid input: {0}")]
    Input(String),
    /// A context-parallel forward whose shards could not exchange K/V (a peer stopped; the
    /// message names the shard and layer).
    #[error("context-parallel exchange: {0}")]
    Parallel(String),
    /// A tokenizer that could not be loaded or built, or a prompt it could not tokenize.
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
