//! Training data: latent clips (VAE latents plus the prompt embedding of their caption) and a
//! deterministic sampler whose [`Cursor`] is saved in checkpoints.

mod clip;

pub use clip::{ClipSource, Cursor, InMemoryClips, LatentClip, Sampler};
