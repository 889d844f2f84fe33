//! Latent-clip datasets on disk: safetensors shards plus a JSON manifest.
//!
//! A dataset is one directory:
//!
//! ```text
//! DATA/
//!   manifest.json              every clip: caption, source video, L, frame size, shard and keys
//!   shard-00000.safetensors    the tensors of a group of clips
//!   shard-00001.safetensors
//!   ...
//! ```
//!
//! Each clip has two or three f32 tensors in its shard:
//!
//! * `clipNNNNNN.latents` `[16, L, h, w]`: the Wan VAE latent mean of the clip's
//!   `1 + 4(L − 1)` frames (16 FPS), normalised with the VAE's per-channel mean and std, i.e. the
//!   DiT's latent space (`h = H/8`, `w = W/8` for frames of `H × W` pixels);
//! * `clipNNNNNN.prompt` `[tokens, text_dim]`: the umT5 hidden states of the caption's valid
//!   tokens (`</s>` included, no padding), as in the prompt cache;
//! * optionally `clipNNNNNN.crops` `[L − L_c, 16, L_c, h, w]`: the time-rebased crops, crop `k`
//!   starting at clip latent `k + 1` and encoded from its own frames
//!   ([`encode_crops`](crate::data::encode_crops)); the manifest entry then has `crops_key` and
//!   `crops_shape`.
//!
//! `NNNNNN` is the clip's index in the manifest. `manifest.json` (see [`Manifest`]):
//!
//! ```json
//! {
//!   "format": "flashforward-latent-clips/1",
//!   "encoders": { "vae": "vae:diffusion_pytorch_model.safetensors:2687748", "text": "umt5:..." },
//!   "clips": [
//!     { "source": "fox.mp4", "caption": "a red fox runs in the snow", "latents": 21,
//!       "frame_size": [480, 832], "shard": "shard-00000.safetensors",
//!       "latents_key": "clip000000.latents", "latents_shape": [16, 21, 60, 104],
//!       "prompt_key": "clip000000.prompt", "prompt_shape": [9, 4096] }
//!   ]
//! }
//! ```
//!
//! `source` is the video's path relative to the videos directory; `frame_size` is `[H, W]`; the
//! `encoders` strings name the models that made the tensors, so a resumed run cannot mix two.
//!
//! Writing ([`ShardWriter`]): clips are buffered and written a shard at a time, each shard
//! atomically (temp file + rename), and after each shard the manifest is rewritten atomically.
//! A killed run therefore leaves a manifest that names only complete shards (a shard renamed just
//! before the kill is not named, and is overwritten by the next run); reopening the directory
//! resumes it. Reading ([`ShardDataset`]): `open` reads the manifest and every shard's header and
//! checks that each named shard, key, dtype and shape is there; `get` reads one clip's bytes.

mod manifest;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use manifest::{ClipEntry, Encoders, FORMAT, MANIFEST, Manifest};
pub use reader::ShardDataset;
pub use writer::ShardWriter;
