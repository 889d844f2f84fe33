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
use ff_model::{AttentionBackend, FlowMatch, Role, WanDit};

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
    pub config: FlowMatchConfig,
}

impl<B: AutodiffBackend + AttentionBackend> Objective<B> for FlowMatchObjective
where
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> crate::Result<Loss<B>> {
        let device = model.device();
        let shape = clip.latents.shape.clone();
        let [c, l, h, w] = shape[..] else {
            return Err(TrainError::Config(format!("clip '{}': latents have shape {shape:?}, expected [C, L, h, w]", clip.caption)));
        };
        let sigma = FlowMatch::new(self.config.shift).shift_sigma(rng.uniform());
        let eps = Tensor::<B, 5>::from_data(rng.normal_data(vec![1, c, l, h, w]), &device);
        let x0 = Tensor::<B, 4>::from_data(clip.latents.clone(), &device).unsqueeze::<5>();
        let noisy = x0.clone() * (1.0 - sigma) + eps.clone() * sigma;
        let text = model.text_context(padded_prompt(model, &clip.prompt, &clip.caption)?.unsqueeze());
        let timesteps = vec![vec![FlowMatch::default().timestep(sigma); l]];
        let prediction = model.forward(noisy, &timesteps, &text, self.config.role)?;
        let total = (prediction - (eps - x0)).square().mean();
        Ok(Loss { total, parts: Vec::new() })
    }
}

/// A prompt embedding `[tokens, text_dim]` (of clip `what`, for errors) followed by zero rows up
/// to the model's `text_len`, as at inference.
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
    let device = model.device();
    let valid = Tensor::<B, 2>::from_data(prompt.clone(), &device);
    Ok(Tensor::cat(vec![valid, Tensor::from_data(TensorData::zeros::<f32, _>([len - tokens, dim]), &device)], 0))
}
