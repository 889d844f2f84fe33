//! Parity of the Rust DiT with diffusers' `WanTransformer3DModel` on the reference fixtures,
//! from both the diffusers and the original Wan key layouts.

use burn::backend::NdArray;
use ff_model::fixture::verify_fixture;
use ff_tests::fixtures_dir;

fn check(name: &str) {
    let dir = fixtures_dir().join(name);
    let checks = verify_fixture::<NdArray>(&dir, &Default::default()).unwrap();
    let files: Vec<&str> = checks.iter().map(|c| c.weights.as_str()).collect();
    assert_eq!(files, ["weights_diffusers.safetensors", "weights_wan.safetensors"]);
    for c in checks {
        assert!(c.max_rel_err <= 1e-4, "{name}/{}: relative L2 error {}", c.weights, c.max_rel_err);
    }
}

#[test]
fn per_sample_timestep_fixture_matches_diffusers() {
    check("wan_dit_tiny");
}

#[test]
fn per_frame_timestep_fixture_matches_diffusers() {
    check("wan_dit_tiny_per_frame");
}
