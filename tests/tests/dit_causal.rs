//! The chunk-over-context forward against Self-Forcing's `CausalWanModel` KV-cache inference
//! (`sf_causal_tiny/{uniform,per_frame,window}`): every chunk reads the K/V our own earlier
//! forwards published, through concatenated segments and through an in-place K/V window.

use burn::backend::NdArray;
use ff_model::fixture::{FixtureCheck, verify_fixture};
use ff_tests::fixtures_dir;
use std::path::{Path, PathBuf};

fn verify(dir: &Path) -> Vec<FixtureCheck> {
    verify_fixture::<NdArray>(dir, &Default::default()).unwrap()
}

fn check(name: &str) {
    let checks = verify(&fixtures_dir().join("sf_causal_tiny").join(name));
    let labels: Vec<&str> = checks.iter().map(|c| c.weights.as_str()).collect();
    assert_eq!(labels, ["weights_wan.safetensors (segments)", "weights_wan.safetensors (window)"]);
    for c in checks {
        assert!(c.max_rel_err <= 1e-4, "{name}/{}: relative L2 error {}", c.weights, c.max_rel_err);
    }
}

#[test]
fn uniform_timestep_chunks_match_self_forcing() {
    check("uniform");
}

#[test]
fn per_frame_timestep_chunks_match_self_forcing() {
    check("per_frame");
}

#[test]
fn rolling_window_chunks_match_self_forcing() {
    check("window");
}

/// A copy of fixture folder `name` whose meta.json is changed by `edit`.
fn edited_copy(name: &str, tag: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let src = fixtures_dir().join("sf_causal_tiny").join(name);
    let dir = std::env::temp_dir().join(format!("ff-causal-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["inputs.safetensors", "expected.safetensors", "weights_wan.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(src.join("meta.json")).unwrap()).unwrap();
    edit(&mut meta);
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    dir
}

#[test]
fn the_check_fails_when_a_chunk_skips_its_cached_context() {
    // Chunk 1 reading nothing instead of chunk 0: its output must miss the reference.
    let dir = edited_copy("uniform", "skip", |m| m["chunks"][1]["reads_chunks"] = serde_json::json!([]));
    for c in verify(&dir) {
        assert!(c.max_rel_err > 1e-2, "{}: {}", c.weights, c.max_rel_err);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn folders_with_fewer_chunks_still_match() {
    // Only the first two chunks listed (another chunk count than the shipped folders).
    let dir = edited_copy("window", "short", |m| m["chunks"].as_array_mut().unwrap().truncate(2));
    for c in verify(&dir) {
        assert!(c.max_rel_err <= 1e-4, "{}: {}", c.weights, c.max_rel_err);
    }
    std::fs::remove_dir_all(dir).unwrap();
}
