//! Atomic file writes (temp file in the same directory, synced, renamed over the target) and the
//! safetensors files of a checkpoint (f32 tensors plus a string metadata map).

use crate::{Result, TrainError};
use burn::tensor::TensorData;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io { path: path.to_path_buf(), source }
}

/// `<dir>/.<name>.tmp` beside `path`.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// Flushes a file or directory to disk.
pub fn sync(path: &Path) -> Result<()> {
    File::open(path).and_then(|f| f.sync_all()).map_err(io(path))
}

/// Replaces `path` with the file `write` creates at the temp path it is given: a reader (or a run
/// killed meanwhile) sees the old file or the complete new one, never a part.
pub fn write_atomic(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path);
    let result = write(&tmp).and_then(|()| sync(&tmp)).and_then(|()| fs::rename(&tmp, path).map_err(io(path)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp); // best effort: the error that matters is returned
    }
    result
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |tmp| fs::write(tmp, bytes).map_err(io(tmp)))
}

/// Writes f32 tensors and string metadata to a safetensors file, atomically.
pub fn write_tensors(path: &Path, tensors: Vec<(String, TensorData)>, metadata: HashMap<String, String>) -> Result<()> {
    let data: Vec<(String, TensorData)> = tensors.into_iter().map(|(k, d)| (k, d.convert::<f32>())).collect();
    let views = data
        .iter()
        .map(|(k, d)| Ok((k.as_str(), TensorView::new(Dtype::F32, d.shape.to_vec(), d.as_bytes()).map_err(|e| corrupt(path, k, e))?)))
        .collect::<Result<Vec<_>>>()?;
    let metadata = (!metadata.is_empty()).then_some(metadata);
    write_atomic(path, |tmp| safetensors::serialize_to_file(views, metadata, tmp).map_err(|e| corrupt(tmp, "", e)))
}

fn corrupt(path: &Path, key: &str, e: impl std::fmt::Display) -> TrainError {
    let message = if key.is_empty() { e.to_string() } else { format!("tensor '{key}': {e}") };
    TrainError::Checkpoint { path: path.to_path_buf(), message }
}

/// Every tensor of a safetensors file this module wrote (f32), and its metadata.
pub fn read_tensors(path: &Path) -> Result<(BTreeMap<String, TensorData>, HashMap<String, String>)> {
    let bytes = fs::read(path).map_err(io(path))?;
    let (_, meta) = SafeTensors::read_metadata(&bytes).map_err(|e| corrupt(path, "", e))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| corrupt(path, "", e))?;
    let mut out = BTreeMap::new();
    for (key, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(corrupt(path, &key, format!("dtype {:?}, expected F32", view.dtype())));
        }
        let values: Vec<f32> = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        out.insert(key, TensorData::new(values, view.shape().to_vec()));
    }
    Ok((out, meta.metadata().clone().unwrap_or_default()))
}
