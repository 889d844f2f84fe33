//! Block-sparse flash attention in FlashAttention-2's work split: CubeCL forward with
//! log-sum-exp and the two-kernel backward, on tensor cores (`cmma`) where the runtime has them
//! (`tiles`, with the `cube` feature).
//!
//! Shapes: `q: [batch, heads, q_tokens, dim]`, `k, v: [batch, heads, k_tokens, dim]` in f32, f16
//! or bf16; `lse, delta: [batch, heads, q_tokens]` in f32. A [`BlockTable`](crate::BlockTable) is
//! flattened on the host into tile lists ([`plan::TilePlan`], uploaded once per table and device);
//! each kernel visits only the allowed
//! key (or query) ranges, so masked blocks cost nothing and no mask is ever read. Softmax scale
//! `1/sqrt(dim)`. [`layouts`] holds the frame rules the kernel tests and `bench attention` use.

pub mod layouts;
pub mod plan;

#[cfg(feature = "cube")]
mod backward;
#[cfg(feature = "emit-cuda")]
pub mod emit;
#[cfg(feature = "cube")]
mod forward;
#[cfg(feature = "cube")]
mod launch;
#[cfg(feature = "cube")]
mod mma;
#[cfg(feature = "cube")]
mod stage;
#[cfg(feature = "cube")]
pub mod tiles;

#[cfg(feature = "cube")]
pub use launch::{Forward, Gradients, backward, forward, has_float_atomics};
