//! The Wan2.1 VAE (diffusers `AutoencoderKLWan`), backend-generic: video `[B, 3, T, H, W]` in
//! `[-1, 1]` <-> latents `[B, 16, 1+(T−1)/4, H/8, W/8]`, causal in time so that latents decode a
//! few frames at a time ([`VaeStreamDecoder`]) exactly as in one pass.
//!
//! Layout: [`config`] (hyper-parameters, presets, diffusers JSON), [`conv`] (causal 3-D conv),
//! [`norm`], [`blocks`] (residual / attention / middle), [`resample`], [`encoder`], [`decoder`],
//! [`model`] (the VAE and its API), [`stream`], [`load`] (both checkpoint layouts). Parity with
//! diffusers is checked by `crate::fixture`.

pub mod blocks;
mod cache;
pub mod config;
pub mod conv;
pub mod decoder;
pub mod encoder;
pub mod load;
pub mod model;
pub mod norm;
pub mod resample;
pub mod stream;

#[cfg(test)]
mod tests;

pub use config::WanVaeConfig;
pub use load::VaeLayout;
pub use model::WanVae;
pub use stream::VaeStreamDecoder;
