//! Hostile or mismatched input is a typed error naming what is wrong, never a panic: overflowing
//! safetensors headers, shard indexes that point outside the model directory, damaged `.pt`
//! files, and K/V entries made by another model.

use burn::backend::NdArray;
use burn::tensor::{Distribution, Tensor, TensorData};
use ff_model::ModelError;
use ff_model::dit::{ChunkKv, DitConfig, FrameLayout, KvWindow, LayerKv, Role, SegmentContext, WanDit};
use ff_model::load::{CheckpointFiles, SafetensorsHeader, read_tensors};
use ff_tests::fixtures_dir;
use ff_tests::torch::{pt_entries, write_pt, write_zip};
use std::collections::BTreeMap;
use std::path::PathBuf;

type B = NdArray;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ff-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A safetensors file whose header is `header` (JSON), followed by `data`.
fn safetensors_bytes(header: &serde_json::Value, data: &[u8]) -> Vec<u8> {
    let header = header.to_string().into_bytes();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header);
    bytes.extend(data);
    bytes
}

#[test]
fn overflowing_header_shapes_are_a_named_error() {
    let dir = tmp("overflow");
    let path = dir.join("w.safetensors");
    // 2^33 × 2^33 × 4 bytes wraps a u64 to 0, which the empty byte range would match.
    let big = 1u64 << 33;
    for shape in [vec![big, big], vec![u64::MAX, 2], vec![1 << 62, 1 << 62, 0]] {
        let header = serde_json::json!({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}});
        std::fs::write(&path, safetensors_bytes(&header, &[])).unwrap();
        let err = SafetensorsHeader::read(&path);
        if shape.contains(&0) {
            // a zero dimension makes an empty tensor, however large the others
            assert!(err.is_ok(), "{shape:?}: {:?}", err.err());
            continue;
        }
        match err {
            Err(ModelError::TensorTooLarge { key, shape: s, .. }) => assert_eq!((key.as_str(), s.len()), ("w", 2)),
            other => panic!("{shape:?}: {other:?}"),
        }
        let err = read_tensors(&path).unwrap_err().to_string();
        assert!(err.contains("w.safetensors") && err.contains("'w'"), "{err}");
    }
}

#[test]
fn shard_names_outside_the_model_directory_are_rejected() {
    let dir = tmp("shards");
    let index = dir.join("model.safetensors.index.json");
    for shard in ["../outside.safetensors", "/etc/passwd", "sub/../../x.safetensors", ""] {
        let json = serde_json::json!({"weight_map": {"blocks.0.weight": shard}});
        std::fs::write(&index, json.to_string()).unwrap();
        let err = CheckpointFiles::resolve(&index).unwrap_err().to_string();
        assert!(err.contains("outside the index's directory") && err.contains("blocks.0.weight"), "{shard:?}: {err}");
    }
    let json = serde_json::json!({"weight_map": {"blocks.0.weight": 7}});
    std::fs::write(&index, json.to_string()).unwrap();
    assert!(CheckpointFiles::resolve(&index).unwrap_err().to_string().contains("not a file name"));
    // shards in a subfolder of the index's directory are fine
    let json = serde_json::json!({"weight_map": {"blocks.0.weight": "shards/a.safetensors"}});
    std::fs::write(&index, json.to_string()).unwrap();
    assert_eq!(CheckpointFiles::resolve(&index).unwrap().files.len(), 1);
}

#[test]
fn damaged_pt_files_are_errors_naming_the_file() {
    let fixture = fixtures_dir().join("wan_dit_tiny");
    let config = DitConfig::from_json(fixture.join("meta.json")).unwrap();
    let weights = read_tensors(&fixture.join("weights_wan.safetensors")).unwrap();
    let state: BTreeMap<String, TensorData> = weights.iter().map(|(k, v)| (format!("model.{k}"), v.clone())).collect();
    let dir = tmp("pt");
    let path = dir.join("ckpt.pt");
    let load = || WanDit::<B>::load(&config, &path, &Default::default());

    write_pt(&path, &[("generator_ema", &state)]);
    let whole = std::fs::read(&path).unwrap();
    assert!(load().is_ok(), "the undamaged file loads");

    let mut damaged: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", whole[..whole.len() / 2].to_vec()),
        ("not a zip", b"definitely not a torch checkpoint".to_vec()),
        ("empty", Vec::new()),
    ];
    // a pickle cut short, and one whose top level is a list, inside a valid zip
    let mut entries = pt_entries(&[("generator_ema", &state)]);
    let pickle = entries[0].1.clone();
    for (name, bytes) in [("cut pickle", pickle[..pickle.len() / 3].to_vec()), ("list pickle", b"\x80\x02]q\x00.".to_vec())] {
        entries[0].1 = bytes;
        write_zip(&path, &entries);
        damaged.push((name, std::fs::read(&path).unwrap()));
    }
    for (what, bytes) in damaged {
        std::fs::write(&path, bytes).unwrap();
        match load() {
            Err(ModelError::Corrupt { path: p, .. }) => assert_eq!(p, path, "{what}"),
            other => panic!("{what}: {:?}", other.err()),
        }
    }
}

fn random(shape: [usize; 4]) -> Tensor<B, 4> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.0), &Default::default())
}

/// K/V of `layers` layers, `[batch, heads, tokens, head_dim]` each.
fn entry(layers: usize, [batch, heads, tokens, head_dim]: [usize; 4]) -> ChunkKv<B> {
    let shape = [batch, heads, tokens, head_dim];
    ChunkKv { layers: (0..layers).map(|_| LayerKv { k: random(shape), v: random(shape) }).collect() }
}

#[test]
fn kv_entries_of_another_model_are_errors() {
    let device = Default::default();
    let config = DitConfig::tiny();
    let (layers, heads, hd) = (config.num_layers, config.num_heads, config.head_dim());
    let model = config.init::<B>(&device);
    let text = model.text_context(Tensor::random([1, 6, config.text_dim], Distribution::Normal(0.0, 1.0), &device));
    let x = Tensor::<B, 5>::random([1, config.in_channels, 3, 4, 4], Distribution::Normal(0.0, 1.0), &device);
    let layout = FrameLayout::chunk(3, 3, Role::Base);
    let ts = [vec![500.0; 3]];
    let good = entry(layers, [1, heads, 12, hd]);
    let forward = |segment: &ChunkKv<B>| model.forward_chunk(x.clone(), &ts, &layout, &text, &SegmentContext::new(vec![&good, segment]));
    assert!(forward(&good).is_ok());
    for (what, bad) in [
        ("layers", entry(layers + 1, [1, heads, 12, hd])),
        ("batch", entry(layers, [2, heads, 12, hd])),
        ("heads", entry(layers, [1, heads + 1, 12, hd])),
        ("head_dim", entry(layers, [1, heads, 12, hd + 2])),
    ] {
        let err = forward(&bad).err().unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(matches!(err, ModelError::Input(_)) && err.to_string().contains("K/V segment 1"), "{what}: {err}");
    }

    let mut window = KvWindow::<B>::new(layers, heads, hd, 12, 2, &device);
    assert!(window.write(0, &good).is_ok());
    let too_long = entry(layers, [1, heads, 24, hd]);
    let err = window.write(1, &too_long).unwrap_err().to_string();
    assert!(err.contains("24 tokens") && err.contains("slot 1"), "{err}");
    let err = window.write(0, &entry(layers, [1, heads + 1, 12, hd])).unwrap_err().to_string();
    assert!(err.contains("slot 0") && err.contains("layer 0"), "{err}");
    let other = KvWindow::<B>::new(layers, heads, hd + 2, 12, 2, &device);
    let err = model.forward_chunk(x, &ts, &layout, &text, &other).err().unwrap().to_string();
    assert!(err.contains("K/V window"), "{err}");
}
