//! Checkpoint loading for every model of the crate (DiT, VAE, text encoder).
//!
//! One mechanism: the files of a checkpoint ([`CheckpointFiles`]: a safetensors file, a sharded
//! safetensors index, or a PyTorch `.pt`/`.pth` pickle, optionally under a top-level key) are read
//! lazily through burn-store; their keys go through one model-specific [`KeyRemap`] table to the
//! Burn module paths; then every key is checked before anything is applied: unsupported dtypes,
//! missing keys, unexpected keys and shape mismatches are typed errors naming the file and the
//! key as written in the file. Half-precision tensors are cast to the module's float dtype, and
//! PyTorch `Linear` weights (`[out, in]`) are transposed to Burn's `[in, out]`.

mod files;
mod remap;
mod safetensors_file;

pub use files::{CheckpointFile, CheckpointFiles};
pub use remap::KeyRemap;
pub use safetensors_file::{SafetensorsHeader, read_tensors};

use crate::error::{ModelError, Result};
use burn::tensor::{DType, backend::Backend};
use burn_store::{ModuleSnapshot, ModuleStore, PytorchStore, SafetensorsStore, TensorSnapshot};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

/// One tensor of a checkpoint as found in its file.
struct FileTensor {
    path: PathBuf,
    key: String,
    snapshot: TensorSnapshot,
}

/// Loads `files` into `module`. Keys are mapped by `remap`; a module parameter for which
/// `optional(path)` is true may be absent from the files (e.g. role adapters of a plain
/// checkpoint) and then keeps its initial value.
pub fn load_checkpoint<B: Backend, M: ModuleSnapshot<B>>(
    module: &mut M,
    files: &CheckpointFiles,
    remap: &KeyRemap,
    optional: impl Fn(&str) -> bool,
) -> Result<()> {
    let mut found: BTreeMap<String, FileTensor> = BTreeMap::new();
    let mut unexpected: Vec<(PathBuf, String)> = Vec::new();
    let expected: BTreeMap<String, TensorSnapshot> = module.collect(None, None, false).into_iter().map(|s| (s.full_path(), s)).collect();
    for file in &files.files {
        for (key, snapshot) in read_snapshots(file)? {
            let path = file.path().to_path_buf();
            if !matches!(snapshot.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
                return Err(ModelError::UnsupportedDtype { path, key, dtype: format!("{:?}", snapshot.dtype) });
            }
            let target = remap.apply(&key);
            if !expected.contains_key(&target) {
                unexpected.push((path, key));
                continue;
            }
            if let Some(prev) = found.get(&target) {
                if remap.is_tied(&key) {
                    continue;
                }
                if remap.is_tied(&prev.key) {
                    found.insert(target, FileTensor { path, key, snapshot });
                    continue;
                }
                return Err(ModelError::Load {
                    path,
                    key,
                    reason: format!("maps to '{target}', already given by '{}' in {}", prev.key, prev.path.display()),
                });
            }
            found.insert(target, FileTensor { path, key, snapshot });
        }
    }
    if let Some((path, _)) = unexpected.first() {
        let path = path.clone();
        let keys = unexpected.into_iter().map(|(_, k)| k).collect();
        return Err(ModelError::UnexpectedKeys { path, keys });
    }
    let missing: Vec<String> = expected.keys().filter(|p| !found.contains_key(*p) && !optional(p)).cloned().collect();
    if !missing.is_empty() {
        return Err(ModelError::MissingKeys { path: files.origin.clone(), keys: missing });
    }
    let mut snapshots = Vec::with_capacity(found.len());
    for (target, t) in found {
        let want = &expected[&target];
        snapshots.push(to_module_snapshot(t, want, &target)?);
    }
    let result = module.apply(snapshots, None, None, false);
    if let Some(err) = result.errors.first() {
        return Err(ModelError::Load { path: files.origin.clone(), key: String::new(), reason: err.to_string() });
    }
    Ok(())
}

/// The keys of every tensor of a checkpoint, as written in its files (e.g. to tell which key
/// layout it uses before choosing a [`KeyRemap`]).
pub fn checkpoint_keys(files: &CheckpointFiles) -> Result<Vec<String>> {
    let mut keys = Vec::new();
    for file in &files.files {
        keys.extend(read_snapshots(file)?.into_iter().map(|(k, _)| k));
    }
    Ok(keys)
}

/// Turns a file tensor into a snapshot at the module path `target`, transposed (PyTorch Linear
/// weights) and cast to the module's dtype, after checking its shape.
fn to_module_snapshot(t: FileTensor, want: &TensorSnapshot, target: &str) -> Result<TensorSnapshot> {
    let file_shape = t.snapshot.shape.to_vec();
    let transpose = want.module_type().as_deref() == Some("Struct:Linear") && target.ends_with(".weight") && file_shape.len() == 2;
    let shape: Vec<usize> = if transpose { vec![file_shape[1], file_shape[0]] } else { file_shape.clone() };
    let want_shape = want.shape.to_vec();
    if shape != want_shape {
        let expected = if transpose { vec![want_shape[1], want_shape[0]] } else { want_shape };
        return Err(ModelError::ShapeMismatch { path: t.path, key: t.key, expected, found: file_shape });
    }
    let (data_fn, dtype) = (t.snapshot.clone_data_fn(), want.dtype);
    let read = Rc::new(move || {
        let data = data_fn()?.convert_dtype(dtype);
        if !transpose {
            return Ok(data);
        }
        Ok(transpose_2d(data))
    });
    let path_stack = target.split('.').map(str::to_string).collect();
    Ok(TensorSnapshot::from_closure(
        read,
        dtype,
        want.shape.clone(),
        path_stack,
        want.container_stack.clone().unwrap_or_default(),
        want.tensor_id.unwrap_or_default(),
    ))
}

/// The parameters of `module` whose module path passes `keep`, as `(key(path), data)` in the
/// layout the loader reads: `Linear` weights transposed to PyTorch's `[out, in]`, the module's
/// float dtype. With `key` the inverse of a model's [`KeyRemap`], the result loads back unchanged.
pub fn module_tensors<B: Backend, M: ModuleSnapshot<B>>(
    module: &M,
    key: impl Fn(&str) -> String,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<(String, burn::tensor::TensorData)>> {
    let mut out = Vec::new();
    for snapshot in module.collect(None, None, false) {
        let path = snapshot.full_path();
        if !keep(&path) {
            continue;
        }
        let data = snapshot.to_data().map_err(|e| ModelError::Input(format!("parameter '{path}': {e}")))?;
        let linear = snapshot.module_type().as_deref() == Some("Struct:Linear") && path.ends_with(".weight");
        out.push((key(&path), if linear { transpose_2d(data) } else { data }));
    }
    Ok(out)
}

fn transpose_2d(data: burn::tensor::TensorData) -> burn::tensor::TensorData {
    let [r, c] = [data.shape[0], data.shape[1]];
    let dtype = data.dtype;
    let v = data.convert::<f32>().into_vec::<f32>().expect("f32 data");
    let mut out = vec![0f32; r * c];
    for i in 0..r {
        for j in 0..c {
            out[j * r + i] = v[i * c + j];
        }
    }
    burn::tensor::TensorData::new(out, [c, r]).convert_dtype(dtype)
}

/// Lists the tensors of one checkpoint file (lazily: no tensor data is read here).
fn read_snapshots(file: &CheckpointFile) -> Result<Vec<(String, TensorSnapshot)>> {
    match file {
        CheckpointFile::Safetensors(path) => {
            SafetensorsHeader::read(path)?; // truncation, corrupt header, dtypes
            let mut store = SafetensorsStore::from_file(path).map_indices_contiguous(false);
            let all = store.get_all_snapshots().map_err(|e| ModelError::corrupt(path, e.to_string()))?;
            Ok(all.iter().map(|(k, s)| (k.clone(), s.clone())).collect())
        }
        CheckpointFile::Torch { path, top_level_key } => {
            // keep indices as written: Wan's `ffn.0`/`ffn.2` are Sequential slots the key table maps
            let mut store = PytorchStore::from_file(path).map_indices_contiguous(false);
            if let Some(key) = top_level_key {
                store = store.with_top_level_key(key);
            }
            let all = store.get_all_snapshots().map_err(|e| ModelError::corrupt(path, e.to_string()))?;
            Ok(all.iter().map(|(k, s)| (k.clone(), s.clone())).collect())
        }
    }
}
