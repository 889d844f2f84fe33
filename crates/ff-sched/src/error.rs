//! Typed errors of the scheduling crate. Every variant names the flag, node, bank or index at fault.

use ff_model::ModelError;

/// Which K/V bank an entry lives in (for error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BankName {
    /// Clean anchor K/V, indexed by anchor index.
    Anchor,
    /// Chunk history bank `bank` (FlashForward: stage `bank`), indexed by chunk.
    History(usize),
}

impl std::fmt::Display for BankName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anchor => write!(f, "anchor bank"),
            Self::History(b) => write!(f, "history bank {b}"),
        }
    }
}

/// Errors raised while planning, simulating or executing a schedule.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("unknown schedule '{0}' (expected one of: flashforward, self-forcing, hiar, n-c-causal-rcm, bidirectional)")]
    UnknownSchedule(String),
    #[error("invalid generation graph: {0}")]
    Graph(String),
    #[error("{bank}: entry {index} read before it was published")]
    NotPublished { bank: BankName, index: usize },
    #[error("{bank}: entry {index} was evicted (slot now holds {holder}); capacity {capacity} is too small")]
    Evicted { bank: BankName, index: usize, holder: usize, capacity: usize },
    #[error("{bank}: entry {index} is out of range (size {size})")]
    OutOfRange { bank: BankName, index: usize, size: usize },
    #[error("node {node}: {source}")]
    Model { node: usize, source: ModelError },
    #[error("worker {worker}: stopped because another worker failed")]
    PeerStopped { worker: usize },
    #[error("worker {worker}: {reason}")]
    Worker { worker: usize, reason: String },
    #[error("{path}: {source}")]
    Io { path: std::path::PathBuf, source: std::io::Error },
    /// A model file (a student's role weights, a manifest write) failed; the error names the file.
    #[error("{0}")]
    File(#[from] ModelError),
}

/// Result alias of the scheduling crate.
pub type Result<T> = std::result::Result<T, SchedError>;
