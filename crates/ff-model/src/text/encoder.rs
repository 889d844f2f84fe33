//! The umT5 encoder (transformers `UMT5EncoderModel`, Wan2.1's `T5Encoder` with
//! `shared_pos=False`): token embedding, `num_layers` pre-norm blocks (self-attention with a
//! per-block relative position bias, then the gated-GELU feed-forward, each added to the residual
//! stream), and a final T5 layer norm.
//!
//! `ids: [B, L]` (Int), `mask: [B, L]` (Int, 1 = token, 0 = padding) -> `[B, L, d_model]`.
//! Padding keys are masked out of every attention; the outputs AT padding positions are still
//! computed (as transformers does) and are not zero: see [`zero_padding`] for Wan's convention.

use super::attention::{Umt5Attention, Umt5AttentionConfig};
use super::config::Umt5Config;
use super::ffn::{GatedGeluFfn, GatedGeluFfnConfig};
use super::norm::{T5LayerNorm, T5LayerNormConfig};
use super::position::{RelativePositionBias, RelativePositionBiasConfig};
use crate::error::{ModelError, Result};
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::{DType, Int, Tensor, backend::Backend};

/// One encoder block: `x + attn(norm1(x))`, then `x + ffn(norm2(x))`.
#[derive(Module, Debug)]
pub struct Umt5Block<B: Backend> {
    /// Norm before self-attention.
    pub norm1: T5LayerNorm<B>,
    /// Self-attention.
    pub attn: Umt5Attention<B>,
    /// The block's own relative position bias.
    pub pos_embedding: RelativePositionBias<B>,
    /// Norm before the feed-forward.
    pub norm2: T5LayerNorm<B>,
    /// Gated-GELU feed-forward.
    pub ffn: GatedGeluFfn<B>,
}

impl<B: Backend> Umt5Block<B> {
    fn new(c: &Umt5Config, device: &B::Device) -> Self {
        let norm = T5LayerNormConfig::new(c.d_model).with_epsilon(c.layer_norm_epsilon);
        Self {
            norm1: norm.init(device),
            attn: Umt5AttentionConfig::new(c.d_model, c.d_kv, c.num_heads).init(device),
            pos_embedding: RelativePositionBiasConfig::new(
                c.relative_attention_num_buckets,
                c.num_heads,
                c.relative_attention_max_distance,
            )
            .init(device),
            norm2: norm.init(device),
            ffn: GatedGeluFfnConfig::new(c.d_model, c.d_ff).init(device),
        }
    }

    /// `x: [B, L, d_model]`, `mask_bias: [B, 1, 1, L]` (f32, 0 or f32::MIN) -> `[B, L, d_model]`.
    pub fn forward(&self, x: Tensor<B, 3>, mask_bias: Tensor<B, 4>) -> Tensor<B, 3> {
        let [_, l, _] = x.dims();
        let bias = self.pos_embedding.forward(l, &x.device()) + mask_bias;
        let x = x.clone() + self.attn.forward(self.norm1.forward(x), bias);
        x.clone() + self.ffn.forward(self.norm2.forward(x))
    }
}

/// The umT5 text encoder.
#[derive(Module, Debug)]
pub struct Umt5Encoder<B: Backend> {
    /// Token embedding `[vocab_size, d_model]`.
    pub token_embedding: Embedding<B>,
    /// The `num_layers` encoder blocks.
    pub blocks: Vec<Umt5Block<B>>,
    /// Final layer norm.
    pub norm: T5LayerNorm<B>,
}

impl Umt5Config {
    /// An encoder with freshly initialised weights (load real ones with [`Umt5Encoder::load`]).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Umt5Encoder<B> {
        Umt5Encoder {
            token_embedding: EmbeddingConfig::new(self.vocab_size, self.d_model).init(device),
            blocks: (0..self.num_layers).map(|_| Umt5Block::new(self, device)).collect(),
            norm: T5LayerNormConfig::new(self.d_model).with_epsilon(self.layer_norm_epsilon).init(device),
        }
    }
}

impl<B: Backend> Umt5Encoder<B> {
    /// `ids: [B, L]`, `mask: [B, L]` (1 = token, 0 = padding) -> last hidden state
    /// `[B, L, d_model]`. Shapes that differ, or a token id outside the vocabulary (a tokenizer
    /// that does not match the weights), are [`ModelError::Input`] errors.
    pub fn forward(&self, ids: Tensor<B, 2, Int>, mask: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>> {
        if ids.dims() != mask.dims() {
            return Err(ModelError::Input(format!(
                "umT5: token ids {:?} and attention mask {:?} must have the same shape [B, L]",
                ids.dims(),
                mask.dims()
            )));
        }
        let vocab = self.token_embedding.weight.dims()[0];
        let values = ids.to_data().convert::<i64>();
        if let Some(bad) = values.as_slice::<i64>().unwrap_or_default().iter().find(|&&i| i < 0 || i as usize >= vocab) {
            return Err(ModelError::Input(format!(
                "token id {bad} is outside the encoder's vocabulary of {vocab}: tokenizer and weights do not match"
            )));
        }
        let [b, l] = mask.dims();
        // transformers adds finfo(f32).min to the logits of padding keys.
        let mask_bias = mask.equal_elem(0).float().cast(DType::F32).reshape([b, 1, 1, l]) * f32::MIN;
        let mut x = self.token_embedding.forward(ids);
        for block in &self.blocks {
            x = block.forward(x, mask_bias.clone());
        }
        Ok(self.norm.forward(x))
    }
}

/// Wan's convention for the prompt context: the encoder output with every padding position
/// (`mask == 0`) set to zero, so the DiT's cross-attention sees the prompt's valid tokens followed
/// by zero vectors. `hidden: [B, L, D]`, `mask: [B, L]` -> `[B, L, D]`.
pub fn zero_padding<B: Backend>(hidden: Tensor<B, 3>, mask: Tensor<B, 2, Int>) -> Tensor<B, 3> {
    let [b, l, d] = hidden.dims();
    let padding = mask.equal_elem(0).unsqueeze_dim::<3>(2).expand([b, l, d]);
    hidden.mask_fill(padding, 0.0)
}
