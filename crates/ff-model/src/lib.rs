//! FlashForward model crate: the Wan2.1 DiT backbone with planner/renderer roles and LoRA, the Wan
//! VAE, the umT5 text encoder, checkpoint loading and the flow-matching noise math.
//!
//! Everything is generic over Burn's `B: Backend`; tests run on NdArray (f32).

#![warn(missing_docs)]

pub mod error;
#[cfg(any(test, feature = "fixture"))]
pub mod fixture;
pub mod flow;
pub mod io;
pub mod load;
pub mod text;
pub mod vae;

pub use error::{ModelError, Result};
pub use flow::FlowMatch;
pub mod dit;
pub mod lora;

pub use dit::{DitConfig, WanDit};
pub use kernels_cubecl::AttentionBackend;
pub use lora::{LoraConfig, Role};
