//! Checkpoint loading of the DiT: half-precision files, shards, the Self-Forcing prefix, and the
//! typed errors for bad files. Variants of the fixture's Wan-layout weights are written to a
//! temporary folder.

use burn::backend::NdArray;
use burn::tensor::TensorData;
use ff_model::ModelError;
use ff_model::dit::{DitConfig, WanDit};
use ff_model::fixture::{FixtureMeta, check_dit_model};
use ff_model::load::read_tensors;
use ff_tests::fixtures_dir;
use safetensors::Dtype;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type B = NdArray;

struct Raw {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn fixture() -> (FixtureMeta, DitConfig, BTreeMap<String, TensorData>) {
    let dir = fixtures_dir().join("wan_dit_tiny");
    let meta = FixtureMeta::read(&dir).unwrap();
    let config = DitConfig::from_json(dir.join("meta.json")).unwrap();
    (meta, config, read_tensors(&dir.join("weights_wan.safetensors")).unwrap())
}

fn raw(data: &TensorData, dtype: Dtype) -> Raw {
    let v = data.to_vec::<f32>().unwrap();
    let bytes = match dtype {
        Dtype::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Dtype::BF16 => v.iter().flat_map(|x| half::bf16::from_f32(*x).to_le_bytes()).collect(),
        Dtype::F16 => v.iter().flat_map(|x| half::f16::from_f32(*x).to_le_bytes()).collect(),
        Dtype::I32 => v.iter().flat_map(|x| (*x as i32).to_le_bytes()).collect(),
        other => panic!("{other:?}"),
    };
    Raw { dtype, shape: data.shape.to_vec(), bytes }
}

fn write(path: &Path, tensors: &BTreeMap<String, Raw>) {
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(k, r)| (k.clone(), safetensors::tensor::TensorView::new(r.dtype, r.shape.clone(), &r.bytes).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ff-dit-loading-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn all_as(weights: &BTreeMap<String, TensorData>, dtype: Dtype) -> BTreeMap<String, Raw> {
    weights.iter().map(|(k, v)| (k.clone(), raw(v, dtype))).collect()
}

fn load(config: &DitConfig, path: &Path) -> Result<WanDit<B>, ModelError> {
    WanDit::<B>::load(config, path, &Default::default())
}

#[test]
fn half_precision_files_are_cast_on_load() {
    let (meta, config, weights) = fixture();
    let dir = tmp("half");
    for (dtype, tol) in [(Dtype::BF16, 2e-2), (Dtype::F16, 2e-3)] {
        let path = dir.join(format!("{dtype:?}.safetensors"));
        write(&path, &all_as(&weights, dtype));
        let err = check_dit_model(&load(&config, &path).unwrap(), &meta).unwrap();
        assert!(err <= tol && err > 0.0, "{dtype:?}: {err}");
    }
}

#[test]
fn sharded_checkpoint_with_index_loads_like_one_file() {
    let (meta, config, weights) = fixture();
    let dir = tmp("shards");
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    let mut map = serde_json::Map::new();
    for (i, (k, v)) in weights.iter().enumerate() {
        let shard = if i % 2 == 0 { "model-00001-of-00002.safetensors" } else { "model-00002-of-00002.safetensors" };
        map.insert(k.clone(), shard.into());
        if i % 2 == 0 {
            a.insert(k.clone(), raw(v, Dtype::F32))
        } else {
            b.insert(k.clone(), raw(v, Dtype::F32))
        };
    }
    write(&dir.join("model-00001-of-00002.safetensors"), &a);
    write(&dir.join("model-00002-of-00002.safetensors"), &b);
    let index = serde_json::json!({"metadata": {}, "weight_map": map});
    std::fs::write(dir.join("diffusion_pytorch_model.safetensors.index.json"), index.to_string()).unwrap();
    // the directory resolves to its index
    let err = check_dit_model(&load(&config, &dir).unwrap(), &meta).unwrap();
    assert!(err <= 1e-4, "{err}");
}

#[test]
fn self_forcing_model_prefix_is_stripped() {
    let (meta, config, weights) = fixture();
    let dir = tmp("prefix");
    let prefixed = weights.iter().map(|(k, v)| (format!("model.{k}"), raw(v, Dtype::F32))).collect();
    let path = dir.join("generator.safetensors");
    write(&path, &prefixed);
    let err = check_dit_model(&load(&config, &path).unwrap(), &meta).unwrap();
    assert!(err <= 1e-4, "{err}");
}

#[test]
fn missing_unexpected_and_misshapen_keys_are_named() {
    let (_, config, weights) = fixture();
    let dir = tmp("bad-keys");
    let path = dir.join("w.safetensors");

    let mut missing = all_as(&weights, Dtype::F32);
    missing.remove("blocks.1.ffn.2.bias");
    write(&path, &missing);
    match load(&config, &path) {
        Err(ModelError::MissingKeys { keys, .. }) => assert_eq!(keys, ["blocks.1.ffn.fc2.bias"]),
        other => panic!("{:?}", other.err()),
    }

    let mut extra = all_as(&weights, Dtype::F32);
    extra.insert("blocks.0.img_emb.weight".into(), raw(&TensorData::new(vec![1f32; 4], [2, 2]), Dtype::F32));
    write(&path, &extra);
    match load(&config, &path) {
        Err(ModelError::UnexpectedKeys { path: p, keys }) => {
            assert_eq!(keys, ["blocks.0.img_emb.weight"]);
            assert_eq!(p, path);
        }
        other => panic!("{:?}", other.err()),
    }

    let mut misshapen = all_as(&weights, Dtype::F32);
    misshapen.insert("head.head.weight".into(), raw(&TensorData::new(vec![0f32; 64 * 31], [64, 31]), Dtype::F32));
    write(&path, &misshapen);
    match load(&config, &path) {
        Err(ModelError::ShapeMismatch { key, expected, found, .. }) => {
            assert_eq!(key, "head.head.weight");
            assert_eq!((expected, found), (vec![64, 32], vec![64, 31]));
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn unsupported_dtype_and_damaged_files_are_errors() {
    let (_, config, weights) = fixture();
    let dir = tmp("damaged");
    let path = dir.join("w.safetensors");

    let mut ints = all_as(&weights, Dtype::F32);
    let bias = &weights["head.head.bias"];
    ints.insert("head.head.bias".into(), raw(bias, Dtype::I32));
    write(&path, &ints);
    match load(&config, &path) {
        Err(ModelError::UnsupportedDtype { key, dtype, .. }) => assert_eq!((key.as_str(), dtype.as_str()), ("head.head.bias", "I32")),
        other => panic!("{:?}", other.err()),
    }

    write(&path, &all_as(&weights, Dtype::F32));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let err = load(&config, &path).err().unwrap();
    assert!(matches!(err, ModelError::Corrupt { .. }) && err.to_string().contains("truncated"), "{err}");

    std::fs::write(&path, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all").unwrap();
    let err = load(&config, &path).err().unwrap();
    assert!(matches!(err, ModelError::Corrupt { .. }) && err.to_string().contains("w.safetensors"), "{err}");

    let err = load(&config, &dir.join("absent.safetensors")).err().unwrap();
    assert!(err.to_string().contains("absent.safetensors"), "{err}");
}
