//! The optimizer: Burn's AdamW, configured explicitly (Burn's defaults differ from PyTorch's), run
//! per parameter path so its state is an ordered map a checkpoint saves by name; and global-norm
//! gradient clipping (Burn 0.21 clips each tensor by its own norm).

use super::config::TrainConfig;
use super::params::ParamMap;
use burn::optim::{AdamW, AdamWConfig, AdamWState, AdaptiveMomentumState, SimpleOptimizer};
use burn::tensor::{ElementConversion, Tensor, backend::Backend};
use std::collections::BTreeMap;

/// AdamW moments of one parameter (flattened like the parameter).
#[derive(Clone, Debug)]
pub struct Moments<B: Backend> {
    /// Updates applied so far (bias correction).
    pub time: usize,
    /// First moment `m` (`[numel]`).
    pub first: Tensor<B, 1>,
    /// Second moment `v` (`[numel]`).
    pub second: Tensor<B, 1>,
}

/// AdamW over named parameters.
#[derive(Clone)]
pub struct Optimizer<B: Backend> {
    adamw: AdamW,
    state: BTreeMap<String, Moments<B>>,
}

impl<B: Backend> Optimizer<B> {
    /// AdamW with `config`'s β₁, β₂, ε and weight decay, and no state yet.
    pub fn new(config: &TrainConfig) -> Self {
        let adamw = AdamWConfig::new()
            .with_beta_1(config.beta_1 as f32)
            .with_beta_2(config.beta_2 as f32)
            .with_epsilon(config.epsilon as f32)
            .with_weight_decay(config.weight_decay as f32)
            .build();
        Self { adamw, state: BTreeMap::new() }
    }

    /// One update at learning rate `lr`: the new value of every parameter of `params` that has a
    /// gradient in `grads` (the others are left out, as PyTorch skips parameters without one).
    pub fn step(&mut self, lr: f64, params: &ParamMap<B>, grads: ParamMap<B>) -> ParamMap<B> {
        let mut updated = BTreeMap::new();
        for (path, grad) in grads {
            let Some(value) = params.get(&path) else { continue };
            let state = self.state.remove(&path).map(|m| AdamWState {
                momentum: AdaptiveMomentumState { time: m.time, moment_1: m.first, moment_2: m.second, max_moment_2: None },
            });
            let (value, state) = self.adamw.step(lr, value.clone(), grad, state);
            if let Some(s) = state {
                let m = s.momentum;
                self.state.insert(path.clone(), Moments { time: m.time, first: m.moment_1, second: m.moment_2 });
            }
            updated.insert(path, value);
        }
        updated
    }

    /// The moments by parameter path.
    pub fn state(&self) -> &BTreeMap<String, Moments<B>> {
        &self.state
    }

    /// Replaces the moments (a resumed run).
    pub fn set_state(&mut self, state: BTreeMap<String, Moments<B>>) {
        self.state = state;
    }
}

/// Scales `grads` so that their global L2 norm is at most `max_norm`, as PyTorch's
/// `clip_grad_norm_` does (factor `max_norm / (norm + 1e-6)` when that is below 1). Returns the
/// norm before clipping. The squares are summed per tensor on the device, the tensors' sums on
/// the host in f64.
pub fn clip_global_norm<B: Backend>(grads: ParamMap<B>, max_norm: f64) -> (ParamMap<B>, f64) {
    if grads.is_empty() {
        return (grads, 0.0);
    }
    let sums: Vec<Tensor<B, 1>> = grads.values().map(|g| g.clone().square().sum()).collect();
    let sums = Tensor::cat(sums, 0).into_data().convert::<f64>();
    let norm = sums.as_slice::<f64>().map(|s| s.iter().sum::<f64>()).unwrap_or(f64::NAN).sqrt();
    let factor = max_norm / (norm + 1e-6);
    if factor >= 1.0 {
        return (grads, norm);
    }
    (grads.into_iter().map(|(k, g)| (k, g.mul_scalar(factor.elem::<f32>()))).collect(), norm)
}
