//! Plain safetensors access: header validation before a checkpoint is loaded (a truncated file
//! or an unknown dtype is an error naming the file and key, never a panic), and whole-file reads
//! of named tensors (fixture inputs and expected outputs).

use crate::error::{ModelError, Result};
use burn::tensor::TensorData;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// dtype and shape of one tensor in a safetensors header.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// The validated header of a safetensors file.
#[derive(Debug, Clone)]
pub struct SafetensorsHeader {
    /// Each tensor's dtype and shape by key.
    pub tensors: BTreeMap<String, TensorInfo>,
}

fn dtype_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "F64" | "I64" | "U64" => 8,
        "F32" | "I32" | "U32" => 4,
        "F16" | "BF16" | "I16" | "U16" => 2,
        "I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2" => 1,
        _ => return None,
    })
}

impl SafetensorsHeader {
    /// Reads and checks the header: JSON well-formed, every tensor's byte range inside the
    /// file and consistent with its dtype and shape.
    pub fn read(path: &Path) -> Result<Self> {
        let mut f = std::fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
        let file_len = f.metadata().map_err(|e| ModelError::io(path, e))?.len();
        let mut n = [0u8; 8];
        f.read_exact(&mut n).map_err(|_| ModelError::corrupt(path, "shorter than the 8-byte header length"))?;
        let n = u64::from_le_bytes(n);
        if n > 100_000_000 || n > file_len.saturating_sub(8) {
            return Err(ModelError::corrupt(path, format!("header length {n} exceeds the file ({file_len} bytes)")));
        }
        let mut buf = vec![0u8; n as usize];
        f.read_exact(&mut buf).map_err(|e| ModelError::io(path, e))?;
        let json: serde_json::Value =
            serde_json::from_slice(&buf).map_err(|e| ModelError::corrupt(path, format!("header is not valid JSON: {e}")))?;
        let obj = json.as_object().ok_or_else(|| ModelError::corrupt(path, "header is not a JSON object"))?;
        let data_len = file_len - 8 - n;
        let mut tensors = BTreeMap::new();
        for (key, info) in obj.iter().filter(|(k, _)| k.as_str() != "__metadata__") {
            let bad = |why: &str| ModelError::corrupt(path, format!("tensor '{key}': {why}"));
            let dtype = info.get("dtype").and_then(|d| d.as_str()).ok_or_else(|| bad("no dtype"))?.to_string();
            let shape: Vec<usize> = info
                .get("shape")
                .and_then(|s| s.as_array())
                .ok_or_else(|| bad("no shape"))?
                .iter()
                .map(|d| d.as_u64().map(|d| d as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("shape is not a list of sizes"))?;
            let offsets: Vec<u64> = info
                .get("data_offsets")
                .and_then(|s| s.as_array())
                .and_then(|a| a.iter().map(|d| d.as_u64()).collect())
                .ok_or_else(|| bad("no data_offsets"))?;
            let size = dtype_size(&dtype).ok_or_else(|| ModelError::UnsupportedDtype {
                path: path.to_path_buf(),
                key: key.clone(),
                dtype: dtype.clone(),
            })?;
            let [start, end] = offsets[..] else { return Err(bad("data_offsets is not [start, end]")) };
            if end > data_len {
                return Err(ModelError::corrupt(
                    path,
                    format!("tensor '{key}' ends at byte {end} but the file holds {data_len} data bytes (truncated?)"),
                ));
            }
            // checked: a hostile shape must not wrap to a byte count that matches the range
            let product = shape.iter().try_fold(size as u64, |acc, &d| acc.checked_mul(d as u64));
            let bytes = match product {
                Some(bytes) => bytes,
                None if shape.contains(&0) => 0,
                None => {
                    return Err(ModelError::TensorTooLarge { path: path.to_path_buf(), key: key.clone(), dtype, shape });
                }
            };
            if end < start || end - start != bytes {
                return Err(bad(&format!("byte range {start}..{end} does not hold the {bytes} bytes of {dtype} {shape:?}")));
            }
            tensors.insert(key.clone(), TensorInfo { dtype, shape });
        }
        Ok(Self { tensors })
    }
}

/// Reads every tensor of a safetensors file as f32 (floats) or i64 (integers) data.
pub fn read_tensors(path: &Path) -> Result<BTreeMap<String, TensorData>> {
    SafetensorsHeader::read(path)?;
    let bytes = std::fs::read(path).map_err(|e| ModelError::io(path, e))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| ModelError::corrupt(path, e.to_string()))?;
    let mut out = BTreeMap::new();
    for (key, view) in st.tensors() {
        let shape = view.shape().to_vec();
        let raw = view.data();
        use safetensors::Dtype as D;
        let data = match view.dtype() {
            D::F32 => TensorData::new(chunks::<4, f32>(raw, f32::from_le_bytes), shape),
            D::F64 => TensorData::new(chunks::<8, f64>(raw, f64::from_le_bytes), shape).convert::<f32>(),
            D::F16 => TensorData::new(chunks::<2, f32>(raw, |b| half::f16::from_le_bytes(b).to_f32()), shape),
            D::BF16 => TensorData::new(chunks::<2, f32>(raw, |b| half::bf16::from_le_bytes(b).to_f32()), shape),
            D::I64 => TensorData::new(chunks::<8, i64>(raw, i64::from_le_bytes), shape),
            D::I32 => TensorData::new(chunks::<4, i64>(raw, |b| i32::from_le_bytes(b) as i64), shape),
            other => {
                return Err(ModelError::UnsupportedDtype { path: path.to_path_buf(), key, dtype: format!("{other:?}") });
            }
        };
        out.insert(key, data);
    }
    Ok(out)
}

fn chunks<const N: usize, T>(raw: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    raw.chunks_exact(N).map(|c| f(c.try_into().expect("exact chunk"))).collect()
}
