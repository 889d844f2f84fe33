//! FlashForward scheduling: the state contract (anchors, chunks, windows, histories, stages),
//! schedules as generation graphs, K/V banks, executors, traces and a latency model.
//!
//! * [`contract`]: index sets of one generation ([`Contract`]).
//! * [`schedule`]: the five schedules as [`Graph`]s of forwards with read/publish sets.
//! * [`bank`]: anchor and stage K/V banks with host-side indices and their memory plan.
//! * [`exec`]: node placement on workers, and serial, wavefront, streaming and batched-diagonal
//!   executors over any graph.
//! * [`sim`]: the discrete-event replay of a placed graph (rounds, latency model).
//! * [`student`]: the exported student on disk (role folders and its manifest).
//! * [`trace`]: timelines, Chrome trace JSON and SVG wavefront charts.

#![warn(missing_docs)]

pub mod bank;
pub mod contract;
pub mod error;
pub mod exec;
pub mod schedule;
pub mod sim;
pub mod student;
pub mod trace;

pub use contract::{Contract, ContractConfig};
pub use error::{BankName, Result, SchedError};
pub use schedule::{Graph, ScheduleKind};
