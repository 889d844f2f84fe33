//! Parity check against a reference fixture made by `fixtures/make_fixtures.py` from diffusers
//! `AutoencoderKLWan`: `meta.json` (config), `inputs.safetensors` (`video`),
//! `expected.safetensors` (`latent_mean`, `decoded`) and one or more `weights_*.safetensors`.

use super::config::WanVaeConfig;
use super::model::WanVae;
use crate::error::{ModelError, Result};
use crate::load::read_tensors;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use std::collections::BTreeMap;
use std::path::Path;

/// For every `weights_*.safetensors` of `dir` (by file name): the largest relative L2 error
/// `‖ours − expected‖ / ‖expected‖` of the encoder mean (from `video`) and of the decoded video
/// (from the expected `latent_mean`, so the two parts are checked independently).
pub fn verify_fixture<B: Backend>(dir: &Path, device: &B::Device) -> Result<Vec<(String, f64)>> {
    let config = WanVaeConfig::from_json(dir.join("meta.json"))?;
    let inputs_path = dir.join("inputs.safetensors");
    let expected_path = dir.join("expected.safetensors");
    let inputs = read_tensors(&inputs_path)?;
    let expected = read_tensors(&expected_path)?;
    let video = tensor::<B>(&inputs, "video", &inputs_path, device)?;
    let latent_mean = get(&expected, "latent_mean", &expected_path)?;
    let decoded = get(&expected, "decoded", &expected_path)?;
    let latents = Tensor::<B, 5>::from_data(latent_mean.clone(), device);

    let mut results = Vec::new();
    for name in weight_files(dir)? {
        let vae = WanVae::<B>::load(dir.join(&name), &config, device)?;
        let mean_err = relative_l2(&vae.encode_mean(video.clone())?.into_data(), latent_mean, "latent_mean")?;
        let decode_err = relative_l2(&vae.decode(latents.clone())?.into_data(), decoded, "decoded")?;
        results.push((name, mean_err.max(decode_err)));
    }
    Ok(results)
}

/// The `weights_*.safetensors` file names of `dir`, sorted; an error if there is none.
fn weight_files(dir: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("weights_") && n.ends_with(".safetensors"))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(ModelError::corrupt(dir, "fixture holds no weights_*.safetensors"));
    }
    Ok(names)
}

fn get<'a>(tensors: &'a BTreeMap<String, TensorData>, key: &str, path: &Path) -> Result<&'a TensorData> {
    tensors.get(key).ok_or_else(|| ModelError::NoSuchTensor { path: path.to_path_buf(), key: key.into() })
}

fn tensor<B: Backend>(
    tensors: &BTreeMap<String, TensorData>,
    key: &str,
    path: &Path,
    device: &B::Device,
) -> Result<Tensor<B, 5>> {
    let data = get(tensors, key, path)?;
    if data.shape.len() != 5 {
        return Err(ModelError::Input(format!(
            "{}: '{key}' has shape {:?}, expected 5 dims",
            path.display(),
            data.shape
        )));
    }
    Ok(Tensor::from_data(data.clone(), device))
}

/// `‖a − b‖₂ / ‖b‖₂` in f64; an error if the shapes differ.
fn relative_l2(a: &TensorData, b: &TensorData, what: &str) -> Result<f64> {
    if a.shape != b.shape {
        return Err(ModelError::Input(format!(
            "{what}: output shape {:?} differs from expected {:?}",
            a.shape, b.shape
        )));
    }
    let values = |d: &TensorData| d.clone().convert::<f64>().into_vec::<f64>().expect("f64 data after convert");
    let (a, b) = (values(a), values(b));
    let diff: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).powi(2)).sum();
    let norm: f64 = b.iter().map(|y| y * y).sum();
    Ok((diff / norm.max(f64::MIN_POSITIVE)).sqrt())
}
