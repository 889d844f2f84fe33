//! Attention state a forward reads and publishes.
//!
//! * [`LayerKv`]: self-attention keys/values of one layer, `[batch, heads, tokens, head_dim]`,
//!   keys after RoPE (absolute latent positions are baked in, so entries stay valid for readers).
//! * [`ChunkKv`]: what one forward publishes, a [`LayerKv`] per layer.
//! * [`KvContext`]: what the self-attention of one forward reads besides its own tokens, as
//!   [`Keys`]: a key/value set and the [`BlockTable`] of which key frames the queries may see.
//!   The attention context is a parameter of the forward, never a different model.
//! * [`TextContext`]: the prompt's cross-attention K/V per layer, computed once per prompt.

use crate::error::{ModelError, Result};
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::BlockTable;
use std::ops::Range;

/// Keys and values of one layer: `[batch, heads, tokens, head_dim]`.
#[derive(Clone, Debug)]
pub struct LayerKv<B: Backend> {
    /// Keys `[batch, heads, tokens, head_dim]` (self-attention: after RoPE).
    pub k: Tensor<B, 4>,
    /// Values `[batch, heads, tokens, head_dim]`.
    pub v: Tensor<B, 4>,
}

impl<B: Backend> LayerKv<B> {
    /// Tokens held (dimension 2).
    pub fn tokens(&self) -> usize {
        self.k.dims()[2]
    }

    /// Concatenates along tokens.
    pub fn cat(parts: Vec<LayerKv<B>>) -> Self {
        Self::join(parts, 2)
    }

    /// Stacks along the batch dimension (equal token counts).
    pub fn stack(parts: Vec<LayerKv<B>>) -> Self {
        Self::join(parts, 0)
    }

    fn join(parts: Vec<LayerKv<B>>, dim: usize) -> Self {
        let (k, v): (Vec<_>, Vec<_>) = parts.into_iter().map(|p| (p.k, p.v)).unzip();
        Self { k: Tensor::cat(k, dim), v: Tensor::cat(v, dim) }
    }
}

/// Per-layer self-attention K/V published by one forward.
#[derive(Clone, Debug)]
pub struct ChunkKv<B: Backend> {
    /// One entry per DiT block, in layer order.
    pub layers: Vec<LayerKv<B>>,
}

impl<B: Backend> ChunkKv<B> {
    /// Tokens per layer.
    pub fn tokens(&self) -> usize {
        self.layers.first().map_or(0, LayerKv::tokens)
    }

    /// Bytes held by all layers' keys and values.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|l| 2 * l.k.shape().num_elements() * l.k.dtype().size()).sum()
    }

    /// Stacks entries of equal size along the batch dimension (batched forwards).
    pub fn stack(parts: &[&ChunkKv<B>]) -> Self {
        let layers = parts.first().map_or(0, |p| p.layers.len());
        Self { layers: (0..layers).map(|l| LayerKv::stack(parts.iter().map(|p| p.layers[l].clone()).collect())).collect() }
    }

    /// Batch element `b` of every layer.
    pub fn batch_element(&self, b: usize) -> Self {
        let pick = |t: &Tensor<B, 4>| t.clone().narrow(0, b, 1);
        Self { layers: self.layers.iter().map(|l| LayerKv { k: pick(&l.k), v: pick(&l.v) }).collect() }
    }
}

/// The key/value set that the queries of batch elements `batch` of one layer attend over:
/// `kv: [batch.len(), heads, key_tokens, head_dim]`, `table` over the forward's own tokens
/// (queries) and `key_tokens`.
pub struct Keys<B: Backend> {
    /// The batch elements whose queries attend over this set.
    pub batch: Range<usize>,
    /// Keys and values `[batch.len(), heads, key_tokens, head_dim]`.
    pub kv: LayerKv<B>,
    /// Which key frames each query frame may see.
    pub table: BlockTable,
}

/// What a forward's self-attention reads. `own` is the forward's own post-RoPE K/V of `layer`
/// (`[batch, heads, tokens, head_dim]`); the context returns the key sets to attend over, which
/// together cover the batch (attention is permutation-invariant over keys, positions live in the
/// keys themselves).
pub trait KvContext<B: Backend> {
    /// The key sets of layer `layer`, given the forward's own K/V `own` of that layer.
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Vec<Keys<B>>;

    /// Checked before a forward: the context fits a model of `layers` layers whose forward has
    /// `[batch, heads, _, head_dim]` K/V (entries from another model or batch are an error, not a
    /// panic inside attention).
    fn check(&self, _layers: usize, _batch: usize, _heads: usize, _head_dim: usize) -> Result<()> {
        Ok(())
    }
}

/// Checks that `kv` (named `what` in errors) has `layers` layers of `[batch, heads, _, head_dim]`.
pub(crate) fn check_entry<B: Backend>(
    what: &str,
    kv: &ChunkKv<B>,
    layers: usize,
    batch: usize,
    heads: usize,
    head_dim: usize,
) -> Result<()> {
    if kv.layers.len() != layers {
        return Err(ModelError::Input(format!("{what} has {} layers, the model {layers}", kv.layers.len())));
    }
    for (l, layer) in kv.layers.iter().enumerate() {
        for (name, t) in [("k", &layer.k), ("v", &layer.v)] {
            let [b, h, n, d] = t.dims();
            if [b, h, d] != [batch, heads, head_dim] || n != layer.k.dims()[2] {
                return Err(ModelError::Input(format!(
                    "{what}: layer {l} {name} is [{b}, {h}, {n}, {d}], the forward needs [{batch}, {heads}, {}, {head_dim}]",
                    layer.k.dims()[2]
                )));
            }
        }
    }
    Ok(())
}

/// An ordered list of published segments (e.g. anchor window, then history), concatenated once
/// per layer with the forward's own K/V last (a copy of the context per layer; the executors
/// read through an in-place [`super::KvWindow`] instead). No segments: the forward attends to
/// itself only, without a copy.
pub struct SegmentContext<'a, B: Backend> {
    /// The published entries read, in key order.
    pub segments: Vec<&'a ChunkKv<B>>,
}

impl<'a, B: Backend> SegmentContext<'a, B> {
    /// A context over `segments`, in key order.
    pub fn new(segments: Vec<&'a ChunkKv<B>>) -> Self {
        Self { segments }
    }
    /// No segments: the forward attends to itself only.
    pub fn empty() -> Self {
        Self { segments: Vec::new() }
    }
}

impl<B: Backend> KvContext<B> for SegmentContext<'_, B> {
    fn keys(&self, layer: usize, own: &LayerKv<B>) -> Vec<Keys<B>> {
        let mut parts: Vec<LayerKv<B>> = self.segments.iter().map(|s| s.layers[layer].clone()).collect();
        parts.push(own.clone());
        let sizes: Vec<usize> = parts.iter().map(LayerKv::tokens).collect();
        let table = BlockTable::full(&[own.tokens()], &sizes);
        let kv = if parts.len() == 1 { own.clone() } else { LayerKv::cat(parts) };
        vec![Keys { batch: 0..own.k.dims()[0], kv, table }]
    }

    fn check(&self, layers: usize, batch: usize, heads: usize, head_dim: usize) -> Result<()> {
        self.segments.iter().enumerate().try_for_each(|(i, s)| check_entry(&format!("K/V segment {i}"), s, layers, batch, heads, head_dim))
    }
}

/// The prompt's cross-attention K/V, one [`LayerKv`] per layer (`[batch, heads, text_tokens, head_dim]`).
#[derive(Clone, Debug)]
pub struct TextContext<B: Backend> {
    /// One entry per DiT block, in layer order.
    pub layers: Vec<LayerKv<B>>,
}
