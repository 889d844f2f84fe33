//! The Wan2.1 T2V diffusion transformer: one model for every role and schedule. Which K/V a
//! forward reads is a parameter ([`KvContext`] or a packed [`SegmentMask`]), never a fork of the
//! model.

mod attention;
mod block;
mod config;
mod embed;
mod kv;
mod layout;
mod load;
mod model;
mod parallel;
mod rope;
#[cfg(test)]
mod tests;
mod training;
mod window;

pub use crate::lora::Role;
pub use attention::{CrossAttention, SelfAttention};
pub use block::{DitBlock, Head};
pub use config::DitConfig;
pub use embed::{Mlp, PatchEmbed, sinusoidal};
pub use kv::{ChunkKv, Keys, KvContext, LayerKv, SegmentContext, TextContext};
pub use layout::{FrameLayout, SegmentMask};
pub use load::{DIT_KEY_RULES, dit_key_remap};
pub use model::{ChunkOutput, WanDit};
pub use parallel::{KvExchange, Shard, ShardReads, ThreadGather, context_parallel, shard_frames};
pub use rope::{Rope, RopeTable};
pub use training::is_f32_island;
pub use window::KvWindow;
