//! Atomic file replacement: write `<dir>/.<name>.tmp`, sync it, rename it over `<dir>/<name>`.
//! Readers (and an interrupted run) see either the old file or the complete new one.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Replaces `path` with what `write` writes.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_synced(&tmp, write)
        .and_then(|()| fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display())));
    if result.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_synced(tmp: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let file = File::create(tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut writer = BufWriter::new(file);
    write(&mut writer).with_context(|| format!("cannot write {}", tmp.display()))?;
    writer.flush()?;
    writer.get_ref().sync_all().with_context(|| format!("cannot sync {}", tmp.display()))
}

/// The temp file `write_atomic` writes before renaming it over `path`.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::tests::Scratch;

    #[test]
    fn replaces_the_file_and_leaves_no_temp() {
        let scratch = Scratch::new("atomic_replace");
        let dir = scratch.path();
        let path = dir.join("out.bin");
        fs::write(&path, b"old").unwrap();
        write_atomic(&path, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let scratch = Scratch::new("atomic_fail");
        let dir = scratch.path();
        let path = dir.join("out.bin");
        fs::write(&path, b"old").unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(b"half")?;
            anyhow::bail!("encoder failed")
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir).unwrap().count(), 1);
    }
}
