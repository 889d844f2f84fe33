//! The safetensors files of a checkpoint (f32 tensors plus a string metadata map), each written
//! atomically (temp file in the same directory, synced, renamed over the target).

use crate::data::write_atomic;
use crate::{Result, TrainError};
use burn::tensor::TensorData;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::path::Path;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io { path: path.to_path_buf(), source }
}

/// Flushes a directory (a rename inside it) to disk.
pub fn sync_dir(path: &Path) -> Result<()> {
    File::open(path).and_then(|f| f.sync_all()).map_err(io(path))
}

/// Writes f32 tensors and string metadata to a safetensors file, atomically.
pub fn write_tensors(path: &Path, tensors: Vec<(String, TensorData)>, metadata: HashMap<String, String>) -> Result<()> {
    let data: Vec<(String, TensorData)> = tensors.into_iter().map(|(k, d)| (k, d.convert::<f32>())).collect();
    let views = data
        .iter()
        .map(|(k, d)| Ok((k.as_str(), TensorView::new(Dtype::F32, d.shape.to_vec(), d.as_bytes()).map_err(|e| corrupt(path, k, e))?)))
        .collect::<Result<Vec<_>>>()?;
    let bytes = safetensors::serialize(views, (!metadata.is_empty()).then_some(metadata)).map_err(|e| corrupt(path, "", e))?;
    write_atomic(path, &bytes)
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
