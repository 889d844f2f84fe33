//! The safetensors files of a checkpoint (f32 tensors plus a string metadata map; exported
//! inference weights may be f16), each written atomically (temp file in the same directory,
//! synced, renamed over the target).

use crate::{Result, TrainError};
use burn::tensor::{TensorData, f16};
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

/// The float type a weight file stores its tensors in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stored {
    /// f32, what checkpoints (and exact resume) need.
    #[default]
    F32,
    /// IEEE half: half the size, for shipped inference weights (every loader reads it as f32).
    F16,
}

/// Writes f32 tensors and string metadata to a safetensors file, atomically.
pub fn write_tensors(path: &Path, tensors: Vec<(String, TensorData)>, metadata: HashMap<String, String>) -> Result<()> {
    write_tensors_as(path, tensors, metadata, Stored::F32)
}

/// Writes tensors stored as `stored` and string metadata to a safetensors file, atomically. A
/// value outside f16's range is an error naming the tensor, never an infinity in the file.
pub fn write_tensors_as(path: &Path, tensors: Vec<(String, TensorData)>, metadata: HashMap<String, String>, stored: Stored) -> Result<()> {
    let dtype = match stored {
        Stored::F32 => Dtype::F32,
        Stored::F16 => Dtype::F16,
    };
    let data = tensors
        .into_iter()
        .map(|(k, d)| match stored {
            Stored::F32 => Ok((k, d.convert::<f32>())),
            Stored::F16 => {
                let max = d.iter::<f32>().fold(0f32, |m, v| m.max(v.abs()));
                if max > f32::from(f16::MAX) {
                    return Err(corrupt(path, &k, format!("max |value| {max} does not fit f16")));
                }
                Ok((k, d.convert::<f16>()))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let views = data
        .iter()
        .map(|(k, d)| Ok((k.as_str(), TensorView::new(dtype, d.shape.to_vec(), d.as_bytes()).map_err(|e| corrupt(path, k, e))?)))
        .collect::<Result<Vec<_>>>()?;
    let bytes = safetensors::serialize(views, (!metadata.is_empty()).then_some(metadata)).map_err(|e| corrupt(path, "", e))?;
    ff_model::io::write_atomic(path, |w| std::io::Write::write_all(w, &bytes)).map_err(Into::into)
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
