//! The umT5 text encoder of Wan2.1 (umT5-XXL encoder, `google/umt5-xxl` tokenizer), matching
//! transformers `UMT5EncoderModel`.
//!
//! * [`Umt5Config`] / [`Umt5Encoder`]: `ids [B, L]`, `mask [B, L]` -> `[B, L, d_model]`;
//!   [`zero_padding`] applies Wan's zeroing of padding positions.
//! * [`Umt5Encoder::load`]: transformers or original Wan checkpoints ([`Umt5Layout`]).
//! * [`PromptTokenizer`]: `tokenizer.json`, padded/truncated to 512 with truncation reported;
//!   [`word_level_tokenizer`] builds one over a closed word list (the small world's).
//! * [`PromptEncoder`], [`PromptEncoderFiles`], [`PromptCache`]: prompt -> f32 embeddings, cached
//!   on disk, with the encoder dropped before the DiT runs.

mod attention;
mod cache;
mod config;
mod encoder;
mod ffn;
mod load;
mod norm;
mod position;
mod prompt;
mod tokenizer;
mod word_level;

pub use attention::{Umt5Attention, Umt5AttentionConfig};
pub use cache::PromptCache;
pub use config::{Umt5Config, WORLD_VOCAB_SIZE};
pub use encoder::{Umt5Block, Umt5Encoder, zero_padding};
pub use ffn::{GatedGeluFfn, GatedGeluFfnConfig};
pub use load::Umt5Layout;
pub use norm::{T5LayerNorm, T5LayerNormConfig};
pub use position::{RelativePositionBias, RelativePositionBiasConfig, bidirectional_bucket};
pub use prompt::{PromptEmbedding, PromptEncoder, PromptEncoderFiles};
pub use tokenizer::{PromptTokenizer, Tokens, WAN_TEXT_LEN, clean_prompt};
pub use word_level::{SPECIAL_TOKENS, word_level_tokenizer};

#[cfg(test)]
mod tests;
