//! The host's key file (docs/host-keys.md, "The key file"): one JSON object,
//! `{"current":ID,"format":"mrtr-gate/host-keys/v1","keys":{ID:HEX,...}}`, each secret at
//! least 32 bytes in lowercase hex. Created on first use with 32 random bytes from the
//! operating system, readable and writable by its owner only; on Unix a file that others can
//! read is refused (like ssh's keys: a key others read authenticates nothing).

use super::{HostKeys, KeyError, hex, unhex};
use serde_json::{Map, Value, json};
use std::io::Write as _;
use std::path::Path;

/// The `format` of a key file.
pub const KEY_FILE_FORMAT: &str = "mrtr-gate/host-keys/v1";

impl HostKeys {
    /// The keys a key file's text holds: every key listed is accepted, `current` makes new
    /// MACs and pseudonyms.
    pub fn from_key_file(text: &str) -> Result<Self, KeyError> {
        let bad = |why: &str| KeyError(format!("the key file {why}"));
        let v: Value = serde_json::from_str(text).map_err(|_| bad("is not JSON"))?;
        if v.get("format").and_then(Value::as_str) != Some(KEY_FILE_FORMAT) {
            return Err(bad(&format!("is not `{KEY_FILE_FORMAT}`")));
        }
        let current = v
            .get("current")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("names no `current` key"))?;
        let listed = v
            .get("keys")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("has no `keys` object"))?;
        let secret = |id: &str| {
            listed
                .get(id)
                .and_then(Value::as_str)
                .and_then(unhex)
                .ok_or_else(|| bad(&format!("has no hex secret for key `{id}`")))
        };
        let mut keys = Self::new(current, &secret(current)?)?;
        for id in listed.keys().filter(|id| *id != current) {
            keys.add(id, &secret(id)?)?;
        }
        Ok(keys)
    }

    /// The key file text for these keys (secrets included: write it 0600).
    pub fn to_key_file(&self) -> String {
        let keys: Map<String, Value> = self
            .keys
            .iter()
            .map(|(id, secret)| (id.clone(), json!(hex(secret))))
            .collect();
        format!(
            "{}\n",
            json!({"current": self.current, "format": KEY_FILE_FORMAT, "keys": keys})
        )
    }

    /// A new key with `id` and 32 random bytes from the operating system.
    pub fn generate(id: &str) -> Result<Self, KeyError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| KeyError(format!("no randomness from the operating system: {e}")))?;
        Self::new(id, &secret)
    }
}

/// The keys in the file at `path`, created (with a new key named `new_id`) when there is
/// none: its folder made if missing (0700 on Unix), the file 0600, written aside and linked
/// into place so two first runs at once end up with one key. `true` when it was created.
pub fn load_or_create(path: &Path, new_id: &str) -> Result<(HostKeys, bool), KeyError> {
    let io = |what: &str, e: std::io::Error| KeyError(format!("{what} {}: {e}", path.display()));
    match read_key_file(path) {
        Ok(text) => return HostKeys::from_key_file(&text).map(|k| (k, false)),
        Err(ReadError::Missing) => {}
        Err(ReadError::Refused(e)) => return Err(e),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::reference_hosts::create_private_dir(dir)
            .map_err(|e| io("making the folder of", e))?;
    }
    let keys = HostKeys::generate(new_id)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = private_file(&tmp)
        .and_then(|mut f| {
            f.write_all(keys.to_key_file().as_bytes())
                .and_then(|()| f.sync_all())
        })
        .and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => Ok((keys, true)),
        // Another process created it first: use that one, if it is ours alone (a file planted
        // by another user between the look and the link is refused here).
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match read_key_file(path) {
            Ok(text) => HostKeys::from_key_file(&text).map(|k| (k, false)),
            Err(ReadError::Missing) => Err(io("reading", e)),
            Err(ReadError::Refused(e)) => Err(e),
        },
        Err(e) => Err(io("writing", e)),
    }
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Why a key file was not read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// There is no file at the path.
    Missing,
    /// It could not be read, or is not one the keys may come from.
    Refused(KeyError),
}

/// The text of the key file at `path`, read only when it is the effective user's alone: a
/// regular file owned by that user that nobody else may read or write (mode `0600` or
/// stricter), in a folder nobody else may write (or one with the sticky bit, like `/tmp`,
/// where others cannot replace it). The one way every command reads a key file.
pub fn read_key_file(path: &Path) -> Result<String, ReadError> {
    let refused = |why: String| ReadError::Refused(KeyError(why));
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) => return Err(refused(format!("the key file {}: {e}", path.display()))),
    };
    // The checks are of the file that was opened, not of whatever the path names next.
    let meta = file
        .metadata()
        .map_err(|e| refused(format!("the key file {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(refused(format!(
            "the key file {} is not a regular file",
            path.display()
        )));
    }
    refuse_unless_private(path, &meta).map_err(ReadError::Refused)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text)
        .map_err(|e| refused(format!("the key file {}: {e}", path.display())))?;
    Ok(text)
}

#[cfg(unix)]
fn refuse_unless_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyError> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(KeyError(format!(
            "the key file {} belongs to uid {}, not to this user (uid {me}): a key another user made is not used; remove it and let mrtr-gate make a new one",
            path.display(),
            meta.uid()
        )));
    }
    let mode = meta.mode();
    if mode & 0o077 != 0 {
        return Err(KeyError(format!(
            "the key file {} is open to others (mode {:o}): `chmod 600` it, and replace the key if others may have read it",
            path.display(),
            mode & 0o777
        )));
    }
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => std::path::PathBuf::from("."),
    };
    let dir_meta = std::fs::metadata(&dir)
        .map_err(|e| KeyError(format!("the key file's folder {}: {e}", dir.display())))?;
    let sticky = dir_meta.mode() & 0o1000 != 0;
    if dir_meta.mode() & 0o022 != 0 && !sticky {
        return Err(KeyError(format!(
            "the key file's folder {} may be written by others (mode {:o}): they could replace the key; `chmod go-w` it",
            dir.display(),
            dir_meta.mode() & 0o777
        )));
    }
    if dir_meta.uid() != me && dir_meta.uid() != 0 {
        return Err(KeyError(format!(
            "the key file's folder {} belongs to uid {}, neither this user nor root: they could replace the key",
            dir.display(),
            dir_meta.uid()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_unless_private(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), KeyError> {
    Ok(())
}
