//! Files every crate writes or reads the same way.
//!
//! * Atomic replacement, the one writer for files a reader or an interrupted run must never see
//!   half-written (checkpoints, manifests, configs, videos).
//! * Defaults for missing keys: [`with_defaults`], the one merge of a config file over a config's
//!   defaults (Burn's `#[derive(Config)]` deserialises every field as required, so a file written
//!   before a field existed, or one that gives only some keys, is read through this).
//!
//! [`write_atomic`] writes into a temp file in the target's own folder (so the final rename stays
//! on one file system), syncs it, and renames it over the target with `tempfile`'s `persist`.
//! Readers see the old file or the complete new one; a failed write removes the temp file and
//! keeps the old file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::{ModelError, Result};

/// Replaces `path` with what `write` writes (see the module docs). Errors name `path`.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>) -> Result<()> {
    let io = |source| ModelError::io(path, source);
    // The temp path deletes the file when dropped, so every early return below cleans up.
    let (file, tmp) = temp_beside(path).map_err(io)?.into_parts();
    let mut writer = BufWriter::new(file);
    write(&mut writer).map_err(io)?;
    writer.flush().map_err(io)?;
    writer.get_ref().sync_all().map_err(io)?;
    drop(writer);
    tmp.persist(path).map_err(|e| io(e.error))
}

/// Checks that [`write_atomic`] can write `path` (its temp file is made and removed: the folder
/// takes files, and the name is one the file system accepts), for refusing a run whose output
/// cannot be written before any work. An existing `path` is left alone.
pub fn check_writable(path: &Path) -> Result<()> {
    temp_beside(path).map(drop).map_err(|source| ModelError::io(path, source))
}

/// A temp file `.<name>.<random>.tmp` in the folder of `path`, created with the mode a plain
/// `File::create` gives (0o666 less the umask) rather than `tempfile`'s private 0o600, since it
/// becomes the output.
fn temp_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let prefix = format!(".{}.", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder.tempfile_in(dir)
}

/// `given` over `defaults`: tables merge key by key, any other value replaces the default. A key
/// the defaults' table lacks is an error naming its dotted path and the known keys of its table.
pub fn with_defaults(defaults: serde_json::Value, given: serde_json::Value) -> Result<serde_json::Value> {
    merge(defaults, given, "")
}

fn merge(defaults: serde_json::Value, given: serde_json::Value, at: &str) -> Result<serde_json::Value> {
    use serde_json::Value;
    match (defaults, given) {
        (Value::Object(mut d), Value::Object(g)) => {
            for (key, value) in g {
                let here = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
                let Some(default) = d.remove(&key) else {
                    let known = d.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
                    let place = if at.is_empty() { "at the top level".to_string() } else { format!("in [{at}]") };
                    return Err(ModelError::Config(format!("unknown key `{here}` {place} (known keys: {known})")));
                };
                let merged = merge(default, value, &here)?;
                d.insert(key, merged);
            }
            Ok(Value::Object(d))
        }
        // A table where the default has none (or an optional key left unset): taken as given.
        (_, given) => Ok(given),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn missing_keys_take_defaults_and_unknown_keys_are_named() {
        let defaults = serde_json::json!({"a": 1, "t": {"x": 1, "y": 2}, "o": null});
        let merged = with_defaults(defaults.clone(), serde_json::json!({"t": {"y": 5}, "o": "set"})).unwrap();
        assert_eq!(merged, serde_json::json!({"a": 1, "t": {"x": 1, "y": 5}, "o": "set"}));
        let err = with_defaults(defaults, serde_json::json!({"t": {"z": 0}})).unwrap_err().to_string();
        assert!(err.contains("unknown key `t.z` in [t] (known keys: x, y)"), "{err}");
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        fs::write(&path, b"old").unwrap();
        write_atomic(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let fresh = dir.path().join("fresh.bin");
            fs::write(&fresh, b"plain").unwrap();
            write_atomic(&path, |w| w.write_all(b"newer")).unwrap();
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), mode(&fresh), "the mode a plain write gives, not a private temp file's");
        }
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        fs::write(&path, b"old").unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("encoder failed"))
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("out.bin") && err.contains("encoder failed"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(check_writable(&path).is_ok());
        assert_eq!(fs::read(&path).unwrap(), b"old", "the check leaves the file alone");
        assert!(check_writable(&dir.path().join("missing/out.bin")).is_err());
        assert!(check_writable(&dir.path().join(format!("{}.mp4", "a".repeat(250)))).is_err(), "a name the file system refuses");
    }
}
