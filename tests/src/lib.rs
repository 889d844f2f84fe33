//! Shared helpers of the workspace integration tests.

pub mod torch;

use std::path::PathBuf;

/// The reference fixtures: [`ff_model::fixture::dir`] (`$FF_FIXTURES`, else the repository's
/// `tests/fixtures`; panics naming the path when it is missing).
pub fn fixtures_dir() -> PathBuf {
    ff_model::fixture::dir()
}
