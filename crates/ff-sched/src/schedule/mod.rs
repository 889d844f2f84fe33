//! Schedules as generation graphs ([`Graph`]): which forwards run, what each reads and publishes,
//! and the dependencies between them (docs/ARCHITECTURE.md §5).
//!
//! | schedule | chunk i at stage k reads | cache-update-only forwards |
//! | --- | --- | --- |
//! | `flashforward` | Γ(i) clean anchors + stage-k K/V of chunks i−H..i−1 | planner: 1 per block |
//! | `self-forcing` | clean re-encoded K/V of the chunks in W_ctx | 1 per chunk but the last |
//! | `hiar` | predecessors re-encoded at the next level, per stage | S per chunk but the last |
//! | `n-c-causal-rcm` | K/V of earlier chunks' final-stage forwards | 0 (serial) |
//! | `bidirectional` | nothing: whole clip per forward | 0 |
//!
//! Other contracts: a [`GraphBuilder`] with [`GraphBuilder::planner`] and
//! [`GraphBuilder::rollout`] under a [`Rule`] (anchor window `Γ`, history source and length), or
//! single forwards with [`GraphBuilder::push`]. A [`Graph`] serialises to JSON (serde) and to
//! Graphviz DOT ([`Graph::to_dot`]).

mod build;
mod dot;
mod file;
mod graph;

pub use build::{AnchorWindow, HistorySource, Rule};
pub use graph::{Counts, Graph, GraphBuilder, KvKey, Node, NodeId, NodeKind, NodeSpec, Unit};

use crate::contract::Contract;
use crate::error::{Result, SchedError};

/// The schedules the crate can build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScheduleKind {
    FlashForward,
    SelfForcing,
    Hiar,
    NcCausalRcm,
    Bidirectional,
}

impl ScheduleKind {
    pub const ALL: [ScheduleKind; 5] = [Self::FlashForward, Self::SelfForcing, Self::Hiar, Self::NcCausalRcm, Self::Bidirectional];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::FlashForward => "flashforward",
            Self::SelfForcing => "self-forcing",
            Self::Hiar => "hiar",
            Self::NcCausalRcm => "n-c-causal-rcm",
            Self::Bidirectional => "bidirectional",
        }
    }

    /// Builds this schedule's generation graph over `contract`.
    pub fn build(self, contract: &Contract) -> Result<Graph> {
        build::build(self, contract)
    }
}

impl std::str::FromStr for ScheduleKind {
    type Err = SchedError;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| SchedError::UnknownSchedule(s.to_string()))
    }
}

impl std::fmt::Display for ScheduleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests;
