//! Atomic file replacement: write `<dir>/.<name>.tmp`, sync it, rename it over `<dir>/<name>`.
//! Readers, and a run killed mid-write, see either the old file or the complete new one.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Result, TrainError};

/// Replaces `path` with `bytes`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temp_path(path);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TrainError::Io { path, source }
    };
    let written = File::create(&tmp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .map_err(io(&tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(io(path)));
    if written.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}
