//! Shared helpers of the workspace integration tests.

pub mod torch;

use std::path::PathBuf;

/// The reference fixtures: `$FF_FIXTURES`, else `../shared/fixtures` beside the repository.
pub fn fixtures_dir() -> PathBuf {
    match std::env::var_os("FF_FIXTURES") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"),
    }
}
