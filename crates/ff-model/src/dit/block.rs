//! One Wan2.1 DiT block and the output head.
//!
//! Tokens arrive as `[batch, frames, tokens_per_frame, dim]` so that the per-frame modulation
//! (`[batch, frames, 1, dim]`, one timestep per latent frame) broadcasts without expansion.
//! Block: norm1 (no affine) + (shift, scale) → self-attention → gate; norm3 (affine) →
//! cross-attention; norm2 (no affine) + (shift, scale) → FFN (GELU tanh) → gate.
//! Modulation, norms and the residual updates run in f32 whatever the backend's float type.

use super::attention::{Attend, CrossAttention, SelfAttention};
use super::embed::Mlp;
use super::kv::LayerKv;
use super::rope::RopeTable;
use crate::lora::{LoraConfig, Role, RoleSelect};
use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{DType, Distribution, Tensor};
use kernels_cubecl::{AttentionBackend, gelu_tanh};
use std::ops::Range;

/// LayerNorm without affine parameters over the last dimension (input already f32).
pub fn layer_norm<B: AttentionBackend, const D: usize>(x: Tensor<B, D>, eps: f64) -> Tensor<B, D> {
    let (var, mean) = x.clone().var_mean_bias(D - 1);
    (x - mean) / (var + eps).sqrt()
}

/// `norm`'s LayerNorm of an f32 `x` with its affine parameters cast to f32: one fused pass where
/// the backend has the kernel ([`kernels_cubecl::layer_norm`]: the CPU backends, under autodiff too),
/// else tensor ops.
fn affine_norm<B: AttentionBackend, const D: usize>(norm: &LayerNorm<B>, x: Tensor<B, D>, eps: f64) -> Tensor<B, D> {
    let gamma = norm.gamma.val().cast(DType::F32);
    let beta = norm.beta.as_ref().map(|b| b.val().cast(DType::F32));
    if let Some(y) = kernels_cubecl::layer_norm(x.clone(), gamma.clone(), beta.clone(), eps) {
        return y;
    }
    let y = layer_norm(x, eps) * gamma.unsqueeze();
    match beta {
        Some(beta) => y + beta.unsqueeze(),
        None => y,
    }
}

/// Splits `modulation [1, n, dim] + e [batch, frames, n or 1, dim]` into `n` f32 tensors
/// `[batch, frames, 1, dim]`.
fn modulate<B: AttentionBackend>(table: &Param<Tensor<B, 3>>, e: Tensor<B, 4>) -> Vec<Tensor<B, 4>> {
    let n = table.dims()[1];
    (e.cast(DType::F32) + table.val().cast(DType::F32).unsqueeze::<4>()).chunk(n, 2)
}

/// `norm(x)·(1 + scale) + shift` in f32, returned in `dtype`: one fused pass where the backend
/// has the kernel (`kernels_cubecl::adaln`: the CPU backends, under autodiff too), else tensor ops.
fn adaln<B: AttentionBackend>(x: Tensor<B, 4>, shift: &Tensor<B, 4>, scale: &Tensor<B, 4>, eps: f64, dtype: DType) -> Tensor<B, 4> {
    let out = kernels_cubecl::adaln(x.clone(), shift.clone(), scale.clone(), eps)
        .unwrap_or_else(|| layer_norm(x, eps) * (scale.clone() + 1.0) + shift.clone());
    out.cast(dtype)
}

/// `x + y·gate` in f32 (`x, y: [batch, frames, t, dim]`, per-frame `gate: [batch, frames, 1,
/// dim]`): one fused pass where the backend has the kernel (`kernels_cubecl::gated_residual`: the
/// CPU backends, under autodiff too), else tensor ops.
fn gated<B: AttentionBackend>(x: Tensor<B, 4>, y: Tensor<B, 4>, gate: &Tensor<B, 4>) -> Tensor<B, 4> {
    let y = y.cast(DType::F32);
    kernels_cubecl::gated_residual(x.clone(), y.clone(), gate.clone()).unwrap_or_else(|| x + y * gate.clone())
}

/// One transformer block (see the module docs for its order of operations).
#[derive(Module, Debug)]
pub struct DitBlock<B: AttentionBackend> {
    /// `[1, 6, dim]`: shift, scale, gate of self-attention, then of the FFN.
    pub modulation: Param<Tensor<B, 3>>,
    /// Self-attention over the frame's tokens and the K/V the context supplies.
    pub self_attn: SelfAttention<B>,
    /// Affine LayerNorm before cross-attention.
    pub norm3: LayerNorm<B>,
    /// Cross-attention to the prompt.
    pub cross_attn: CrossAttention<B>,
    /// Feed-forward `dim → ffn_dim → dim` with GELU (tanh).
    pub ffn: Mlp<B>,
    /// Epsilon of the block's norms.
    pub eps: f64,
}

impl<B: AttentionBackend> DitBlock<B> {
    /// A freshly initialised block of width `dim`, `heads` heads and FFN width `ffn_dim`, without
    /// adapters.
    pub fn new(dim: usize, ffn_dim: usize, heads: usize, eps: f64, device: &B::Device) -> Self {
        Self {
            modulation: Param::from_tensor(Tensor::random([1, 6, dim], Distribution::Normal(0.0, (dim as f64).powf(-0.5)), device)),
            self_attn: SelfAttention::new(dim, heads, eps, device),
            norm3: LayerNormConfig::new(dim).with_epsilon(eps).init(device),
            cross_attn: CrossAttention::new(dim, heads, eps, device),
            ffn: Mlp::new(dim, ffn_dim, dim, device),
            eps,
        }
    }

    /// Adds role adapters to both attentions ([`SelfAttention::with_adapters`],
    /// [`CrossAttention::with_adapters`]).
    pub fn with_adapters(self, c: &LoraConfig) -> Self {
        Self { self_attn: self.self_attn.with_adapters(c), cross_attn: self.cross_attn.with_adapters(c), ..self }
    }

    /// The plain block of `role`: its adapters folded into the weights.
    pub fn merge(&self, role: Role) -> Self {
        Self { self_attn: self.self_attn.merge(role), cross_attn: self.cross_attn.merge(role), ..self.clone() }
    }

    /// `x: [batch, frames, t, dim]`, `e: [batch, frames, 6·dim]` → (`x'`, own K/V of this layer).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        x: Tensor<B, 4>,
        e: Tensor<B, 3>,
        rope: &RopeTable<B>,
        roles: &RoleSelect<B>,
        text: &LayerKv<B>,
        attend: &Attend<B>,
        layer: usize,
    ) -> (Tensor<B, 4>, LayerKv<B>) {
        let pending = self.begin(x, e, rope, roles);
        let own = pending.own.clone();
        (self.finish(pending, &own, None, roles, text, attend, layer), own)
    }

    /// The block up to self-attention: modulation, norm, q, k, v.
    pub(super) fn begin(&self, x: Tensor<B, 4>, e: Tensor<B, 3>, rope: &RopeTable<B>, roles: &RoleSelect<B>) -> Pending<B> {
        let [b, f, t, dim] = x.dims();
        let dtype = x.dtype();
        let m = modulate(&self.modulation, e.reshape([b, f, 6, dim]));
        // The residual stream is updated in f32 (as Wan does under bf16), stored in `dtype`.
        let x = x.cast(DType::F32);
        let h = adaln(x.clone(), &m[0], &m[1], self.eps, dtype);
        let (q, own) = self.self_attn.project(h.reshape([b, f * t, dim]), rope, roles);
        Pending { x, m, q, own, dtype }
    }

    /// The rest of the block: self-attention over `keys` (the forward's own K/V; under context
    /// parallelism the whole forward's, the queries being its tokens `rows`), cross-attention, FFN.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &self,
        p: Pending<B>,
        keys: &LayerKv<B>,
        rows: Option<Range<usize>>,
        roles: &RoleSelect<B>,
        text: &LayerKv<B>,
        attend: &Attend<B>,
        layer: usize,
    ) -> Tensor<B, 4> {
        let Pending { x, m, q, dtype, .. } = p;
        let [b, f, t, dim] = x.dims();
        let flat = |x: Tensor<B, 4>| x.reshape([b, f * t, dim]);
        let frames = |x: Tensor<B, 3>| x.reshape([b, f, t, dim]);
        let attn = self.self_attn.output(self.self_attn.attend(q, keys, rows, attend, layer), roles);
        let x = gated(x, frames(attn), &m[2]);

        let x = flat(x);
        let normed = affine_norm(&self.norm3, x.clone(), self.eps).cast(dtype);
        let x = x + self.cross_attn.forward(normed, text, roles).cast(DType::F32);
        let x = frames(x);

        let h = adaln(x.clone(), &m[3], &m[4], self.eps, dtype);
        let ff = self.ffn.forward(h, gelu_tanh);
        gated(x, ff, &m[5]).cast(dtype)
    }
}

/// A block stopped at self-attention ([`DitBlock::begin`]): the f32 residual stream, the
/// modulation, the queries and the forward's own K/V of this layer.
pub(super) struct Pending<B: AttentionBackend> {
    x: Tensor<B, 4>,
    m: Vec<Tensor<B, 4>>,
    q: Tensor<B, 4>,
    /// Own post-RoPE K/V `[batch, heads, tokens, head_dim]`.
    pub own: LayerKv<B>,
    dtype: DType,
}

/// Output head: modulation (shift, scale) from the time embedding, LayerNorm, Linear.
#[derive(Module, Debug)]
pub struct Head<B: AttentionBackend> {
    /// `[1, 2, dim]`: shift, scale.
    pub modulation: Param<Tensor<B, 3>>,
    /// Projection `dim → out` (out = output channels × patch volume).
    pub head: Linear<B>,
    /// Epsilon of the LayerNorm.
    pub eps: f64,
}

impl<B: AttentionBackend> Head<B> {
    /// A freshly initialised head projecting `dim` to `out` features per token.
    pub fn new(dim: usize, out: usize, eps: f64, device: &B::Device) -> Self {
        let modulation = Tensor::random([1, 2, dim], Distribution::Normal(0.0, (dim as f64).powf(-0.5)), device);
        Self { modulation: Param::from_tensor(modulation), head: LinearConfig::new(dim, out).init(device), eps }
    }

    /// `x: [batch, frames, t, dim]`, `temb: [batch, frames, dim]` → `[batch, frames, t, out]`.
    pub fn forward(&self, x: Tensor<B, 4>, temb: Tensor<B, 3>) -> Tensor<B, 4> {
        let dtype = x.dtype();
        let m = modulate(&self.modulation, temb.unsqueeze_dim(2));
        self.head.forward(adaln(x.cast(DType::F32), &m[0], &m[1], self.eps, dtype))
    }
}
