//! umT5 gated-GELU feed-forward: `fc2(gelu_tanh(gate(x)) * fc1(x))`, all projections bias-free
//! (transformers `wi_0` = gate, `wi_1` = fc1, `wo` = fc2; GELU is the tanh approximation,
//! transformers' "gelu_new").
//!
//! `[B, L, d_model]` -> `[B, L, d_model]` through a hidden width `d_ff`.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::gelu_approximate;
use burn::tensor::{Tensor, backend::Backend};

/// Configuration of [`GatedGeluFfn`].
#[derive(Config, Debug)]
pub struct GatedGeluFfnConfig {
    /// Model width.
    pub d_model: usize,
    /// Hidden width.
    pub d_ff: usize,
}

impl GatedGeluFfnConfig {
    /// Freshly initialised projections.
    pub fn init<B: Backend>(&self, device: &B::Device) -> GatedGeluFfn<B> {
        let proj = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        GatedGeluFfn { gate: proj(self.d_model, self.d_ff), fc1: proj(self.d_model, self.d_ff), fc2: proj(self.d_ff, self.d_model) }
    }
}

/// Gated-GELU feed-forward of one umT5 block.
#[derive(Module, Debug)]
pub struct GatedGeluFfn<B: Backend> {
    /// Gate `d_model → d_ff` (transformers `wi_0`).
    pub gate: Linear<B>,
    /// Up projection `d_model → d_ff` (transformers `wi_1`).
    pub fc1: Linear<B>,
    /// Down projection `d_ff → d_model` (transformers `wo`).
    pub fc2: Linear<B>,
}

impl<B: Backend> GatedGeluFfn<B> {
    /// `[B, L, d_model]` -> `[B, L, d_model]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.fc2.forward(gelu_approximate(self.gate.forward(x.clone())) * self.fc1.forward(x))
    }
}
