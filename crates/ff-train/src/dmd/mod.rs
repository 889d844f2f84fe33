//! Phase 2: self-rollout distribution-matching distillation (paper Sec. 3.2, Alg. 3, App. C.2).
//!
//! The student rolls out on its own context ([`rollout`]: planner anchor blocks, then one packed
//! renderer forward per stage, gradients kept only at a random exit stage `k*`); the frozen
//! teacher and a LoRA critic score its x̂₀ in windows of `W_score` latents ([`scores`]: tiles and
//! detached image heads); the generator follows the DMD gradient and the critic learns the
//! student's distribution by flow matching ([`loss`], [`objective`]), alternating 1:5 on the
//! shared engine ([`DmdTrainer`]). [`DmdConfig`] holds every number, with the paper's defaults
//! and the conventions chosen where it is silent.

mod config;
pub mod loss;
pub mod objective;
pub mod rollout;
pub mod scores;
#[cfg(test)]
pub(crate) mod tests;
mod trainer;

pub use config::DmdConfig;
pub use objective::{CriticObjective, DmdShared, GeneratorObjective};
pub use rollout::rollout_seed;
pub use trainer::{CRITIC_DIR, DMD_FILE, DmdReport, DmdTrainer};
