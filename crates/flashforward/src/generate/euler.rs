//! The teacher's many-step sampler (`generate --schedule bidirectional --steps N [--guidance G]`).
//! The whole clip is denoised at once with full attention by `N` Euler steps of
//! `ff_model::flow::EulerSampler` (no re-noising between steps, unlike `--stages`, the few-step
//! students' stages), each step guided against the empty prompt with `ff_model::flow::cfg`: two
//! forwards per step (unconditional, conditional), one when `G = 1` (no guidance). The clean
//! latents are then decoded in one call of the streaming VAE decoder. A model with roles samples
//! with its renderer.

use std::ops::ControlFlow;
use std::time::Instant;

use burn::tensor::{Distribution, Tensor};
use ff_model::dit::TextContext;
use ff_model::flow::{EulerSampler, cfg};
use ff_model::{AttentionBackend, Role, WanDit};

use super::{Chunk, Outcome, Run, ServedDit};
use crate::error::Result;
use crate::video::frames_from_tensor_data;

/// The guided Euler steps of `sampler` on `model` from `noise` (`[1, C, L, h, w]`); returns the
/// clean latents and the number of DiT forwards run.
fn sample<B: AttentionBackend>(
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

/// Samples with the DiT (a model with roles, or a student, samples with its renderer), decodes
/// the clip in one call and hands it over as one chunk.
pub(super) fn generate<B: AttentionBackend>(run: &Run<B>, mut on_chunk: impl FnMut(Chunk) -> ControlFlow<()>) -> Result<Outcome> {
    let teacher = run.request.teacher.expect("the teacher sampler was asked for");
    let device = &run.pipe.devices[0];
    let dit = match &run.pipe.dit {
        ServedDit::One(dit) if dit.role_embedding.is_some() => dit.merge(Role::Renderer),
        ServedDit::One(dit) => (**dit).clone(),
        ServedDit::Roles { renderer, .. } => (**renderer).clone(),
    };
    let conditional = dit.text_context(run.context(run.prompt, device)?);
    let unconditional = match run.negative {
        Some(negative) if teacher.guidance != 1.0 => dit.text_context(run.context(negative, device)?),
        _ => conditional.clone(),
    };
    let start = Instant::now();
    let [h, w] = run.plan.latent_size;
    B::seed(device, run.request.seed);
    let shape = [1, run.pipe.model.configs.dit.in_channels, run.plan.length.latents, h, w];
    let noise = Tensor::<B, 5>::random(shape, Distribution::Normal(0.0, 1.0), device);
    let sampler = EulerSampler::new(teacher.steps, teacher.shift);
    let (latents, forwards) = sample(&dit, noise, &sampler, teacher.guidance, &conditional, &unconditional)?;
    let denoise = start.elapsed();
    let vae = &run.pipe.vae;
    let video = vae.stream_decoder().decode_chunk(vae.denormalize(latents))?;
    let frames = frames_from_tensor_data(video.into_data())?;
    let elapsed = start.elapsed();
    let latents = 0..run.plan.length.latents;
    let prompt = &run.plan.prompt;
    let stopped = on_chunk(Chunk { index: 0, chunks: 1, frames: &frames, first_frame: 0, latents, prompt, elapsed })
        .is_break()
        .then(|| "stopped by the caller".to_string());
    Ok(Outcome { frames: frames.len(), denoise, first_frames: Some(elapsed), total: elapsed, forwards, stopped, ..Default::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::Tensor;
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
