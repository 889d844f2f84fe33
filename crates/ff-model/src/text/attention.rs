//! T5 self-attention: bias-free q/k/v/o projections, logits NOT scaled by `1/sqrt(d_kv)` (the
//! scale is folded into the trained weights), an additive f32 bias (relative positions plus the
//! padding mask) and a softmax in f32.
//!
//! `x: [B, L, d_model]`, `bias: [B or 1, heads, L, L]` -> `[B, L, d_model]`.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::softmax;
use burn::tensor::{DType, Tensor, backend::Backend};

/// Configuration of [`Umt5Attention`].
#[derive(Config, Debug)]
pub struct Umt5AttentionConfig {
    /// Model width.
    pub d_model: usize,
    /// Channels per head.
    pub d_kv: usize,
    /// Attention heads.
    pub num_heads: usize,
}

impl Umt5AttentionConfig {
    /// Freshly initialised projections.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Umt5Attention<B> {
        let inner = self.d_kv * self.num_heads;
        let proj = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        Umt5Attention {
            q: proj(self.d_model, inner),
            k: proj(self.d_model, inner),
            v: proj(self.d_model, inner),
            o: proj(inner, self.d_model),
            num_heads: self.num_heads,
            d_kv: self.d_kv,
        }
    }
}

/// Multi-head self-attention of one umT5 block.
#[derive(Module, Debug)]
pub struct Umt5Attention<B: Backend> {
    /// Query projection `d_model → heads·d_kv`, no bias.
    pub q: Linear<B>,
    /// Key projection `d_model → heads·d_kv`, no bias.
    pub k: Linear<B>,
    /// Value projection `d_model → heads·d_kv`, no bias.
    pub v: Linear<B>,
    /// Output projection `heads·d_kv → d_model`, no bias.
    pub o: Linear<B>,
    /// Attention heads.
    pub num_heads: usize,
    /// Channels per head.
    pub d_kv: usize,
}

impl<B: Backend> Umt5Attention<B> {
    /// `x: [B, L, d_model]`, `bias: [B or 1, heads, L, L]` (f32) -> `[B, L, d_model]`.
    pub fn forward(&self, x: Tensor<B, 3>, bias: Tensor<B, 4>) -> Tensor<B, 3> {
        let [b, l, _] = x.dims();
        let heads = |t: Tensor<B, 3>| t.reshape([b, l, self.num_heads, self.d_kv]).swap_dims(1, 2);
        let q = heads(self.q.forward(x.clone()));
        let k = heads(self.k.forward(x.clone()));
        let v = heads(self.v.forward(x));
        let logits = q.matmul(k.swap_dims(2, 3));
        let dtype = logits.dtype();
        let weights = softmax(logits.cast(DType::F32) + bias, 3).cast(dtype);
        let out = weights.matmul(v).swap_dims(1, 2).reshape([b, l, self.num_heads * self.d_kv]);
        self.o.forward(out)
    }
}
