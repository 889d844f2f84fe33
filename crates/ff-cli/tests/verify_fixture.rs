//! `flashforward verify-fixture`: output contract and exit codes on the reference fixtures and
//! on a copy whose expected output was perturbed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    ff_model::fixture::dir()
}

fn verify(dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).arg("verify-fixture").arg(dir).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
}

fn last_error(stdout: &str) -> f64 {
    let last = stdout.lines().last().unwrap();
    last.strip_prefix("max_rel_err=").unwrap_or_else(|| panic!("last line {last:?}")).parse().unwrap()
}

#[test]
fn reference_fixtures_pass() {
    for name in ["wan_dit_tiny", "wan_dit_tiny_per_frame", "umt5_tiny", "wan_vae_tiny"] {
        let (code, stdout) = verify(&fixtures().join(name));
        assert_eq!(code, 0, "{name}: {stdout}");
        assert!(last_error(&stdout) <= 1e-4, "{name}: {stdout}");
    }
}

#[test]
fn a_wrong_reference_fails_with_exit_code_1() {
    let src = fixtures().join("wan_dit_tiny");
    let dir = std::env::temp_dir().join(format!("ff-verify-wrong-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["meta.json", "inputs.safetensors", "weights_wan.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    // expected.safetensors with its first value changed (the header is JSON, data follows it)
    let mut bytes = std::fs::read(src.join("expected.safetensors")).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let first = f32::from_le_bytes(bytes[8 + header..12 + header].try_into().unwrap());
    bytes[8 + header..12 + header].copy_from_slice(&(first + 50.0).to_le_bytes());
    std::fs::write(dir.join("expected.safetensors"), bytes).unwrap();
    let (code, stdout) = verify(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 1, "{stdout}");
    assert!(last_error(&stdout) > 1e-4);
}

#[test]
fn a_folder_without_meta_json_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(["verify-fixture", "/nonexistent/fixture"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/fixture/meta.json"));
}
