//! The random draw of one clip's step and the packed model inputs built from it.
//!
//! Shapes: clip latents `[C, frames, h, w]`; the window the step uses `[C, L, h, w]` (from a drawn
//! start); noise ε `[C, L, h, w]`, one value per latent of the window, so every noised copy of a
//! latent (planner input, renderer input, crop input) shares it; packed inputs and velocity
//! targets `[1, C, F, h, w]` over the `F` packed frames.
//!
//! A crop's frames come from its own latents when the clip has them (`[K, C, L − Δ, h, w]`, crop
//! `k` starting at clip latent `k + 1`, encoded from the crop's frames: `data::encode_crops`),
//! so rebased position 0 is a causal first latent as at inference; a clip without them (a
//! dataset written before crops were stored) reuses its window's latents `o..o + L − Δ`.

use super::config::SftConfig;
use super::layout::PackedLayout;
use crate::TrainRng;
use burn::tensor::{Int, Tensor, TensorData, backend::Backend};
use ff_model::FlowMatch;

/// The random choices of one clip's step, drawn in this order from the run's [`TrainRng`].
#[derive(Clone, Debug)]
pub struct Draw {
    /// First latent of the `L`-latent window (0 when the clip has exactly `L`).
    pub start: usize,
    /// Latent offsets of the time-rebased crops (distinct, ascending).
    pub offsets: Vec<usize>,
    /// The clip's single noise level.
    pub sigma: f64,
    /// ε of the window `[C, L, h, w]`.
    pub noise: TensorData,
}

impl Draw {
    /// Draws start, offsets, σ (uniform index of the shifted 1000-step table) and ε for a clip
    /// of shape `latents` (checked by `clip_shape`).
    pub fn sample(config: &SftConfig, latents: &[usize], rng: &mut TrainRng) -> Self {
        let (window, crops) = (config.latents, config.rebased_crops);
        let start = rng.below(latents[1] - window + 1);
        let mut pool = config.offsets();
        for i in 0..crops {
            let j = i + rng.below(pool.len() - i);
            pool.swap(i, j);
        }
        let mut offsets = pool[..crops].to_vec();
        offsets.sort_unstable();
        let flow = FlowMatch::new(config.timestep_shift);
        let sigma = flow.shift_sigma(1.0 - rng.below(flow.train_steps) as f64 / flow.train_steps as f64);
        let noise = rng.normal_data(vec![latents[0], window, latents[2], latents[3]]);
        Self { start, offsets, sigma, noise }
    }
}

/// Model inputs and targets of one packed step.
pub struct Packed<B: Backend> {
    /// `[1, C, F, h, w]`: `x0` for clean copies, `(1 − σ)·x0 + σ·ε` for noised ones.
    pub inputs: Tensor<B, 5>,
    /// `[1, C, F, h, w]`: the velocity `v = ε − x0` (read for noised frames only).
    pub targets: Tensor<B, 5>,
    /// Per-frame timesteps (1000·σ or 0).
    pub timesteps: Vec<f64>,
}

/// Checks that `latents` is `[C, frames ≥ window, h, w]`; returns its shape.
pub fn clip_shape(latents: &TensorData, window: usize) -> std::result::Result<Vec<usize>, String> {
    let s = latents.shape.to_vec();
    if s.len() != 4 || s[1] < window {
        return Err(format!("latents {s:?} must be [channels, ≥ {window} latent frames, height, width]"));
    }
    Ok(s)
}

/// Checks that `crops` (`[K, C, L_c, h, w]`) hold the crops of `crop_len` latents at every offset
/// a window of `window` latents of a clip of shape `clip` can draw (`K = frames − L_c`).
pub fn crops_cover(crops: &TensorData, clip: &[usize], crop_len: usize) -> std::result::Result<(), String> {
    let s = &crops.shape;
    if s.len() != 5 || s[2] != crop_len || s[0] + crop_len != clip[1] || (s[1], s[3], s[4]) != (clip[0], clip[2], clip[3]) {
        return Err(format!(
            "crop latents {s:?} must be [{}, {}, {crop_len}, {}, {}] (one crop of L − Δ latents per offset)",
            clip[1].saturating_sub(crop_len),
            clip[0],
            clip[2],
            clip[3]
        ));
    }
    Ok(())
}

/// Gathers the packed frames of `layout` from the clip window (and the crops' own latents
/// `crops`, checked by [`crops_cover`]) and noises them.
pub fn pack<B: Backend>(
    latents: &TensorData,
    crops: Option<&TensorData>,
    draw: &Draw,
    layout: &PackedLayout,
    device: &B::Device,
) -> Packed<B> {
    let window = draw.noise.shape[1];
    let clip = Tensor::<B, 4>::from_data(latents.clone(), device).narrow(1, draw.start, window);
    let noise = Tensor::<B, 4>::from_data(draw.noise.clone(), device);
    let at = |index: Vec<usize>| Tensor::<B, 1, Int>::from_ints(index.iter().map(|&i| i as i64).collect::<Vec<_>>().as_slice(), device);
    let (source, index) = match crops {
        Some(crops) => {
            // The window, then each drawn crop's own latents, in sequence order.
            let crops = Tensor::<B, 5>::from_data(crops.clone(), device);
            let len = crops.dims()[2];
            let mut parts = vec![clip];
            parts.extend(draw.offsets.iter().map(|&o| crops.clone().narrow(0, draw.start + o - 1, 1).squeeze_dim::<4>(0)));
            let index = layout.frames.iter().map(|f| if f.sequence == 0 { f.latent } else { window + (f.sequence - 1) * len + f.position });
            (Tensor::cat(parts, 1), index.collect())
        }
        None => (clip, layout.frames.iter().map(|f| f.latent).collect()),
    };
    let x0 = source.select(1, at(index));
    let eps = noise.select(1, at(layout.frames.iter().map(|f| f.latent).collect()));
    let scale: Vec<f32> = layout.frames.iter().map(|f| if f.is_noised() { draw.sigma as f32 } else { 0.0 }).collect();
    let scale = Tensor::<B, 1>::from_floats(scale.as_slice(), device).reshape([1, layout.len(), 1, 1]);
    let targets = eps - x0.clone();
    let inputs = x0 + targets.clone() * scale;
    Packed {
        inputs: inputs.unsqueeze_dim(0),
        targets: targets.unsqueeze_dim(0),
        timesteps: layout.timesteps(FlowMatch::default().timestep(draw.sigma)),
    }
}
