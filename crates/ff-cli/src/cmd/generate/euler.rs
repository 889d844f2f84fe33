//! `generate --schedule bidirectional --steps N [--guidance G]`: the teacher's many-step sampler.
//! The whole clip is denoised at once with full attention by `N` Euler steps of
//! `ff_model::flow::EulerSampler` (no re-noising between steps, unlike `--stages`, the few-step
//! students' stages), each step guided against the empty prompt with `ff_model::flow::cfg`: two
//! forwards per step (unconditional, conditional), one when `G = 1` (no guidance). The clean
//! latents are then decoded in one call of the streaming VAE decoder. A model with roles samples
//! with its renderer.

use anyhow::{Context, Result};
use burn::tensor::{Distribution, Tensor};
use ff_model::dit::TextContext;
use ff_model::flow::{EulerSampler, cfg};
use ff_model::text::PromptEmbedding;
use ff_model::vae::WanVae;
use ff_model::{AttentionBackend, Role, WanDit};
use ff_train::checkpoint::ServedDit;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::pipeline::Job;
use crate::video::{VideoSink, frames_from_tensor_data};

/// What a guided generation needs besides the files of [`Job`].
pub struct Guided<'a> {
    pub job: &'a Job<'a>,
    pub steps: usize,
    /// Shift of the Euler σ grid.
    pub shift: f64,
    pub guidance: f64,
    pub latents: usize,
    pub prompt: &'a PromptEmbedding,
    /// The empty prompt's embedding; read only when `guidance != 1`.
    pub empty: &'a PromptEmbedding,
}

/// What the run reports.
pub struct Outcome {
    pub video: PathBuf,
    pub frames: usize,
    pub forwards: usize,
    pub load: Duration,
    pub denoise: Duration,
}

/// The guided Euler steps of `sampler` on `model` from `noise` (`[1, C, L, h, w]`); returns the
/// clean latents and the number of DiT forwards run.
pub fn sample<B: AttentionBackend>(
    model: &WanDit<B>,
    noise: Tensor<B, 5>,
    sampler: &EulerSampler,
    guidance: f64,
    conditional: &TextContext<B>,
    unconditional: &TextContext<B>,
) -> Result<(Tensor<B, 5>, usize)> {
    let frames = noise.dims()[2];
    let mut forwards = 0;
    let mut forward = |x: Tensor<B, 5>, t: f64, text: &TextContext<B>| {
        forwards += 1;
        model.forward(x, &[vec![t; frames]], text, Role::Base)
    };
    let latents = sampler.sample(noise, |x, t| {
        let c = forward(x.clone(), t, conditional)?;
        if guidance == 1.0 {
            return Ok(c);
        }
        Ok::<_, ff_model::ModelError>(cfg(forward(x, t, unconditional)?, c, guidance))
    })?;
    Ok((latents, forwards))
}

/// Loads the DiT (a role model serves its renderer) and the VAE, samples, decodes into `sink`.
pub fn generate<B: AttentionBackend>(run: &Guided, device: &B::Device, mut sink: VideoSink) -> Result<Outcome> {
    let job = run.job;
    let start = Instant::now();
    let dit = ff_train::checkpoint::load_served::<B>(job.dit_config, job.dit, device)
        .with_context(|| format!("cannot load the DiT from {}", job.dit.display()))?;
    let dit = match dit {
        ServedDit::One(dit) if dit.role_embedding.is_some() => dit.merge(Role::Renderer),
        ServedDit::One(dit) => *dit,
        ServedDit::Roles { renderer, .. } => *renderer,
    };
    let vae =
        WanVae::<B>::load(job.vae, job.vae_config, device).with_context(|| format!("cannot load the VAE from {}", job.vae.display()))?;
    let context = |p: &PromptEmbedding| -> Result<TextContext<B>> {
        Ok(dit.text_context(p.to_context::<B>(job.dit_config.text_len, device)?.unsqueeze()))
    };
    let conditional = context(run.prompt)?;
    let unconditional = if run.guidance == 1.0 { conditional.clone() } else { context(run.empty)? };
    let load = start.elapsed();

    let start = Instant::now();
    let [h, w] = job.latent_size;
    B::seed(device, job.seed);
    let noise = Tensor::<B, 5>::random([1, job.dit_config.in_channels, run.latents, h, w], Distribution::Normal(0.0, 1.0), device);
    let sampler = EulerSampler::new(run.steps, run.shift);
    let (latents, forwards) = sample(&dit, noise, &sampler, run.guidance, &conditional, &unconditional)?;
    let denoise = start.elapsed();
    let video = vae.stream_decoder().decode_chunk(vae.denormalize(latents))?;
    let frames = frames_from_tensor_data(video.into_data())?;
    sink.push_frames(&frames)?;
    Ok(Outcome { video: sink.finish()?, frames: frames.len(), forwards, load, denoise })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use ff_model::DitConfig;

    #[test]
    fn forwards_are_two_per_step_with_guidance_and_one_without() {
        let device = Default::default();
        let model = DitConfig { num_layers: 1, ..DitConfig::tiny().with_text_len(4) }.init::<NdArray>(&device);
        let text = |v: f32| model.text_context(Tensor::full([1, 4, 24], v, &device));
        let (c, u) = (text(1.0), text(-1.0));
        let noise = || Tensor::<NdArray, 5>::random([1, 16, 2, 2, 2], Distribution::Normal(0.0, 1.0), &device);
        let x = noise();
        let sampler = EulerSampler::new(3, 5.0);
        let (guided, n) = sample(&model, x.clone(), &sampler, 3.0, &c, &u).unwrap();
        assert_eq!(n, 6);
        let (plain, n) = sample(&model, x.clone(), &sampler, 1.0, &c, &u).unwrap();
        assert_eq!(n, 3);
        // g = 1 reads only the conditional prompt: the same as guiding a prompt against itself
        let (same, _) = sample(&model, x, &sampler, 3.0, &c, &c).unwrap();
        assert!((plain.clone() - same).abs().max().into_scalar() < 1e-4);
        assert!((plain - guided).abs().max().into_scalar() > 1e-4, "guidance changes the sample");
    }
}
