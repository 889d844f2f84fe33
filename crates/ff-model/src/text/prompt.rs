//! Prompt encoding for the DiT: tokenizer + umT5 encoder (+ [`PromptCache`]).
//!
//! The encoder is meant to run on the CPU (or any backend) BEFORE the DiT is built, and to be
//! dropped afterwards: results are plain f32 [`TensorData`] `[valid_len, d_model]` (the prompt's
//! valid tokens, as Wan keeps them), turned into the DiT's context with
//! [`PromptEmbedding::to_context`] on the DiT's own backend.

use super::cache::PromptCache;
use super::config::Umt5Config;
use super::encoder::Umt5Encoder;
use super::tokenizer::{PromptTokenizer, Tokens};
use crate::error::{ModelError, Result};
use burn::tensor::{Tensor, TensorData, backend::Backend};
use std::collections::HashMap;
use std::path::PathBuf;

/// The encoder output for one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEmbedding {
    /// f32 `[valid_len, d_model]`: the hidden states of the prompt's tokens (EOS included).
    pub data: TensorData,
    /// Whether the prompt was truncated to the tokenizer's length.
    pub truncated: bool,
    /// Token count before truncation.
    pub original_len: usize,
}

impl PromptEmbedding {
    /// Number of valid tokens.
    pub fn valid_len(&self) -> usize {
        self.data.shape[0]
    }

    /// Wan's text context: `[text_len, d_model]`, the valid tokens followed by zero rows.
    pub fn to_context<B: Backend>(&self, text_len: usize, device: &B::Device) -> Result<Tensor<B, 2>> {
        Self::context_of(&self.data, text_len, device)
    }

    /// The text context of the embedding `data` (`[valid_len, d_model]`): the one conditioning
    /// path of inference and of every training objective (cross-attention has no key mask, so
    /// the zero rows change its output and must be the same everywhere).
    pub fn context_of<B: Backend>(data: &TensorData, text_len: usize, device: &B::Device) -> Result<Tensor<B, 2>> {
        let [len, d] = data.shape[..] else {
            return Err(ModelError::Input(format!("prompt embedding has shape {:?}, expected [tokens, dim]", data.shape)));
        };
        if len > text_len {
            return Err(ModelError::Input(format!("prompt embedding has {len} tokens, more than the context length {text_len}")));
        }
        let valid = Tensor::<B, 2>::from_data(data.clone(), device);
        Ok(Tensor::cat(vec![valid, Tensor::zeros([text_len - len, d], device)], 0))
    }
}

/// Tokenizer and encoder together, identified by `id` (the key of cached embeddings).
pub struct PromptEncoder<B: Backend> {
    tokenizer: PromptTokenizer,
    encoder: Umt5Encoder<B>,
    id: String,
    device: B::Device,
}

impl<B: Backend> PromptEncoder<B> {
    /// `tokenizer` and `encoder` (on `device`) under the cache identifier `id`.
    pub fn new(tokenizer: PromptTokenizer, encoder: Umt5Encoder<B>, id: impl Into<String>, device: B::Device) -> Self {
        Self { tokenizer, encoder, id: id.into(), device }
    }

    /// The identifier under which this encoder's embeddings are cached.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Encodes prompts in one batch. The batch is cut to its longest valid length: padding keys
    /// are masked and the position bias depends only on offsets, so the valid tokens' states are
    /// the same as with Wan's 512-token padding.
    pub fn encode(&self, prompts: &[&str]) -> Result<Vec<PromptEmbedding>> {
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let tokens = prompts.iter().map(|p| self.tokenizer.encode(p)).collect::<Result<Vec<_>>>()?;
        let len = tokens.iter().map(Tokens::valid_len).max().unwrap_or(0);
        if let Some((p, _)) = prompts.iter().zip(&tokens).find(|(_, t)| t.valid_len() == 0) {
            return Err(ModelError::Input(format!("prompt {p:?} produced no tokens")));
        }
        let cut: Vec<Tokens> =
            tokens.iter().map(|t| Tokens { ids: t.ids[..len].to_vec(), mask: t.mask[..len].to_vec(), ..t.clone() }).collect();
        let (ids, mask) = Tokens::to_tensors::<B>(&cut, &self.device)?;
        let hidden = self.encoder.forward(ids, mask)?;
        let d = hidden.dims()[2];
        Ok(tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n = t.valid_len();
                let data = hidden.clone().slice([i..i + 1, 0..n, 0..d]).reshape([n, d]).into_data().convert::<f32>();
                PromptEmbedding { data, truncated: t.truncated, original_len: t.original_len }
            })
            .collect())
    }
}

/// Where a prompt encoder comes from: enough to name it (for the cache) without loading it.
#[derive(Debug, Clone)]
pub struct PromptEncoderFiles {
    /// `tokenizer.json` (google/umt5-xxl's for Wan2.1).
    pub tokenizer: PathBuf,
    /// Encoder weights, transformers or Wan layout.
    pub weights: PathBuf,
    /// The encoder's hyper-parameters.
    pub config: Umt5Config,
    /// Token length prompts are padded/truncated to (Wan: 512).
    pub max_len: usize,
}

impl PromptEncoderFiles {
    /// Identifier of the embeddings these files produce: weights file name and size, tokenizer
    /// length and model width.
    pub fn id(&self) -> Result<String> {
        let size = std::fs::metadata(&self.weights).map_err(|e| ModelError::io(&self.weights, e))?.len();
        let name = self.weights.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        Ok(format!("umt5:{name}:{size}:len{}:d{}", self.max_len, self.config.d_model))
    }

    /// Loads tokenizer and encoder onto `device`.
    pub fn load<B: Backend>(&self, device: &B::Device) -> Result<PromptEncoder<B>> {
        let tokenizer = PromptTokenizer::from_file(&self.tokenizer)?.with_max_len(self.max_len)?;
        let encoder = Umt5Encoder::load(&self.weights, &self.config, device)?;
        Ok(PromptEncoder::new(tokenizer, encoder, self.id()?, device.clone()))
    }

    /// Embeddings of `prompts`, from `cache` where present. The encoder is loaded on `device`
    /// only if some prompt is missing, and is dropped before this returns; new embeddings are
    /// added to the cache and the cache file is saved.
    pub fn embed<B: Backend>(
        &self,
        prompts: &[&str],
        mut cache: Option<&mut PromptCache>,
        device: &B::Device,
    ) -> Result<Vec<PromptEmbedding>> {
        let id = self.id()?;
        let missing: Vec<&str> = prompts.iter().copied().filter(|p| cache.as_ref().is_none_or(|c| c.get(p, &id).is_none())).collect();
        let mut fresh: HashMap<&str, PromptEmbedding> = HashMap::new();
        if !missing.is_empty() {
            let _span = tracing::info_span!("encode", prompts = missing.len(), weights = %self.weights.display()).entered();
            let encoder = self.load::<B>(device)?;
            fresh = missing.iter().copied().zip(encoder.encode(&missing)?).collect();
        }
        if let Some(c) = cache.as_deref_mut().filter(|_| !fresh.is_empty()) {
            for (prompt, embedding) in &fresh {
                c.insert(prompt, &id, embedding.clone())?;
            }
            c.save()?;
        }
        prompts
            .iter()
            .map(|p| {
                fresh
                    .get(p)
                    .or_else(|| cache.as_ref().and_then(|c| c.get(p, &id)))
                    .cloned()
                    .ok_or_else(|| ModelError::Input(format!("no embedding produced for prompt {p:?}")))
            })
            .collect()
    }
}
