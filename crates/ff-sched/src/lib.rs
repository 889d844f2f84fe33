//! FlashForward scheduling: the state contract (anchors, chunks, windows, histories, stages),
//! schedules as generation graphs, K/V banks, executors, traces and a latency model.

pub mod contract;
pub mod error;

pub use contract::{Contract, ContractConfig};
pub use error::{BankName, Result, SchedError};
