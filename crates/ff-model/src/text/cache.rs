//! On-disk cache of prompt embeddings, so the 11 GB umT5 encoder need not be loaded again for a
//! prompt seen before.
//!
//! One safetensors file; entry `i` is the f32 tensor `e{i}` `[valid_len, d_model]` (the prompt's
//! valid tokens only) and the metadata entry `e{i}` = JSON `{"encoder", "prompt", "truncated",
//! "original_len"}`. Entries are keyed by (prompt, encoder id): the id names the weights and
//! tokenizer settings that produced them. The file is rewritten whole on [`PromptCache::save`],
//! atomically (temp file + rename).

use super::prompt::PromptEmbedding;
use crate::error::{ModelError, Result};
use burn::tensor::TensorData;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize)]
struct EntryMeta {
    encoder: String,
    prompt: String,
    truncated: bool,
    original_len: usize,
}

/// Prompt embeddings by (prompt, encoder id), backed by one safetensors file.
#[derive(Debug)]
pub struct PromptCache {
    path: PathBuf,
    entries: BTreeMap<(String, String), PromptEmbedding>,
}

impl PromptCache {
    /// Opens the cache at `path`; a file that does not exist yet is an empty cache.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut entries = BTreeMap::new();
        if path.exists() {
            let bytes = std::fs::read(&path).map_err(|e| ModelError::io(&path, e))?;
            let bad = |why: String| ModelError::corrupt(&path, why);
            let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(e.to_string()))?;
            let tensors = SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
            let metadata = header.metadata().clone().unwrap_or_default();
            for (name, view) in tensors.tensors() {
                let meta: EntryMeta = metadata
                    .get(&name)
                    .and_then(|m| serde_json::from_str(m).ok())
                    .ok_or_else(|| bad(format!("tensor '{name}' has no valid metadata entry")))?;
                if view.dtype() != Dtype::F32 || view.shape().len() != 2 {
                    return Err(bad(format!("tensor '{name}' is not a 2-D F32 embedding")));
                }
                let values: Vec<f32> = view.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
                let data = TensorData::new(values, view.shape().to_vec());
                let embedding = PromptEmbedding { data, truncated: meta.truncated, original_len: meta.original_len };
                entries.insert((meta.prompt, meta.encoder), embedding);
            }
        }
        Ok(Self { path, entries })
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The embedding of `prompt` made by encoder `encoder_id`, if cached.
    pub fn get(&self, prompt: &str, encoder_id: &str) -> Option<&PromptEmbedding> {
        self.entries.get(&(prompt.to_string(), encoder_id.to_string()))
    }

    /// Adds (or replaces) an entry in memory; [`save`](Self::save) writes the file. The
    /// embedding must be 2-D `[valid_len, d_model]`.
    pub fn insert(&mut self, prompt: &str, encoder_id: &str, embedding: PromptEmbedding) -> Result<()> {
        if embedding.data.shape.len() != 2 {
            return Err(ModelError::Input(format!(
                "prompt cache {}: embedding of {prompt:?} has shape {:?}, expected [tokens, d_model]",
                self.path.display(),
                embedding.data.shape
            )));
        }
        let data = embedding.data.convert::<f32>();
        self.entries.insert((prompt.to_string(), encoder_id.to_string()), PromptEmbedding { data, ..embedding });
        Ok(())
    }

    /// Number of cached embeddings.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds no embedding.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the whole cache to its file atomically (temp file in the same directory, then
    /// rename).
    pub fn save(&self) -> Result<()> {
        let mut metadata = HashMap::new();
        let mut buffers = Vec::with_capacity(self.entries.len());
        for (i, ((prompt, encoder), e)) in self.entries.iter().enumerate() {
            let name = format!("e{i}");
            let meta = EntryMeta { encoder: encoder.clone(), prompt: prompt.clone(), truncated: e.truncated, original_len: e.original_len };
            metadata.insert(name.clone(), serde_json::to_string(&meta).expect("plain struct serialises"));
            let values = e.data.to_vec::<f32>().map_err(|err| ModelError::Input(format!("{prompt:?}: {err:?}")))?;
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            buffers.push((name, e.data.shape.to_vec(), bytes));
        }
        let views = buffers
            .iter()
            .map(|(name, shape, bytes)| {
                let view = TensorView::new(Dtype::F32, shape.clone(), bytes).map_err(|e| ModelError::corrupt(&self.path, e.to_string()))?;
                Ok((name.clone(), view))
            })
            .collect::<Result<Vec<_>>>()?;
        let file_name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("prompt-cache");
        let tmp = self.path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
        if let Err(e) = safetensors::serialize_to_file(views, Some(metadata), &tmp) {
            let _ = std::fs::remove_file(&tmp);
            return Err(ModelError::corrupt(&tmp, format!("cannot write prompt cache: {e}")));
        }
        std::fs::rename(&tmp, &self.path).map_err(|e| ModelError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedding(values: Vec<f32>, tokens: usize, truncated: bool) -> PromptEmbedding {
        let d = values.len() / tokens;
        PromptEmbedding { data: TensorData::new(values, [tokens, d]), truncated, original_len: tokens + 3 * truncated as usize }
    }

    #[test]
    fn round_trip_through_the_file() {
        let dir = std::env::temp_dir().join(format!("ff-umt5-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("prompts.safetensors");
        let _ = std::fs::remove_file(&path);

        let mut cache = PromptCache::open(&path).unwrap();
        assert!(cache.is_empty());
        let cat = embedding(vec![0.5, -1.25, 3.0, 1e-7, -0.0, 42.0], 2, false);
        let long = embedding(vec![1.0, 2.0, 3.0], 1, true);
        cache.insert("a cat", "umt5:A", cat.clone()).unwrap();
        cache.insert("a cat", "umt5:B", long.clone()).unwrap();
        cache.insert("a \"quoted\"\nprompt ✓", "umt5:A", long.clone()).unwrap();
        assert!(cache.insert("bad", "umt5:A", PromptEmbedding { data: TensorData::new(vec![1.0f32], [1]), ..long.clone() }).is_err());
        cache.save().unwrap();

        let reopened = PromptCache::open(&path).unwrap();
        assert_eq!(reopened.len(), 3);
        assert_eq!(reopened.get("a cat", "umt5:A"), Some(&cat));
        assert_eq!(reopened.get("a cat", "umt5:B"), Some(&long));
        assert_eq!(reopened.get("a \"quoted\"\nprompt ✓", "umt5:A"), Some(&long));
        assert_eq!(reopened.get("a dog", "umt5:A"), None);
        assert_eq!(reopened.get("a cat", "umt5:C"), None);
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("prompts.safetensors")], "no temp file left behind");
    }

    #[test]
    fn corrupt_file_is_an_error_naming_it() {
        let path = std::env::temp_dir().join(format!("ff-umt5-cache-bad-{}.safetensors", std::process::id()));
        std::fs::write(&path, b"not a safetensors file").unwrap();
        let err = PromptCache::open(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
}
