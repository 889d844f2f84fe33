//! Self- and cross-attention of a Wan block.
//!
//! Projections q, k, v, o with bias; RMS norm over the full hidden size on q and k; heads of
//! `head_dim`; RoPE on self-attention q and k. Self-attention: tokens `[batch, n, dim]` attend over
//! the keys a [`KvContext`] supplies (or over themselves under a packed sequence's block table),
//! always through [`kernels_cubecl::attention`], and the forward returns its own post-RoPE K/V
//! for publishing. Cross-attention: tokens attend to all of the prompt's K/V, through the same
//! entry point under a one-block table (the CPU kernel on CPU backends, no mask).

use super::kv::{KvContext, LayerKv};
use super::rope::RopeTable;
use crate::lora::{LoraConfig, LoraLinear, RoleSelect};
use burn::module::Module;
use burn::nn::{Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::Tensor;
use kernels_cubecl::{AttentionBackend, BlockTable, attention};
use std::ops::Range;

/// What a forward's self-attention reads.
pub enum Attend<'a, B: AttentionBackend> {
    /// Own tokens plus what the context supplies for each layer.
    Context(&'a dyn KvContext<B>),
    /// Own tokens only, under frame-level rules (packed sequences).
    Packed(BlockTable),
}

fn split_heads<B: AttentionBackend>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
    let [b, n, d] = x.dims();
    x.reshape([b, n, heads, d / heads])
}

fn merge_heads<B: AttentionBackend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
    let [b, h, n, hd] = x.dims();
    x.swap_dims(1, 2).reshape([b, n, h * hd])
}

fn rms_norm<B: AttentionBackend>(dim: usize, eps: f64, device: &B::Device) -> RmsNorm<B> {
    RmsNormConfig::new(dim).with_epsilon(eps).init(device)
}

/// `norm(x)`: one fused pass where the backend has the kernel ([`kernels_cubecl::rms_norm`]: the
/// CPU backends, under autodiff too), else Burn's module.
fn normed<B: AttentionBackend>(norm: &RmsNorm<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    kernels_cubecl::rms_norm(x.clone(), norm.gamma.val(), norm.epsilon).unwrap_or_else(|| norm.forward(x))
}

/// Self-attention with role adapters on q, k, v, o.
#[derive(Module, Debug)]
pub struct SelfAttention<B: AttentionBackend> {
    /// Query projection `[dim, dim]`.
    pub q: LoraLinear<B>,
    /// Key projection `[dim, dim]`.
    pub k: LoraLinear<B>,
    /// Value projection `[dim, dim]`.
    pub v: LoraLinear<B>,
    /// Output projection `[dim, dim]`.
    pub o: LoraLinear<B>,
    /// RMS norm of the queries over the full hidden size.
    pub norm_q: RmsNorm<B>,
    /// RMS norm of the keys over the full hidden size.
    pub norm_k: RmsNorm<B>,
    /// Attention heads (`head_dim = dim / num_heads`).
    pub num_heads: usize,
}

impl<B: AttentionBackend> SelfAttention<B> {
    /// Fresh projections of width `dim` without adapters; `eps` is the RMS norms' epsilon.
    pub fn new(dim: usize, num_heads: usize, eps: f64, device: &B::Device) -> Self {
        let lin = || LoraLinear::new(LinearConfig::new(dim, dim).init(device));
        Self { q: lin(), k: lin(), v: lin(), o: lin(), norm_q: rms_norm(dim, eps, device), norm_k: rms_norm(dim, eps, device), num_heads }
    }

    /// Adds role adapters to q, k, v and o.
    pub fn with_adapters(self, c: &LoraConfig) -> Self {
        Self { q: self.q.with_adapters(c), k: self.k.with_adapters(c), v: self.v.with_adapters(c), o: self.o.with_adapters(c), ..self }
    }

    /// `x: [batch, n, dim]` → (`[batch, n, dim]`, own K/V `[batch, heads, n, head_dim]`).
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        rope: &RopeTable<B>,
        roles: &RoleSelect<B>,
        attend: &Attend<B>,
        layer: usize,
    ) -> (Tensor<B, 3>, LayerKv<B>) {
        let (q, own) = self.project(x, rope, roles);
        let out = self.attend(q, &own, None, attend, layer);
        (self.output(out, roles), own)
    }

    /// Queries `[batch, heads, n, head_dim]` and own K/V of `x: [batch, n, dim]` (after RoPE).
    pub(super) fn project(&self, x: Tensor<B, 3>, rope: &RopeTable<B>, roles: &RoleSelect<B>) -> (Tensor<B, 4>, LayerKv<B>) {
        let h = self.num_heads;
        let q = normed(&self.norm_q, self.q.forward(x.clone(), roles));
        let k = normed(&self.norm_k, self.k.forward(x.clone(), roles));
        let v = self.v.forward(x, roles);
        let q = rope.apply(split_heads(q, h)).swap_dims(1, 2);
        let k = rope.apply(split_heads(k, h)).swap_dims(1, 2);
        (q, LayerKv { k, v: split_heads(v, h).swap_dims(1, 2) })
    }

    /// Attention of queries `q` over the forward's own K/V `own` and what `attend` adds.
    /// `rows`: the queries are the forward's query tokens `rows` only (a context-parallel shard;
    /// `own` is then the whole forward's K/V), so each query row sees exactly the keys, in the
    /// same order, as in the unsharded forward.
    pub(super) fn attend(
        &self,
        q: Tensor<B, 4>,
        own: &LayerKv<B>,
        rows: Option<Range<usize>>,
        attend: &Attend<B>,
        layer: usize,
    ) -> Tensor<B, 4> {
        let shard = |table: &BlockTable| rows.clone().map_or_else(|| table.clone(), |r| table.query_rows(r));
        match attend {
            Attend::Context(ctx) => {
                let mut parts: Vec<Tensor<B, 4>> = ctx
                    .keys(layer, own)
                    .into_iter()
                    .map(|keys| {
                        attention(q.clone().narrow(0, keys.batch.start, keys.batch.len()), keys.kv.k, keys.kv.v, &shard(&keys.table))
                    })
                    .collect();
                if parts.len() == 1 { parts.remove(0) } else { Tensor::cat(parts, 0) }
            }
            Attend::Packed(table) => attention(q, own.k.clone(), own.v.clone(), &shard(table)),
        }
    }

    /// The output projection of attention `out: [batch, heads, n, head_dim]`.
    pub(super) fn output(&self, out: Tensor<B, 4>, roles: &RoleSelect<B>) -> Tensor<B, 3> {
        self.o.forward(merge_heads(out), roles)
    }

    /// The plain attention of `role`: its adapters folded into the weights ([`LoraLinear::merge`]).
    pub fn merge(&self, role: crate::lora::Role) -> Self {
        Self { q: self.q.merge(role), k: self.k.merge(role), v: self.v.merge(role), o: self.o.merge(role), ..self.clone() }
    }
}

/// Cross-attention to the prompt, with role adapters on q and o.
#[derive(Module, Debug)]
pub struct CrossAttention<B: AttentionBackend> {
    /// Query projection `[dim, dim]`.
    pub q: LoraLinear<B>,
    /// Key projection of the embedded prompt `[dim, dim]`.
    pub k: Linear<B>,
    /// Value projection of the embedded prompt `[dim, dim]`.
    pub v: Linear<B>,
    /// Output projection `[dim, dim]`.
    pub o: LoraLinear<B>,
    /// RMS norm of the queries over the full hidden size.
    pub norm_q: RmsNorm<B>,
    /// RMS norm of the keys over the full hidden size.
    pub norm_k: RmsNorm<B>,
    /// Attention heads (`head_dim = dim / num_heads`).
    pub num_heads: usize,
}

impl<B: AttentionBackend> CrossAttention<B> {
    /// Fresh projections of width `dim` without adapters; `eps` is the RMS norms' epsilon.
    pub fn new(dim: usize, num_heads: usize, eps: f64, device: &B::Device) -> Self {
        let lin = || LinearConfig::new(dim, dim).init(device);
        Self {
            q: LoraLinear::new(lin()),
            k: lin(),
            v: lin(),
            o: LoraLinear::new(lin()),
            norm_q: rms_norm(dim, eps, device),
            norm_k: rms_norm(dim, eps, device),
            num_heads,
        }
    }

    /// Adds role adapters to q and o.
    pub fn with_adapters(self, c: &LoraConfig) -> Self {
        Self { q: self.q.with_adapters(c), o: self.o.with_adapters(c), ..self }
    }

    /// The prompt's K/V for this layer: `text: [batch, text_tokens, dim]` (already embedded).
    pub fn text_kv(&self, text: Tensor<B, 3>) -> LayerKv<B> {
        let k = normed(&self.norm_k, self.k.forward(text.clone()));
        let v = self.v.forward(text);
        LayerKv { k: split_heads(k, self.num_heads).swap_dims(1, 2), v: split_heads(v, self.num_heads).swap_dims(1, 2) }
    }

    /// `x: [batch, n, dim]` attends to the prompt K/V (batch 1 broadcasts).
    pub fn forward(&self, x: Tensor<B, 3>, text: &LayerKv<B>, roles: &RoleSelect<B>) -> Tensor<B, 3> {
        let q = normed(&self.norm_q, self.q.forward(x, roles));
        let q = split_heads(q, self.num_heads).swap_dims(1, 2);
        let [b, h, _, hd] = q.dims();
        let nt = text.tokens();
        let (k, v) = (text.k.clone().expand([b, h, nt, hd]), text.v.clone().expand([b, h, nt, hd]));
        let table = BlockTable::full(&[q.dims()[2]], &[nt]);
        self.o.forward(merge_heads(attention(q, k, v, &table)), roles)
    }

    /// The plain attention of `role`: its adapters folded into the weights ([`LoraLinear::merge`]).
    pub fn merge(&self, role: crate::lora::Role) -> Self {
        Self { q: self.q.merge(role), o: self.o.merge(role), ..self.clone() }
    }
}
