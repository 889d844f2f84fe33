//! Training data: latent clips (VAE latents plus the prompt embedding of their caption), their
//! time-rebased crops encoded from their own frames ([`encode_crops`]), their datasets on disk
//! ([`shards`]: safetensors shards and a JSON manifest), the captions file that
//! `encode-videos` reads, and a deterministic sampler whose [`Cursor`] is saved in checkpoints.

mod captions;
mod clip;
mod crops;
pub mod shards;
#[cfg(test)]
pub(crate) mod test_dir;

pub use captions::{CaptionedVideo, read_captions};
pub use clip::{ClipSource, Cursor, InMemoryClips, LatentClip, Sampler};
pub use crops::encode_crops;
pub use shards::{ShardDataset, ShardWriter};
