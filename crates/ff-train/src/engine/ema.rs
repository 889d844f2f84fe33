//! Exponential moving average of the trainable parameters, the weights used for evaluation and
//! export: after each optimizer step `ema ← d·ema + (1 − d)·θ`, starting from the initial θ.

use super::params::ParamMap;
use burn::tensor::backend::Backend;

/// The moving average of the trainable parameters, by parameter path.
#[derive(Clone, Debug)]
pub struct Ema<B: Backend> {
    decay: f64,
    values: ParamMap<B>,
}

impl<B: Backend> Ema<B> {
    /// An average that starts at `values`.
    pub fn new(decay: f64, values: ParamMap<B>) -> Self {
        Self { decay, values }
    }

    /// Folds the current parameters in (parameters not yet averaged start at their value).
    pub fn update(&mut self, params: &ParamMap<B>) {
        let d = self.decay;
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
