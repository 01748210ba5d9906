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
    match std::fs::read_to_string(path) {
        Ok(text) => {
            refuse_if_others_can_read(path)?;
            return HostKeys::from_key_file(&text).map(|k| (k, false));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("reading", e)),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir).map_err(|e| io("making the folder of", e))?;
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
        // Another process created it first: use that one.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path).map_err(|e| io("reading", e))?;
            HostKeys::from_key_file(&text).map(|k| (k, false))
        }
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

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn refuse_if_others_can_read(path: &Path) -> Result<(), KeyError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| KeyError(format!("{}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(KeyError(format!(
            "the key file {} is open to others (mode {:o}): `chmod 600` it, and replace the key if others may have read it",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_if_others_can_read(_path: &Path) -> Result<(), KeyError> {
    Ok(())
}
