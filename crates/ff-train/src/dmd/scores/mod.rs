//! The score networks of Phase 2 and the DMD generator gradient (paper Sec. 3.2, App. C.2;
//! Self-Forcing `model/dmd.py`).
//!
//! * [`Score`]: the frozen real score (teacher, classifier-free guidance against the
//!   empty-prompt embedding) or the critic (fake score, the critic's LoRA), each on its own
//!   device; inputs move there and predictions come back.
//! * A score sees one tile at a time ([`tiles`]): `[head?, targets]` at positions `0..n` under
//!   full attention, one timestep for all frames; head predictions are dropped.
//! * [`dmd_gradient`]: per tile, `x_t = (1 − σ)·x + σ·ε`, x₀-predictions
//!   `p = x_t − σ·v̂` of both scores, `g = (p_fake − p_real) / mean|x − p_real|` (NaN → 0), on the
//!   tile's targets. Everything here runs without gradient, in f32.

mod tiles;

pub use tiles::{image_heads, tiles};

use super::config::DmdConfig;
use crate::{Result, TrainRng};
use burn::tensor::Tensor;
use ff_model::dit::TextContext;
use ff_model::vae::WanVae;
use ff_model::{AttentionBackend, FlowMatch, Role, WanDit};
use std::ops::Range;

/// The role a score network's forward plays: a role model (the critic's LoRA) runs as the
/// renderer, a plain model as the base.
pub fn score_role<B: AttentionBackend>(model: &WanDit<B>) -> Role {
    if model.role_embedding.is_some() { Role::Renderer } else { Role::Base }
}

/// Draws the score timestep (see [`DmdConfig`]): `t = 1000·shift(i/1000)`, `i` uniform in
/// `0..1000`, clamped.
pub fn score_timestep(config: &DmdConfig, rng: &mut TrainRng) -> f64 {
    let u = rng.below(1000) as f64 / 1000.0;
    (1000.0 * FlowMatch::new(config.score_timestep_shift).shift_sigma(u)).clamp(config.min_score_timestep, config.max_score_timestep)
}

/// One score network with the prompt contexts it reads.
pub struct Score<'a, B: AttentionBackend> {
    /// The score network (teacher or critic), on its own device.
    pub model: &'a WanDit<B>,
    /// The prompt's context.
    pub cond: TextContext<B>,
    /// The empty prompt's context (only when guidance ≠ 1).
    pub uncond: Option<TextContext<B>>,
    /// Classifier-free guidance scale `s` (1: the prompt-only prediction).
    pub guidance: f64,
}

impl<'a, B: AttentionBackend> Score<'a, B> {
    /// `prompt`, `empty`: `[1, text_len, text_dim]` on any device.
    pub fn new(model: &'a WanDit<B>, prompt: Tensor<B, 3>, empty: Tensor<B, 3>, guidance: f64) -> Self {
        let device = model.device();
        let uncond = (guidance != 1.0).then(|| model.text_context(empty.to_device(&device)));
        Self { cond: model.text_context(prompt.to_device(&device)), uncond, model, guidance }
    }

    /// Guided x₀-prediction `u + s·(c − u)` of `x_t` (`[1, C, n, h, w]`) at timestep `t`, on
    /// the device of `x_t`.
    pub fn predict(&self, x_t: Tensor<B, 5>, t: f64) -> Result<Tensor<B, 5>> {
        let back = x_t.device();
        let x = x_t.to_device(&self.model.device());
        let n = x.dims()[2];
        let sigma = t / 1000.0;
        let role = score_role(self.model);
        let x0 = |text: &TextContext<B>| -> Result<Tensor<B, 5>> {
            let v = self.model.forward(x.clone(), &[vec![t; n]], text, role)?;
            Ok(FlowMatch::x0_from_v(x.clone(), v, sigma))
        };
        let c = x0(&self.cond)?;
        let p = match &self.uncond {
            Some(empty) => {
                let u = x0(empty)?;
                u.clone() + (c - u) * self.guidance
            }
            None => c,
        };
        Ok(p.to_device(&back))
    }
}

/// A clip's score windows: each tile's input (head first for later tiles) and how many leading
/// head frames to drop.
pub fn windows<B: AttentionBackend>(vae: &WanVae<B>, x0: Tensor<B, 5>, tiles: &[Range<usize>]) -> Result<Vec<(Tensor<B, 5>, usize)>> {
    let heads = image_heads(vae, x0.clone(), tiles)?;
    Ok(tiles
        .iter()
        .enumerate()
        .map(|(i, tile)| {
            let targets = x0.clone().narrow(2, tile.start, tile.len());
            match i {
                0 => (targets, 0),
                _ => (Tensor::cat(vec![heads[i - 1].clone(), targets], 2), 1),
            }
        })
        .collect())
}

/// The DMD gradient of a clip's x̂₀ (`[1, C, L, h, w]`, detached) at timestep `t` with one ε
/// per tile from `rng`: `[1, C, L, h, w]`.
pub fn dmd_gradient<B: AttentionBackend>(
    real: &Score<B>,
    fake: &Score<B>,
    vae: &WanVae<B>,
    x0: Tensor<B, 5>,
    window: usize,
    t: f64,
    rng: &mut TrainRng,
) -> Result<Tensor<B, 5>> {
    let sigma = t / 1000.0;
    let tiles = tiles(x0.dims()[2], window);
    let mut grads = Vec::with_capacity(tiles.len());
    for (x, head) in windows(vae, x0.clone(), &tiles)? {
        let dims = x.dims();
        let eps = Tensor::from_data(rng.normal_data(dims.to_vec()), &x.device());
        let x_t = FlowMatch::noise(x.clone(), eps, sigma);
        let p_real = real.predict(x_t.clone(), t)?;
        let p_fake = fake.predict(x_t, t)?;
        let norm = (x - p_real.clone()).abs().mean();
        let g = (p_fake - p_real) / norm.reshape([1, 1, 1, 1, 1]);
        let g = g.clone().mask_fill(g.is_nan(), 0.0);
        grads.push(g.narrow(2, head, dims[2] - head));
    }
    Ok(Tensor::cat(grads, 2))
}
