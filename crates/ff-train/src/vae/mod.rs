//! Training the codec: the Wan VAE as a β-VAE on RGB clips of the small world.
//!
//! * [`data`]: [`VideoClip`] (`[N, 3, T, H, W]` f32 in `[-1, 1]` on the host) and [`WorldClips`], a
//!   dataset rendered on the fly from scene seeds (no files: every index is a fresh scene and
//!   time window, so the codec never sees the same clip twice in a run; held-out seeds are a
//!   disjoint range).
//! * [`loss`]: reconstruction (mean absolute plus mean squared error) and the KL divergence of
//!   the diagonal Gaussian posterior from N(0, I).
//! * [`with_initial_logvar`]: a narrow initial posterior, so the first steps' latents carry signal.
//! * [`inflate_time`]: a codec trained on single frames as the starting point of video training.
//! * [`interpolate_time`]: a decoder whose time upsampling holds frames made to blend latents.
//! * [`perturb_latents`]: latents moved by noise in the scale a generator samples in.
//! * [`VaeObjective`]: encode → reparameterised sample (→ latent noise) → decode (unclamped) →
//!   weighted loss.
//! * [`eval`]: PSNR of the full and the streaming decode of a clip.
//! * [`section`]: a codec run's `[vae]` config, engine defaults and starting codec.
//! * [`export`]: a trained codec as a diffusers VAE folder, with measured latent statistics.

pub mod data;
pub mod eval;
pub mod export;
mod init;
pub mod loss;
mod noise;
mod objective;
pub mod section;
#[cfg(test)]
mod tests;

pub use data::{VideoClip, WorldClips, WorldClipsConfig};
pub use eval::{Reconstruction, psnr, reconstruct};
pub use init::{inflate_time, interpolate_time, with_initial_logvar};
pub use noise::perturb_latents;
pub use objective::{VaeObjective, VaeObjectiveConfig};
pub use section::{VaeSection, start_codec, starting_codec, train_defaults};
