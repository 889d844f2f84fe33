//! Parity check of the umT5 encoder against a transformers fixture directory (as written by
//! `make_fixtures.py`): `meta.json` (`config`, `source` = [`FIXTURE_SOURCE`]),
//! `inputs.safetensors` (`input_ids`, `attention_mask`: i64 `[B, L]`), `expected.safetensors`
//! (`last_hidden_state` `[B, L, d_model]`) and weights files `weights*.safetensors` of either
//! layout.

use super::config::Umt5Config;
use super::encoder::Umt5Encoder;
use crate::error::{ModelError, Result};
use crate::load::read_tensors;
use burn::tensor::{Int, Tensor, TensorData, backend::Backend};
use std::collections::BTreeMap;
use std::path::Path;

/// `source` of a umT5 fixture's `meta.json`.
pub const FIXTURE_SOURCE: &str = "transformers.UMT5EncoderModel";

/// Relative L2 error the encoder must reach against a fixture.
pub const PARITY_TOLERANCE: f64 = 1e-4;

/// Runs the encoder loaded from every `weights*.safetensors` of `dir` on the fixture inputs and
/// returns `(weights file name, relative L2 error vs last_hidden_state)` for each, sorted by name.
pub fn verify_fixture<B: Backend>(dir: &Path, device: &B::Device) -> Result<Vec<(String, f64)>> {
    let meta = dir.join("meta.json");
    check_source(&meta)?;
    let config = Umt5Config::from_json(&meta)?;
    let inputs_path = dir.join("inputs.safetensors");
    let inputs = read_tensors(&inputs_path)?;
    let expected_path = dir.join("expected.safetensors");
    let expected = tensor(&read_tensors(&expected_path)?, &expected_path, "last_hidden_state")?;
    let ids = tensor(&inputs, &inputs_path, "input_ids")?;
    let mask = tensor(&inputs, &inputs_path, "attention_mask")?;
    let mut results = Vec::new();
    for weights in weight_files(dir)? {
        let encoder = Umt5Encoder::<B>::load(&weights, &config, device)?;
        let ids = Tensor::<B, 2, Int>::from_data(ids.clone(), device);
        let mask = Tensor::<B, 2, Int>::from_data(mask.clone(), device);
        let out = encoder.forward(ids, mask).into_data();
        if out.shape != expected.shape {
            return Err(ModelError::ShapeMismatch {
                path: expected_path.clone(),
                key: "last_hidden_state".into(),
                expected: out.shape.to_vec(),
                found: expected.shape.to_vec(),
            });
        }
        let name = weights.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        results.push((name, relative_l2(&out, &expected)));
    }
    Ok(results)
}

/// `||a - b|| / ||b||` over all elements, in f64.
pub fn relative_l2(a: &TensorData, b: &TensorData) -> f64 {
    let a = a.clone().convert::<f32>().to_vec::<f32>().expect("f32 data");
    let b = b.clone().convert::<f32>().to_vec::<f32>().expect("f32 data");
    let diff: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
    let norm: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}

fn check_source(meta: &Path) -> Result<()> {
    let text = std::fs::read_to_string(meta).map_err(|e| ModelError::io(meta, e))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| ModelError::Json { path: meta.to_path_buf(), source })?;
    match json.get("source").and_then(|s| s.as_str()) {
        Some(FIXTURE_SOURCE) | None => Ok(()),
        Some(other) => {
            Err(ModelError::Config(format!("{}: source {other:?} is not {FIXTURE_SOURCE:?}", meta.display())))
        }
    }
}

fn tensor(map: &BTreeMap<String, TensorData>, path: &Path, key: &str) -> Result<TensorData> {
    map.get(key).cloned().ok_or_else(|| ModelError::NoSuchTensor { path: path.to_path_buf(), key: key.into() })
}

fn weight_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))?;
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("weights") && n.ends_with(".safetensors"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ModelError::corrupt(dir, "fixture holds no weights*.safetensors"));
    }
    Ok(files)
}
