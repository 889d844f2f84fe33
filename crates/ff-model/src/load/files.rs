//! Which files make up a checkpoint: one safetensors file, a sharded safetensors checkpoint
//! (`*.safetensors.index.json` with a `weight_map`), or a PyTorch pickle (`.pt`, `.pth`, `.bin`),
//! optionally holding the state dict under a top-level key (Self-Forcing: `generator_ema`,
//! `generator`).

use crate::error::{ModelError, Result};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// One file of a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckpointFile {
    /// A safetensors file (one shard, or the whole checkpoint).
    Safetensors(PathBuf),
    /// A PyTorch pickle (`.pt`, `.pth`, `.bin`, `.ckpt`).
    Torch {
        /// The file.
        path: PathBuf,
        /// The top-level key holding the state dict (`generator_ema`, `generator`,
        /// `state_dict`), or `None` when the top level is the state dict.
        top_level_key: Option<String>,
    },
}

impl CheckpointFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        match self {
            Self::Safetensors(p) | Self::Torch { path: p, .. } => p,
        }
    }
}

/// The files of one checkpoint, and the path the user named (for error messages).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointFiles {
    /// The path the user named (a file, an index or a folder).
    pub origin: PathBuf,
    /// The files to read, shards in name order.
    pub files: Vec<CheckpointFile>,
}

/// Top-level keys under which training scripts store a generator's state dict, in order of
/// preference (the EMA weights are the ones used for inference).
const TORCH_TOP_LEVEL_KEYS: [&str; 3] = ["generator_ema", "generator", "state_dict"];

impl CheckpointFiles {
    /// Resolves a user-given path: a `.safetensors` file, a `.safetensors.index.json` index, a
    /// directory holding one of these, or a `.pt`/`.pth`/`.bin` pickle.
    pub fn resolve(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if path.is_dir() {
            return Self::resolve_dir(path);
        }
        if !path.exists() {
            return Err(ModelError::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")));
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let files = if name.ends_with(".index.json") {
            Self::index_shards(path)?
        } else if name.ends_with(".safetensors") {
            vec![CheckpointFile::Safetensors(path.to_path_buf())]
        } else if [".pt", ".pth", ".bin", ".ckpt"].iter().any(|e| name.ends_with(e)) {
            vec![CheckpointFile::Torch { path: path.to_path_buf(), top_level_key: torch_top_level_key(path)? }]
        } else {
            return Err(ModelError::corrupt(
                path,
                "unknown checkpoint format (expected .safetensors, .safetensors.index.json, .pt or .pth)",
            ));
        };
        Ok(Self { origin: path.to_path_buf(), files })
    }

    fn resolve_dir(dir: &Path) -> Result<Self> {
        let entries = std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))?;
        let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        names.sort();
        let ends = |p: &PathBuf, s: &str| p.to_str().is_some_and(|n| n.ends_with(s));
        if let Some(index) = names.iter().find(|p| ends(p, ".safetensors.index.json")) {
            return Self::resolve(index);
        }
        let single: Vec<&PathBuf> = names.iter().filter(|p| ends(p, ".safetensors")).collect();
        match single.as_slice() {
            [one] => Self::resolve(one),
            [] => Err(ModelError::corrupt(dir, "directory holds no .safetensors checkpoint")),
            _ => Err(ModelError::corrupt(dir, "directory holds several .safetensors files and no index json: name one")),
        }
    }

    fn index_shards(index: &Path) -> Result<Vec<CheckpointFile>> {
        let text = std::fs::read_to_string(index).map_err(|e| ModelError::io(index, e))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| ModelError::Json { path: index.to_path_buf(), source })?;
        let map = json.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| ModelError::corrupt(index, "no 'weight_map' object"))?;
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut shards = BTreeSet::new();
        for (key, shard) in map {
            let name =
                shard.as_str().ok_or_else(|| ModelError::corrupt(index, format!("'weight_map' entry '{key}' is not a file name")))?;
            check_shard_name(index, key, name)?;
            shards.insert(name);
        }
        if shards.is_empty() {
            return Err(ModelError::corrupt(index, "'weight_map' names no shard"));
        }
        Ok(shards.into_iter().map(|s| CheckpointFile::Safetensors(dir.join(s))).collect())
    }
}

/// A shard must lie inside the index's directory: a relative path of plain names (no `..`, no
/// root, no drive prefix), so a hostile index cannot make the loader read files elsewhere.
fn check_shard_name(index: &Path, key: &str, name: &str) -> Result<()> {
    let plain = !name.is_empty() && Path::new(name).components().all(|c| matches!(c, Component::Normal(_)));
    if plain {
        return Ok(());
    }
    Err(ModelError::corrupt(index, format!("'weight_map' entry '{key}' names shard '{name}' outside the index's directory")))
}

/// The first known top-level key a pickle holds, if its top level is not the state dict itself.
/// Only an absent key moves the probe on: a file that cannot be read (damaged zip, bad pickle)
/// is an error here, not a silent fallback to another layout.
fn torch_top_level_key(path: &Path) -> Result<Option<String>> {
    use burn_store::pytorch::{PytorchError, PytorchReader};
    for key in TORCH_TOP_LEVEL_KEYS {
        match PytorchReader::with_top_level_key(path, key) {
            Ok(reader) if !reader.is_empty() => return Ok(Some(key.to_string())),
            Ok(_) | Err(PytorchError::KeyNotFound(_)) => {}
            Err(e) => return Err(ModelError::corrupt(path, e.to_string())),
        }
    }
    Ok(None)
}
