//! Self-Forcing-style `.pt` checkpoints: a torch zip pickle holding `{"generator": ...,
//! "generator_ema": {"model.<wan key>": tensor}}`. The file is written here with a minimal pickle
//! writer ([`ff_tests::torch`]), so no torch is needed.

use burn::backend::NdArray;
use ff_model::dit::{DitConfig, WanDit};
use ff_model::fixture::{FixtureMeta, check_dit_model};
use ff_model::load::read_tensors;
use ff_tests::fixtures_dir;
use ff_tests::torch::write_pt;

#[test]
fn self_forcing_pt_checkpoint_loads_generator_ema() {
    let dir = fixtures_dir().join("wan_dit_tiny");
    let meta = FixtureMeta::read(&dir).unwrap();
    let config = DitConfig::from_json(dir.join("meta.json")).unwrap();
    let weights = read_tensors(&dir.join("weights_wan.safetensors")).unwrap();
    let out = std::env::temp_dir().join(format!("ff-self-forcing-{}.pt", std::process::id()));
    let state = weights.iter().map(|(k, v)| (format!("model.{k}"), v.clone())).collect();
    write_pt(&out, &[("generator", &state), ("generator_ema", &state)]);
    let model = WanDit::<NdArray>::load(&config, &out, &Default::default()).unwrap();
    let err = check_dit_model(&model, &meta).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert!(err <= 2e-2, "bf16 .pt: relative error {err}");
}
