//! [`FlowMatchObjective`]: the plain flow-matching loss on whole clips. One σ per clip from the
//! shifted schedule, `x_σ = (1 − σ)·x0 + σ·ε`, and the mean squared error between the predicted
//! velocity and `v = ε − x0`, with full attention over the clip's frames at positions `0..L`,
//! every frame in one role. It is the denoising loss of a bidirectional score network (Phase 2's
//! critic trains on it) and the objective of the engine's end-to-end tests.
//!
//! Shapes: clip latents `[C, L, h, w]`, prompt `[tokens ≤ text_len, text_dim]` (zero-padded to the
//! model's `text_len`, as at inference).

use crate::TrainError; // not `Result`: the `Config` derive expands to code that uses std's
use crate::data::LatentClip;
use crate::objective::{Loss, Objective};
use crate::rng::TrainRng;
use burn::config::Config;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use ff_model::text::PromptEmbedding;
use ff_model::{AttentionBackend, FlowMatch, Role, WanDit};

/// The numbers of [`FlowMatchObjective`].
#[derive(Config, Debug, PartialEq)]
pub struct FlowMatchConfig {
    /// Timestep shift of the σ schedule: σ = shift·u / (1 + (shift − 1)·u), u uniform in [0, 1).
    #[config(default = 5.0)]
    pub shift: f64,
    /// The role every frame plays (its adapters and role vector train).
    #[config(default = "Role::Renderer")]
    pub role: Role,
}

/// The flow-matching objective of a [`FlowMatchConfig`].
#[derive(Clone, Debug)]
pub struct FlowMatchObjective {
    /// Its σ shift and role.
    pub config: FlowMatchConfig,
}

impl FlowMatchObjective {
    /// The losses of `clips` as one batched forward, clip `i` conditioned on `prompts[i]` (its own
    /// prompt, or the teacher's empty prompt) with σ and noise drawn from `rngs[i]` as
    /// [`Objective::loss`] draws them. The clips must share one latent shape.
    pub(crate) fn batched<B: AutodiffBackend + AttentionBackend>(
        &self,
        model: &WanDit<B>,
        clips: &[&LatentClip],
        prompts: &[&TensorData],
        rngs: &mut [TrainRng],
    ) -> crate::Result<Vec<Loss<B>>>
    where
        B::InnerBackend: AttentionBackend,
    {
        let device = model.device();
        let Some(first) = clips.first() else { return Ok(Vec::new()) };
        let shape = first.latents.shape.clone();
        let [c, l, h, w] = shape[..] else {
            return Err(TrainError::Config(format!("clip '{}': latents have shape {shape:?}, expected [C, L, h, w]", first.caption)));
        };
        let (mut x0, mut eps, mut sigmas, mut text, mut timesteps) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((clip, prompt), rng) in clips.iter().zip(prompts).zip(rngs.iter_mut()) {
            if clip.latents.shape != shape {
                return Err(TrainError::Config(format!(
                    "clip '{}': latents have shape {:?}, the micro-batch's first clip {shape:?}",
                    clip.caption, clip.latents.shape
                )));
            }
            let sigma = FlowMatch::new(self.config.shift).shift_sigma(rng.uniform());
            eps.push(Tensor::<B, 5>::from_data(rng.normal_data(vec![1, c, l, h, w]), &device));
            x0.push(Tensor::<B, 4>::from_data(clip.latents.clone(), &device).unsqueeze::<5>());
            text.push(padded_prompt(model, prompt, &clip.caption)?.unsqueeze::<3>());
            timesteps.push(vec![FlowMatch::default().timestep(sigma); l]);
            sigmas.push(sigma as f32);
        }
        let n = clips.len();
        let (x0, eps) = (Tensor::cat(x0, 0), Tensor::cat(eps, 0));
        let sigma = Tensor::<B, 1>::from_data(TensorData::new(sigmas, [n]), &device).reshape([n, 1, 1, 1, 1]);
        let noisy = x0.clone() * (sigma.clone().neg() + 1.0) + eps.clone() * sigma;
        let prediction = model.forward(noisy, &timesteps, &model.text_context(Tensor::cat(text, 0)), self.config.role)?;
        let per_clip: Tensor<B, 1> = (prediction - (eps - x0)).square().reshape([n as i32, -1]).mean_dim(1).reshape([n]);
        Ok((0..n).map(|i| Loss { total: per_clip.clone().narrow(0, i, 1), parts: Vec::new() }).collect())
    }
}

impl<B: AutodiffBackend + AttentionBackend> Objective<B> for FlowMatchObjective
where
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> crate::Result<Loss<B>> {
        Ok(self.batched(model, &[clip], &[&clip.prompt], std::slice::from_mut(rng))?.remove(0))
    }

    /// One batched forward when the clips share a latent shape, else clip by clip.
    fn losses(&self, model: &WanDit<B>, clips: &[&LatentClip], rngs: &mut [TrainRng]) -> crate::Result<Vec<Loss<B>>> {
        if clips.iter().any(|c| c.latents.shape != clips[0].latents.shape) {
            return clips.iter().zip(rngs).map(|(clip, rng)| self.loss(model, clip, rng)).collect();
        }
        let prompts: Vec<&TensorData> = clips.iter().map(|c| &c.prompt).collect();
        self.batched(model, clips, &prompts, rngs)
    }
}

/// A prompt embedding `[tokens, text_dim]` (of clip `what`, for errors) followed by zero rows up
/// to the model's `text_len`: the context every objective conditions on, built by the same
/// [`PromptEmbedding::context_of`] as `generate`'s (cross-attention has no key mask, so the
/// padding rows are part of the conditioning).
pub(crate) fn padded_prompt<B: AttentionBackend>(model: &WanDit<B>, prompt: &TensorData, what: &str) -> crate::Result<Tensor<B, 2>> {
    let [tokens, dim] = prompt.shape[..] else {
        return Err(TrainError::Config(format!("clip '{what}': prompt has shape {:?}, expected [tokens, dim]", prompt.shape)));
    };
    let len = model.config().text_len;
    if tokens > len || dim != model.config().text_dim {
        return Err(TrainError::Config(format!(
            "clip '{what}': prompt embedding [{tokens}, {dim}] does not fit the DiT's context [{len}, {}]",
            model.config().text_dim
        )));
    }
    Ok(PromptEmbedding::context_of(prompt, len, &model.device())?)
}
