//! Prompt tokenizer over a HuggingFace `tokenizer.json` (Wan2.1 uses `google/umt5-xxl`'s), with
//! Wan's call: special tokens added (umT5 appends `</s>`), padded with the pad token to a fixed
//! length (512 by default) and truncated to it. Truncation is reported, never silent: the
//! end-of-sequence token is kept and [`Tokens::truncated`] / [`Tokens::original_len`] say what
//! was cut.
//!
//! The prompt is whitespace-cleaned first (runs of whitespace become one space, ends trimmed),
//! like Wan's `clean='whitespace'`; Wan's additional `ftfy.fix_text`/HTML unescaping is not done.

use crate::error::{ModelError, Result};
use burn::tensor::{Int, Tensor, TensorData, backend::Backend};
use std::path::Path;
use std::str::FromStr;
use tokenizers::{PostProcessor, Tokenizer, TruncationDirection};

/// Token sequence length Wan2.1 encodes prompts to.
pub const WAN_TEXT_LEN: usize = 512;

/// One tokenized prompt, padded to the tokenizer's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    /// Token ids `[max_len]`, padding included.
    pub ids: Vec<i64>,
    /// 1 for a token, 0 for padding `[max_len]`.
    pub mask: Vec<i64>,
    /// Whether the prompt had more tokens than fit and was cut.
    pub truncated: bool,
    /// Number of tokens (special tokens included) before truncation.
    pub original_len: usize,
}

impl Tokens {
    /// Number of real (non-padding) tokens.
    pub fn valid_len(&self) -> usize {
        self.mask.iter().filter(|&&m| m != 0).count()
    }

    /// Stacks equally long token sequences into `(ids, mask)`, each `[B, max_len]`.
    pub fn to_tensors<B: Backend>(batch: &[Tokens], device: &B::Device) -> Result<(Tensor<B, 2, Int>, Tensor<B, 2, Int>)> {
        let len = batch.first().map_or(0, |t| t.ids.len());
        if batch.is_empty() || batch.iter().any(|t| t.ids.len() != len || t.mask.len() != len) {
            return Err(ModelError::Input("token batch is empty or its sequences differ in length".into()));
        }
        let stack = |f: fn(&Tokens) -> &Vec<i64>| {
            let flat: Vec<i64> = batch.iter().flat_map(|t| f(t).iter().copied()).collect();
            Tensor::from_data(TensorData::new(flat, [batch.len(), len]), device)
        };
        Ok((stack(|t| &t.ids), stack(|t| &t.mask)))
    }
}

/// A `tokenizer.json` tokenizer padding/truncating to a fixed length.
#[derive(Debug, Clone)]
pub struct PromptTokenizer {
    tokenizer: Tokenizer,
    pad_id: u32,
    added_tokens: usize,
    max_len: usize,
}

impl PromptTokenizer {
    /// Reads `tokenizer.json`. The pad id is the file's padding id, else the id of `<pad>`;
    /// the file's own truncation/padding settings are replaced by this type's.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        // Checked as JSON first: the tokenizers crate panics (instead of erring) on some syntax
        // errors inside its sections (found by the loader fuzz test).
        serde_json::from_str::<serde_json::Value>(&text).map_err(|source| ModelError::Json { path: path.to_path_buf(), source })?;
        let what = format!("{}: cannot read tokenizer", path.display());
        let mut tokenizer = guarded(&what, || Tokenizer::from_str(&text).map_err(|e| ModelError::Tokenizer(format!("{what}: {e}"))))?;
        let pad_id = tokenizer
            .get_padding()
            .map(|p| p.pad_id)
            .or_else(|| tokenizer.token_to_id("<pad>"))
            .ok_or_else(|| ModelError::Tokenizer(format!("{}: no padding settings and no '<pad>' token", path.display())))?;
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(|e| ModelError::Tokenizer(format!("{}: {e}", path.display())))?;
        let added_tokens = guarded(&what, || Ok(tokenizer.get_post_processor().map_or(0, |p| p.added_tokens(false))))?;
        let this = Self { tokenizer, pad_id, added_tokens, max_len: WAN_TEXT_LEN };
        // A post-processor whose template names an undefined special token fails here, at load.
        this.encode("a").map_err(|e| ModelError::Tokenizer(format!("{what}: {e}")))?;
        Ok(this)
    }

    /// Pads/truncates to `max_len` tokens instead of 512; it must leave room for at least one
    /// prompt token beside the special tokens.
    pub fn with_max_len(mut self, max_len: usize) -> Result<Self> {
        if max_len <= self.added_tokens {
            return Err(ModelError::Config(format!(
                "tokenizer max_len {max_len} leaves no room beside its {} special token(s)",
                self.added_tokens
            )));
        }
        self.max_len = max_len;
        Ok(self)
    }

    /// The padded length of every [`Tokens`].
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Tokenizes one prompt (see the module doc).
    pub fn encode(&self, prompt: &str) -> Result<Tokens> {
        guarded(&format!("cannot tokenize prompt {prompt:?}"), || self.encode_unguarded(prompt))
    }

    fn encode_unguarded(&self, prompt: &str) -> Result<Tokens> {
        let err = |e: tokenizers::Error| ModelError::Tokenizer(format!("cannot tokenize prompt {prompt:?}: {e}"));
        let mut encoding = self.tokenizer.encode(clean_prompt(prompt).as_str(), false).map_err(err)?;
        let original_len = encoding.len() + self.added_tokens;
        let truncated = original_len > self.max_len;
        if truncated {
            encoding.truncate(self.max_len - self.added_tokens, 0, TruncationDirection::Right);
        }
        let encoding = self.tokenizer.post_process(encoding, None, true).map_err(err)?;
        let mut ids: Vec<i64> = encoding.get_ids().iter().map(|&i| i as i64).collect();
        let mut mask = vec![1i64; ids.len()];
        ids.resize(self.max_len, self.pad_id as i64);
        mask.resize(self.max_len, 0);
        Ok(Tokens { ids, mask, truncated, original_len })
    }
}

/// Runs `f`, turning a panic inside the tokenizers crate into an error: hostile `tokenizer.json`
/// files reach some (e.g. a template naming a special token the file does not define panics at
/// the first encode; found by the loader fuzz test).
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let why = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
        Err(ModelError::Tokenizer(format!("{what}: the tokenizer failed ({})", why.unwrap_or_default())))
    })
}

/// Wan's whitespace cleaning: runs of whitespace become one space; ends are trimmed.
pub fn clean_prompt(prompt: &str) -> String {
    prompt.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::processors::template::TemplateProcessing;

    /// Writes a word-level `tokenizer.json` shaped like umT5's (`<pad>` = 0, `</s>` = 1 appended
    /// after every prompt) into a fresh temp directory and returns its path.
    pub(crate) fn write_test_tokenizer(name: &str) -> std::path::PathBuf {
        let words = ["<pad>", "</s>", "<unk>", "a", "cat", "sits", "on", "the", "mat", "red"];
        let vocab = words.iter().enumerate().map(|(i, w)| (w.to_string(), i as u32)).collect();
        let model = WordLevel::builder().vocab(vocab).unk_token("<unk>".into()).build().unwrap();
        let mut tokenizer = Tokenizer::new(model);
        tokenizer.with_pre_tokenizer(Some(Whitespace));
        let eos = TemplateProcessing::builder().try_single("$A </s>").unwrap().special_tokens(vec![("</s>", 1)]).build().unwrap();
        tokenizer.with_post_processor(Some(eos));
        let dir = std::env::temp_dir().join(format!("ff-umt5-tok-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        tokenizer.save(&path, false).unwrap();
        path
    }

    #[test]
    fn pads_with_mask_and_appends_eos() {
        let tok = PromptTokenizer::from_file(write_test_tokenizer("pad")).unwrap().with_max_len(8).unwrap();
        let t = tok.encode("  a red\n\tcat sits  ").unwrap();
        assert_eq!(t.ids, vec![3, 9, 4, 5, 1, 0, 0, 0]);
        assert_eq!(t.mask, vec![1, 1, 1, 1, 1, 0, 0, 0]);
        assert_eq!((t.truncated, t.original_len, t.valid_len()), (false, 5, 5));
        assert_eq!(tok.encode("a dog").unwrap().ids[..3], [3, 2, 1], "unknown word -> <unk>");
        assert_eq!(PromptTokenizer::from_file(write_test_tokenizer("default")).unwrap().encode("a").unwrap().ids.len(), 512);
    }

    #[test]
    fn truncation_is_reported_and_keeps_eos() {
        let tok = PromptTokenizer::from_file(write_test_tokenizer("trunc")).unwrap().with_max_len(4).unwrap();
        let t = tok.encode("a cat sits on the mat").unwrap();
        assert_eq!(t.ids, vec![3, 4, 5, 1]);
        assert_eq!(t.mask, vec![1, 1, 1, 1]);
        assert!(t.truncated);
        assert_eq!(t.original_len, 7);
        let exact = tok.encode("a cat sits").unwrap();
        assert!(!exact.truncated && exact.original_len == 4);
        assert!(tok.with_max_len(1).is_err(), "max_len must leave room beside </s>");
    }

    #[test]
    fn damaged_tokenizer_files_are_errors_not_panics() {
        let path = write_test_tokenizer("damaged");
        let good: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // the template appends </s> but the file no longer defines it (tokenizers panics on it)
        let mut undefined = good.clone();
        undefined["post_processor"]["special_tokens"] = serde_json::json!({});
        std::fs::write(&path, undefined.to_string()).unwrap();
        let err = PromptTokenizer::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("tokenizer.json") && err.contains("the tokenizer failed"), "{err}");
        // a syntax error inside the decoder section (tokenizers panics on it)
        let text = good.to_string().replacen(r#""decoder":null"#, r#""decoder":{"type":"Metaspace","split":tru}"#, 1);
        assert!(text.contains("tru}"), "{text}");
        std::fs::write(&path, text).unwrap();
        let err = PromptTokenizer::from_file(&path).unwrap_err();
        assert!(matches!(err, ModelError::Json { .. }), "{err}");
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let err = PromptTokenizer::from_file("/nonexistent/tokenizer.json").unwrap_err().to_string();
        assert!(err.contains("/nonexistent/tokenizer.json"), "{err}");
    }

    #[test]
    fn batches_stack_into_tensors() {
        let tok = PromptTokenizer::from_file(write_test_tokenizer("batch")).unwrap().with_max_len(5).unwrap();
        let batch = [tok.encode("a cat").unwrap(), tok.encode("the mat").unwrap()];
        let (ids, mask) = Tokens::to_tensors::<burn::backend::NdArray>(&batch, &Default::default()).unwrap();
        assert_eq!(ids.into_data().to_vec::<i64>().unwrap(), vec![3, 4, 1, 0, 0, 7, 8, 1, 0, 0]);
        assert_eq!(mask.into_data().to_vec::<i64>().unwrap(), vec![1, 1, 1, 0, 0, 1, 1, 1, 0, 0]);
        assert!(Tokens::to_tensors::<burn::backend::NdArray>(&[], &Default::default()).is_err());
    }
}
