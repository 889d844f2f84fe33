//! The prompt: tokenized first (cheap) so an over-long prompt is refused before any model loads,
//! then encoded by umT5 on the CPU, or taken from the prompt cache. The encoder is loaded only
//! when the cache misses and is dropped before this returns, so it never shares memory with the
//! DiT.

use std::path::Path;

use anyhow::{Context, Result, bail};
use ff_model::text::{PromptCache, PromptEmbedding, PromptEncoderFiles, PromptTokenizer};

use crate::backend::{CpuBackend, cpu_device};

/// Tokens of `prompt` (special tokens included). More than `max_len` is an error unless
/// `truncate` is set, in which case it is reported and the prompt is cut.
pub fn check_length(tokenizer: &Path, max_len: usize, prompt: &str, truncate: bool) -> Result<usize> {
    let tokens = PromptTokenizer::from_file(tokenizer)
        .and_then(|t| t.with_max_len(max_len))
        .with_context(|| format!("cannot use tokenizer {}", tokenizer.display()))?
        .encode(prompt)?;
    if tokens.truncated {
        if !truncate {
            bail!(
                "the prompt is {} tokens; the text encoder takes at most {max_len} (with </s>): \
                 shorten it, or pass --truncate-prompt to keep the first {max_len}",
                tokens.original_len
            );
        }
        eprintln!("note: the prompt is {} tokens; truncated to the first {max_len}", tokens.original_len);
    }
    Ok(tokens.original_len.min(max_len))
}

/// Where the embedding came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Encoded,
    Cache,
}

/// Whether `cache` (if any) already holds the embedding of `prompt` by these files.
pub fn is_cached(files: &PromptEncoderFiles, prompt: &str, cache: Option<&Path>) -> Result<bool> {
    let Some(path) = cache else { return Ok(false) };
    Ok(PromptCache::open(path)?.get(prompt, &files.id()?).is_some())
}

/// The embedding of `prompt`, encoded on the CPU or read from (and then added to) `cache`.
pub fn embed(files: &PromptEncoderFiles, prompt: &str, cache: Option<&Path>) -> Result<(PromptEmbedding, Source)> {
    let mut cache = cache.map(PromptCache::open).transpose()?;
    let id = files.id()?;
    let source = match cache.as_ref().and_then(|c| c.get(prompt, &id)) {
        Some(_) => Source::Cache,
        None => Source::Encoded,
    };
    let embedding = files
        .embed::<CpuBackend>(&[prompt], cache.as_mut(), &cpu_device())
        .with_context(|| format!("cannot encode the prompt with {}", files.weights.display()))?
        .pop()
        .context("the text encoder returned no embedding")?;
    Ok((embedding, source))
}
