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
    /// Planner anchors plus stage-matched history, run as a wavefront (`flashforward`).
    FlashForward,
    /// Clean re-encoded history within W_ctx (`self-forcing`).
    SelfForcing,
    /// History re-encoded at the next noise level, per stage (`hiar`).
    Hiar,
    /// History from earlier chunks' final-stage forwards (`n-c-causal-rcm`).
    NcCausalRcm,
    /// The whole clip per forward with full attention (`bidirectional`).
    Bidirectional,
}

impl ScheduleKind {
    /// Every schedule, in the order of the table above.
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
    ///
    /// Forward counts at L = 81, S = 4 (paper A.2.2: `W_FF = N_P(S+1) + N_R·S`,
    /// `W_SF = N_C·S + (N_C−1)`, `W_HiAR = N_C·S + (N_C−1)·S`):
    ///
    /// ```
    /// use ff_sched::{Contract, ContractConfig, ScheduleKind};
    ///
    /// let contract = Contract::new(ContractConfig::new(81)).unwrap();
    /// let forwards = |k: ScheduleKind| k.build(&contract).unwrap().counts().forwards;
    /// assert_eq!(forwards(ScheduleKind::FlashForward), 123); // 3 blocks × 5 + 27 chunks × 4
    /// assert_eq!(forwards(ScheduleKind::SelfForcing), 134);
    /// assert_eq!(forwards(ScheduleKind::Hiar), 212);
    /// let ff = ScheduleKind::FlashForward.build(&contract).unwrap().counts();
    /// assert_eq!((ff.planner_forwards, ff.cache_update_forwards, ff.renderer_forwards), (15, 3, 108));
    /// assert_eq!("self-forcing".parse::<ScheduleKind>().unwrap(), ScheduleKind::SelfForcing);
    /// ```
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
