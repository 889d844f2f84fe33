//! Training data: latent clips (VAE latents plus the prompt embedding of their caption), their
//! datasets on disk ([`shards`]: safetensors shards and a JSON manifest), the captions file that
//! `encode-videos` reads, and a deterministic sampler whose [`Cursor`] is saved in checkpoints.

mod captions;
mod clip;
pub mod shards;
#[cfg(test)]
pub(crate) mod test_dir;

pub use captions::{CaptionedVideo, read_captions};
pub use clip::{ClipSource, Cursor, InMemoryClips, LatentClip, Sampler};
pub use shards::{ShardDataset, ShardWriter};
