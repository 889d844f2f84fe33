//! `flashforward world`: the small world's data. [`clips`] writes a dataset of MP4 clips and
//! captions, [`text`] the tokenizer and frozen text encoder of a model directory
//! (`crate::world_dir`), [`latents`] latent shards straight from the generator; `clips` and
//! `latents` draw the same [`scenes`].

mod clips;
mod latents;
mod scenes;
mod text;

command_group! {
    /// Write a dataset of the small world's procedural domain (MP4 clips and captions).
    Clips => clips,
    /// Write the small world's tokenizer and frozen tiny umT5 text encoder into a model directory.
    Text => text,
    /// Write latent shards of the small world's domain straight from the generator (no MP4s).
    Latents => latents,
}
