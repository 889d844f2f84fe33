//! The prompt: tokenized first (cheap) so an over-long prompt is refused before any model loads,
//! then encoded by umT5 on the CPU, or taken from the prompt cache. The encoder is loaded only
//! when the cache misses and is dropped before this returns, so it never shares memory with the
//! DiT.
//!
//! A small-world student reads prompts in its vocabulary ([`read_as`]): the canonical caption of
//! the parsed prompt, refusing unknown words with the list of what it knows.

use std::path::Path;

use ff_model::text::{PromptCache, PromptEmbedding, PromptEncoderFiles, PromptTokenizer};
use ff_sched::student::{StudentManifest, Vocabulary};

use crate::Cpu;
use crate::error::{Context, Result, invalid};

/// The text the model's encoder reads for `prompt`: for a small-world student the canonical
/// caption of the parsed prompt ("a red circle bounces" reads "a red circle bounces on a black
/// background", the wording of every training caption), else the prompt as given. Refuses a
/// prompt outside a student's vocabulary, naming the unknown words and listing what the model
/// knows, or one its domain never draws (`ff_world::Prompt::undrawn`).
pub fn read_as(student: Option<&StudentManifest>, prompt: &str) -> Result<String> {
    if student.is_none_or(|s| s.vocabulary == Vocabulary::Open) {
        return Ok(prompt.to_string());
    }
    let cannot = "this model was trained on the small world's captions only and cannot draw this prompt";
    let parsed = match ff_world::Prompt::parse(prompt) {
        Err(e) => invalid!("{cannot}: {e}"),
        Ok(p) => p,
    };
    if let Some(why) = parsed.undrawn() {
        invalid!("{cannot}: {why}");
    }
    Ok(parsed.caption())
}

/// Whether every caption is a small-world prompt: the vocabulary a student trained on them gets.
pub fn vocabulary_of<'a>(captions: impl Iterator<Item = &'a str>) -> Vocabulary {
    Vocabulary::of_captions(captions, |c| ff_world::Prompt::parse(c).is_ok())
}

/// Tokens of `prompt` (special tokens included), and whether it was cut to `max_len`. More than
/// `max_len` is an error unless `truncate` is set.
pub fn check_length(tokenizer: &Path, max_len: usize, prompt: &str, truncate: bool) -> Result<(usize, bool)> {
    let tokens = PromptTokenizer::from_file(tokenizer)
        .and_then(|t| t.with_max_len(max_len))
        .with_context(|| format!("cannot use tokenizer {}", tokenizer.display()))?
        .encode(prompt)?;
    if tokens.truncated {
        if !truncate {
            invalid!(
                "the prompt is {} tokens; the text encoder takes at most {max_len} (with </s>): \
                 shorten it, or pass --truncate-prompt to keep the first {max_len}",
                tokens.original_len
            );
        }
        tracing::warn!(tokens = tokens.original_len, max_len, "the prompt is truncated");
    }
    Ok((tokens.original_len.min(max_len), tokens.truncated))
}

/// Where the embedding came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Encoded by umT5 on the CPU.
    Encoded,
    /// Read from the prompt cache.
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
    let _span = tracing::info_span!("encode_prompt", ?source).entered();
    let embedding = files
        .embed::<Cpu>(&[prompt], cache.as_mut(), &Default::default())
        .with_context(|| format!("cannot encode the prompt with {}", files.weights.display()))?
        .pop()
        .context("the text encoder returned no embedding")?;
    Ok((embedding, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff_sched::ContractConfig;

    #[test]
    fn small_world_students_refuse_prompts_outside_the_vocabulary() {
        let world = StudentManifest { contract: ContractConfig::new(21), frame_size: [64, 64], vocabulary: Vocabulary::SmallWorld };
        let full = "a red circle bounces on a black background";
        assert_eq!(read_as(Some(&world), full).unwrap(), full);
        assert_eq!(read_as(Some(&world), "A red ball bounces.").unwrap(), full, "the training captions' wording");
        let err = read_as(Some(&world), "a purple dragon flies").unwrap_err().to_string();
        assert!(err.contains("unknown words 'dragon', 'flies'"), "{err}");
        for known in ["circle, square, triangle", "red, green, blue", "black, white, gray, dark blue", "moves left", "bounces"] {
            assert!(err.contains(known), "the message lists what the model knows ({known}): {err}");
        }
        let err = read_as(Some(&world), "a blue circle moves right on a gray background").unwrap_err().to_string();
        assert!(err.contains("never draws blue on a gray background"), "{err}");
        let open = StudentManifest { vocabulary: Vocabulary::Open, ..world };
        assert_eq!(read_as(Some(&open), "a purple dragon flies").unwrap(), "a purple dragon flies");
        assert_eq!(read_as(None, "a purple dragon flies").unwrap(), "a purple dragon flies");
        assert_eq!(vocabulary_of([full].into_iter()), Vocabulary::SmallWorld);
        assert_eq!(vocabulary_of([full, "a fox runs in the snow"].into_iter()), Vocabulary::Open);
    }
}
