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
    /// A contract, placement or cost model that cannot run; the message names the setting
    /// (e.g. "stages S = 0", "W_ctx").
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A schedule name none of [`ScheduleKind`](crate::ScheduleKind)'s.
    #[error("unknown schedule '{0}' (expected one of: flashforward, self-forcing, hiar, n-c-causal-rcm, bidirectional)")]
    UnknownSchedule(String),
    /// A graph that breaks a rule (a read nothing earlier publishes, a key published twice, a
    /// malformed graph file); the message names the node or key.
    #[error("invalid generation graph: {0}")]
    Graph(String),
    /// A bank entry read before any node published it.
    #[error("{bank}: entry {index} read before it was published")]
    NotPublished {
        /// The bank read.
        bank: BankName,
        /// The anchor or chunk index read.
        index: usize,
    },
    /// A bank entry already overwritten by a later one in its ring slot.
    #[error("{bank}: entry {index} was evicted (slot now holds {holder}); capacity {capacity} is too small")]
    Evicted {
        /// The bank read.
        bank: BankName,
        /// The anchor or chunk index read.
        index: usize,
        /// The index whose entry holds the slot now.
        holder: usize,
        /// The bank's capacity in entries.
        capacity: usize,
    },
    /// An access to a bank of no capacity (one the worker's bank plan gives it no slots in).
    #[error("{bank}: entry {index} is out of range (size {size})")]
    OutOfRange {
        /// The bank accessed.
        bank: BankName,
        /// The anchor or chunk index.
        index: usize,
        /// The bank's capacity in entries.
        size: usize,
    },
    /// A model forward of a node failed.
    #[error("node {node}: {source}")]
    Model {
        /// The node whose forward failed.
        node: usize,
        /// The model's error.
        source: ModelError,
    },
    /// A worker stopped because a link to another worker closed (that worker failed first).
    #[error("worker {worker}: stopped because another worker failed")]
    PeerStopped {
        /// The worker that stopped.
        worker: usize,
    },
    /// A worker failed outside a forward (it panicked, its thread pool did not start, a batch or
    /// an input did not fit).
    #[error("worker {worker}: {reason}")]
    Worker {
        /// The worker that failed.
        worker: usize,
        /// What went wrong.
        reason: String,
    },
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A model file (a student's role weights, a manifest write) failed; the error names the file.
    #[error("{0}")]
    File(#[from] ModelError),
}

/// Result alias of the scheduling crate.
pub type Result<T> = std::result::Result<T, SchedError>;
