//! The identity of a run's base weights, recorded in each checkpoint's `state.json` and checked
//! by `--resume`: a LoRA continued on another backbone trains something else, silently.
//!
//! The identity is `xxh3-128:<hex>` over the checkpoint's files (a `.safetensors` file, the shards
//! of an index in name order, or a pickle), each as its byte length followed by its bytes: the
//! safetensors header (names, dtypes, shapes, offsets) and every weight count, the path does not
//! (a moved model directory is the same base). XXH3 (`xxhash-rust`) reads at memory speed, about
//! a second for the 1.3B model's 5.7 GB; it is an identity check, not a defence against forgery.

use crate::{Result, TrainError};
use ff_model::load::CheckpointFiles;
use std::io::Read;
use std::path::Path;
use xxhash_rust::xxh3::Xxh3;

/// The identity of the weights at `path` (a file, an index or a folder, as the DiT loader
/// resolves it).
pub fn base_identity(path: &Path) -> Result<String> {
    let files = CheckpointFiles::resolve(path)?;
    let mut hasher = Xxh3::new();
    let mut buffer = vec![0u8; 8 << 20];
    for file in &files.files {
        let path = file.path();
        let io = |source| TrainError::Io { path: path.to_path_buf(), source };
        let mut reader = std::fs::File::open(path).map_err(io)?;
        hasher.update(&reader.metadata().map_err(io)?.len().to_le_bytes());
        loop {
            let n = reader.read(&mut buffer).map_err(io)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
    }
    Ok(format!("xxh3-128:{:032x}", hasher.digest128()))
}
