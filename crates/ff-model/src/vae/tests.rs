//! Parity with diffusers (fixture), streaming decode == full decode, both checkpoint layouts.

use super::*;
use crate::load::read_tensors;
use burn::backend::NdArray;
use burn::module::Module;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_store::ModuleSnapshot;
use std::path::{Path, PathBuf};

type B = NdArray<f32>;

fn fixtures() -> PathBuf {
    std::env::var_os("FF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"))
}

fn tiny_fixture() -> PathBuf {
    fixtures().join("wan_vae_tiny")
}

fn max_abs_rel(a: Tensor<B, 5>, b: Tensor<B, 5>) -> f64 {
    assert_eq!(a.dims(), b.dims());
    let diff = (a - b.clone()).powi_scalar(2).sum().into_scalar() as f64;
    let norm = b.powi_scalar(2).sum().into_scalar() as f64;
    (diff / norm).sqrt()
}

#[test]
fn fixture_parity_encode_and_decode() {
    let results = verify_fixture::<B>(&tiny_fixture(), &Default::default()).unwrap();
    assert!(!results.is_empty());
    for (name, err) in results {
        eprintln!("{name}: max relative L2 error {err:e}");
        assert!(err <= 1e-4, "{name}: relative L2 error {err:e} > 1e-4");
    }
}
