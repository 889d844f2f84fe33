//! Exponential moving average of the trainable parameters, the weights used for evaluation and
//! export: after optimizer step `s` (1-based) `ema ← d_s·ema + (1 − d_s)·θ`, starting from the
//! initial θ.
//!
//! With warm-up (`[train] ema_warmup`, the default) `d_s = min(d, s / (9 + s))`, i.e.
//! `min(d, (1 + t) / (10 + t))` for the `t = s − 1` updates before (TensorFlow's
//! `ExponentialMovingAverage` with `num_updates`): 0.1, 0.18, 0.25, … so that a short run (the
//! paper's 100 DMD generator updates) exports its trained weights rather than ~90 % of its start
//! (0.999¹⁰⁰ ≈ 0.905). Without it `d_s = d` from the first step.

use super::params::ParamMap;
use burn::tensor::backend::Backend;

/// The moving average of the trainable parameters, by parameter path.
#[derive(Clone, Debug)]
pub struct Ema<B: Backend> {
    decay: f64,
    warmup: bool,
    values: ParamMap<B>,
}

impl<B: Backend> Ema<B> {
    /// An average of decay `decay` (warmed up when `warmup`) that starts at `values`.
    pub fn new(decay: f64, warmup: bool, values: ParamMap<B>) -> Self {
        Self { decay, warmup, values }
    }

    /// The decay of optimizer step `step` (1-based).
    pub fn decay_at(&self, step: usize) -> f64 {
        match self.warmup {
            true => self.decay.min(step as f64 / (9.0 + step as f64)),
            false => self.decay,
        }
    }

    /// Folds in the parameters after optimizer step `step` (1-based; parameters not yet averaged
    /// start at their value).
    pub fn update(&mut self, params: &ParamMap<B>, step: usize) {
        let d = self.decay_at(step);
        for (path, p) in params {
            let next = match self.values.remove(path) {
                Some(avg) => avg.mul_scalar(d) + p.clone().mul_scalar(1.0 - d),
                None => p.clone(),
            };
            self.values.insert(path.clone(), next);
        }
    }

    /// The averaged values, by parameter path.
    pub fn values(&self) -> &ParamMap<B> {
        &self.values
    }
}
