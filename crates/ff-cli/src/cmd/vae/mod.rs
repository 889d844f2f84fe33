//! `flashforward vae`: the small world's codec after training. `export` writes a run's EMA
//! weights as a diffusers VAE folder with measured latent statistics; `eval` reports the
//! reconstruction PSNR (full and streaming decode) of a VAE folder on held-out clips.

pub mod eval;
pub mod export;

command_group! {
    /// Write the EMA weights of a `train vae` run's newest checkpoint as `config.json` +
    /// `diffusion_pytorch_model.safetensors`, with latents_mean/std measured on held-out clips.
    Export => export,
    /// Reconstruction PSNR of a VAE folder on held-out clips of the small world.
    Eval => eval,
}
