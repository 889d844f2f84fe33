//! Self-Forcing-style `.pt` checkpoints: a torch zip pickle holding `{"generator": ...,
//! "generator_ema": {"model.<wan key>": tensor}}`. The file is written here with a minimal pickle
//! writer ([`ff_tests::torch`]), so no torch is needed.

use burn::backend::NdArray;
use burn::tensor::TensorData;
use ff_model::dit::{DitConfig, WanDit};
use ff_model::fixture::{FixtureMeta, check_dit_model};
use ff_model::load::read_tensors;
use ff_tests::fixtures_dir;
use ff_tests::torch::write_pt;
use std::collections::BTreeMap;

/// The same keys and shapes with other values (every weight negated and shifted).
fn other_weights(weights: &BTreeMap<String, TensorData>) -> BTreeMap<String, TensorData> {
    weights
        .iter()
        .map(|(k, v)| {
            let values: Vec<f32> = v.to_vec::<f32>().unwrap().iter().map(|x| 0.5 - x).collect();
            (k.clone(), TensorData::new(values, v.shape.clone()))
        })
        .collect()
}

#[test]
fn self_forcing_pt_checkpoint_loads_generator_ema() {
    let dir = fixtures_dir().join("wan_dit_tiny");
    let meta = FixtureMeta::read(&dir).unwrap();
    let config = DitConfig::from_json(dir.join("meta.json")).unwrap();
    let weights = read_tensors(&dir.join("weights_wan.safetensors")).unwrap();
    let other = other_weights(&weights);
    let out = std::env::temp_dir().join(format!("ff-self-forcing-{}.pt", std::process::id()));
    let prefixed = |w: &BTreeMap<String, TensorData>| -> BTreeMap<String, TensorData> {
        w.iter().map(|(k, v)| (format!("model.{k}"), v.clone())).collect()
    };
    let (weights, other) = (prefixed(&weights), prefixed(&other));
    let load_err = |tops: &[(&str, &BTreeMap<String, TensorData>)]| {
        write_pt(&out, tops);
        let model = WanDit::<NdArray>::load(&config, &out, &Default::default()).unwrap();
        check_dit_model(&model, &meta).unwrap()
    };
    // `generator_ema` holds the fixture's weights, `generator` others: the EMA weights load,
    // whichever key comes first in the file
    let ema = load_err(&[("generator", &other), ("generator_ema", &weights)]);
    let ema_first = load_err(&[("generator_ema", &weights), ("generator", &other)]);
    // without an EMA copy, `generator` loads
    let plain = load_err(&[("generator", &weights)]);
    // the other weights are far from the fixture: loading the wrong copy would show
    let wrong = load_err(&[("generator", &weights), ("generator_ema", &other)]);
    std::fs::remove_file(&out).unwrap();
    for (what, err) in [("generator_ema", ema), ("generator_ema first", ema_first), ("generator only", plain)] {
        assert!(err <= 2e-2, "bf16 .pt, {what}: relative error {err}");
    }
    assert!(wrong > 0.1, "the other weights give a different model ({wrong})");
}
