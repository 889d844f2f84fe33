//! Phase 1: packed time-rebased supervised fine-tuning (paper Sec. 3.2, Alg. 2, App. C.1).
//!
//! One training clip becomes one packed sequence ([`PackedLayout`]) in which the planner and the
//! renderer are trained together under the inference contract's reads (`ff_sched::Contract`):
//! noised planner inputs of every anchor block over clean copies of the earlier blocks, noised
//! renderer chunks over `H` same-σ predecessor chunks and the clean anchors of `Γ(i)`, plus
//! time-rebased crops that give the sparse planner more targets. [`SftObjective`] draws σ, ε and
//! the crop offsets, runs one `forward_packed`, and returns the grouped velocity loss.

mod config;
mod layout;
mod loss;
mod objective;
mod pack;
#[cfg(test)]
mod tests;

pub use config::SftConfig;
pub use layout::{FrameKind, Group, PackedFrame, PackedLayout, SequenceFrames};
pub use loss::grouped_loss;
pub use objective::SftObjective;
pub use pack::{Draw, Packed, crops_cover, pack};
