//! [`VaeObjective`]: the codec's loss on one stack of clips `x` (`[N, 3, T, H, W]`):
//! `(μ, log σ²) = encode(x)`, `z = μ + σ·ε` with ε from the clip's random stream,
//! optionally `z ← z + σ·std·ε'` with σ drawn uniformly in `[0, latent_noise]` per clip
//! ([`perturb_latents`]), `x̂ = decode(z)` without the output clamp, and
//! `loss = w₁·mean|x̂ − x| + w₂·mean(x̂ − x)² + β·mean KL(N(μ, σ²) ‖ N(0, 1))
//!        + w_t·mean|Δₜx̂ − Δₜx|` (the last, off by default, penalises errors that change from
//! one frame to the next: the jump a codec makes where one latent's frames meet the next's).

use super::data::VideoClip;
use super::loss::{kl_to_standard_normal, reconstruction, temporal_difference};
use super::noise::perturb_latents;
use crate::objective::{Loss, Objective};
use crate::{TrainError, TrainRng}; // not `Result`: the `Config` derive expands to code that uses std's
use burn::config::Config;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use ff_model::AttentionBackend;
use ff_model::vae::WanVae;

/// Weights of the loss terms.
#[derive(Config, Debug, PartialEq)]
pub struct VaeObjectiveConfig {
    /// Weight of the mean absolute error.
    #[config(default = 1.0)]
    pub l1_weight: f64,
    /// Weight of the mean squared error.
    #[config(default = 1.0)]
    pub mse_weight: f64,
    /// β: weight of the KL term (a mean over latent elements).
    #[config(default = 1e-4)]
    pub kl_weight: f64,
    /// Weight of the mean absolute error of the frame-to-frame change (0: no term).
    #[config(default = 0.0)]
    pub temporal_weight: f64,
    /// Largest σ of the noise added to the decoder's input latents, in units of the codec's
    /// `latents_std` (a generator's normalised scale); each clip draws σ uniformly in
    /// `[0, latent_noise]`. 0: none. For a decoder trained to read a generator's latents.
    #[config(default = 0.0)]
    pub latent_noise: f64,
}

/// The codec's reconstruction + β·KL objective.
#[derive(Clone, Debug)]
pub struct VaeObjective {
    /// The loss weights and latent noise.
    pub config: VaeObjectiveConfig,
}

impl VaeObjective {
    /// The objective of `config`; a negative or non-finite weight, or no reconstruction weight,
    /// is a [`TrainError::Config`].
    pub fn new(config: VaeObjectiveConfig) -> crate::Result<Self> {
        let c = &config;
        if [c.l1_weight, c.mse_weight, c.kl_weight, c.temporal_weight, c.latent_noise].iter().any(|w| !w.is_finite() || *w < 0.0)
            || c.l1_weight + c.mse_weight == 0.0
        {
            return Err(TrainError::Config(format!(
                "l1_weight {}, mse_weight {}, kl_weight {}, temporal_weight {} and latent_noise {} must be finite and ≥ 0, \
                 with a positive reconstruction weight",
                c.l1_weight, c.mse_weight, c.kl_weight, c.temporal_weight, c.latent_noise
            )));
        }
        Ok(Self { config })
    }
}

impl<B> Objective<B, WanVae<B>, VideoClip> for VaeObjective
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanVae<B>, clip: &VideoClip, rng: &mut TrainRng) -> crate::Result<Loss<B>> {
        let t = clip.frames();
        if t % 4 != 1 {
            return Err(TrainError::Shape(format!("codec clips need 1 + 4k frames, got {:?}", clip.frames.shape)));
        }
        let device = model.quant_conv.bias.val().device();
        let video = clip.tensor::<B>(&device);
        let (mean, logvar) = model.encode_moments(video.clone())?;
        let noise = Tensor::from_data(rng.normal_data(mean.dims().to_vec()), &device);
        let z = mean.clone() + logvar.clone().mul_scalar(0.5).exp() * noise;
        let c = &self.config;
        let z = if c.latent_noise > 0.0 {
            let sigmas: Vec<f64> = (0..z.dims()[0]).map(|_| c.latent_noise * rng.uniform()).collect();
            perturb_latents(model, z, &sigmas, rng)
        } else {
            z
        };
        let recon = model.decode_unclamped(z)?;
        let temporal = (c.temporal_weight > 0.0).then(|| temporal_difference(recon.clone(), video.clone()));
        let (l1, mse) = reconstruction(recon, video);
        let kl = kl_to_standard_normal(mean, logvar);
        let mut total = l1.clone().mul_scalar(c.l1_weight) + mse.clone().mul_scalar(c.mse_weight) + kl.clone().mul_scalar(c.kl_weight);
        let mut parts = vec![("l1", l1.detach()), ("mse", mse.detach()), ("kl", kl.detach())];
        if let Some(temporal) = temporal {
            total = total + temporal.clone().mul_scalar(c.temporal_weight);
            parts.push(("temporal", temporal.detach()));
        }
        Ok(Loss { total, parts })
    }
}
