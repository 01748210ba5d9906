//! The host keys of `mrtr-gate call`, `list`, `conformance` and `verify-audit`
//! (docs/host-keys.md, "In `mrtr-gate`"): on by default, from a key file made on first use
//! in the user's config folder; off only with `--insecure-no-host-keys`, which says so on
//! stderr every run.

use mrtr_gate_host::core::digest::sha256_hex;
use mrtr_gate_host::host_keys::{HostKeys, Pseudonyms, key_file};
use std::path::{Path, PathBuf};

/// The environment variable that names the key file (the flag `--host-keys` wins).
pub const KEY_FILE_ENV: &str = "MRTR_GATE_HOST_KEYS";

/// The key file's name in the config folder.
pub const KEY_FILE_NAME: &str = "host-keys.json";

/// What the flags say about keys.
#[derive(Clone, Debug, Default)]
pub struct KeyOptions {
    /// `--host-keys FILE`.
    pub key_file: Option<PathBuf>,
    /// `--insecure-no-host-keys`.
    pub insecure_no_host_keys: bool,
    /// `--audit-anchor FILE`: where the trail's anchor goes (default: beside the key file).
    pub anchor: Option<PathBuf>,
}

/// The host-key flags every command that gates takes.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KeyFlags {
    /// The host key file (default: $MRTR_GATE_HOST_KEYS, else host-keys.json in
    /// $XDG_CONFIG_HOME/mrtr-gate or ~/.config/mrtr-gate; made on first use, mode 0600).
    #[arg(long, value_name = "FILE")]
    pub host_keys: Option<PathBuf>,
    /// Run without host keys: stored rounds unauthenticated, the user and tenant as plain
    /// digests in the trail, the trail neither keyed nor anchored. Warned on stderr every run.
    #[arg(long)]
    pub insecure_no_host_keys: bool,
}

impl KeyFlags {
    /// The key options, with the trail's anchor when one is named.
    pub fn options(&self, anchor: Option<&PathBuf>) -> KeyOptions {
        KeyOptions {
            key_file: self.host_keys.clone(),
            insecure_no_host_keys: self.insecure_no_host_keys,
            anchor: anchor.cloned(),
        }
    }
}

/// The printed warning of `--insecure-no-host-keys` (stderr, every run).
pub const INSECURE_WARNING: &str = "--insecure-no-host-keys: stored rounds are not authenticated, the user and tenant reach the audit trail as plain digests, and the trail is neither keyed nor anchored (lines can be appended or cut off unnoticed)";

/// `$XDG_CONFIG_HOME/mrtr-gate` (an absolute path only, as the XDG spec says), else
/// `$HOME/.config/mrtr-gate`, else `%APPDATA%\mrtr-gate`.
pub fn config_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    var("XDG_CONFIG_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".config")))
        .or_else(|| var("APPDATA"))
        .map(|d| d.join("mrtr-gate"))
}

/// The key file: the flag, else `$MRTR_GATE_HOST_KEYS`, else `host-keys.json` in the config
/// folder.
pub fn key_file_path(options: &KeyOptions) -> Result<PathBuf, String> {
    options
        .key_file
        .clone()
        .or_else(|| std::env::var_os(KEY_FILE_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
        .or_else(|| config_dir().map(|d| d.join(KEY_FILE_NAME)))
        .ok_or_else(|| {
            format!("no config folder (neither XDG_CONFIG_HOME nor HOME is set): name the key file with --host-keys FILE or {KEY_FILE_ENV}")
        })
}

/// The keys a run uses: loaded, or created on first use (said on stderr); `None` with
/// `--insecure-no-host-keys` (warned on stderr).
pub fn load(options: &KeyOptions) -> Result<Option<Keyed>, String> {
    if options.insecure_no_host_keys {
        mrtr_gate_proxy::log::warn(
            "insecure_flag",
            INSECURE_WARNING,
            &[("flag", "--insecure-no-host-keys")],
        );
        return Ok(None);
    }
    let path = key_file_path(options)?;
    let id = format!("k{}", unix_seconds());
    let (keys, created) = key_file::load_or_create(&path, &id).map_err(|e| e.0)?;
    if created {
        let shown = path.display().to_string();
        mrtr_gate_proxy::log::info(
            "host_key_created",
            &format!(
                "created a host key in {shown} (mode 0600; keep it: it authenticates the stored \
                 rounds and the audit trail)"
            ),
            &[("path", &shown)],
        );
    }
    Ok(Some(Keyed {
        pseudonyms: Pseudonyms::new(keys.clone()),
        keys,
        path,
    }))
}

/// The keys of an existing key file (for checking a trail: nothing is created).
pub fn load_existing(options: &KeyOptions) -> Result<Keyed, String> {
    let path = key_file_path(options)?;
    let text = key_file::read_key_file(&path).map_err(|e| match e {
        key_file::ReadError::Missing => format!("the key file {}: not found", path.display()),
        key_file::ReadError::Refused(e) => e.0,
        other => format!("the key file {}: {other:?}", path.display()),
    })?;
    let keys = HostKeys::from_key_file(&text).map_err(|e| e.0)?;
    Ok(Keyed {
        pseudonyms: Pseudonyms::new(keys.clone()),
        keys,
        path,
    })
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Keys loaded for a run.
pub struct Keyed {
    /// The keys.
    pub keys: HostKeys,
    /// Pseudonyms under the current key.
    pub pseudonyms: Pseudonyms,
    /// The key file they came from.
    pub path: PathBuf,
}

impl Keyed {
    /// Where the anchor of `trail` goes: `--audit-anchor`, else `anchors/<128 bits of the
    /// SHA-256 of the trail's canonical path>.anchor` beside the key file (apart from the
    /// trail, wherever the trail is).
    pub fn anchor_path(&self, options: &KeyOptions, trail: &Path) -> Result<PathBuf, String> {
        Self::anchor_of(&self.path, options, trail)
    }

    /// [`Keyed::anchor_path`] for the key file at `key_file`, before its keys are read.
    pub fn anchor_of(
        key_file: &Path,
        options: &KeyOptions,
        trail: &Path,
    ) -> Result<PathBuf, String> {
        if let Some(anchor) = &options.anchor {
            return Ok(anchor.clone());
        }
        let canonical = trail
            .canonicalize()
            .map_err(|e| format!("{}: {e}", trail.display()))?;
        let digest = sha256_hex(canonical.to_string_lossy().as_bytes());
        let dir = key_file
            .parent()
            .map(|d| d.join("anchors"))
            .unwrap_or_else(|| PathBuf::from("anchors"));
        Ok(dir.join(format!("{}.anchor", digest.get(..32).unwrap_or(&digest))))
    }
}

/// Where the links of `trail` go: beside it, `<trail>.links` (links are MACs, not secrets).
pub fn links_path(trail: &Path) -> PathBuf {
    let mut name = trail.as_os_str().to_owned();
    name.push(".links");
    PathBuf::from(name)
}

/// " in shard S" (nothing for the lines from before shards).
fn in_shard(shard: &str) -> String {
    if shard.is_empty() {
        String::new()
    } else {
        format!(" in shard {shard}")
    }
}

/// Check the trail at `path`: its chain, then its links and anchor with the key file
/// (nothing is created), all read as one state even while a proxy writes it
/// ([`crate::trail`]). The line to print, or what is wrong.
pub fn verify_keyed(
    path: &Path,
    keys: &KeyOptions,
    links: Option<&Path>,
) -> Result<String, String> {
    verified_trail(path, keys, links).map(|(summary, _)| summary)
}

/// [`verify_keyed`], and the trail's text exactly as verified (what `export-audit` exports:
/// never a line read after the check).
pub fn verified_trail(
    path: &Path,
    keys: &KeyOptions,
    links: Option<&Path>,
) -> Result<(String, String), String> {
    use mrtr_gate_host::host_keys::{AnchorCheck, verify_anchor};
    let links = links.map_or_else(|| links_path(path), ToOwned::to_owned);
    let key_path = key_file_path(keys)?;
    let anchor = Keyed::anchor_of(&key_path, keys, path)?;
    let read = crate::trail::read_trail(path, Some(&links), Some(&anchor))?;
    let n = mrtr_gate_host::core::audit::verify_chain(read.trail.lines())
        .map_err(|b| format!("the chain is broken: {b:?}"))?;
    let keyed = load_existing(keys).map_err(|e| {
        format!(
            "{e}. Next: name the key file the trail was written with (--host-keys FILE, or \
             $MRTR_GATE_HOST_KEYS); a trail written with --insecure-no-host-keys: check it with \
             that flag (its chain only)"
        )
    })?;
    if n == 0 && read.anchor.is_empty() {
        // A run that wrote nothing (a binding that never opened a round) anchors nothing.
        return Ok((
            format!("{}: 0 events, nothing anchored", path.display()),
            read.trail,
        ));
    }
    match verify_anchor(&read.trail, &read.links, &read.anchor, &keyed.keys) {
        AnchorCheck::Intact { events } => Ok((
            format!(
                "{}: {events} events, chain intact, every line keyed, ends at its anchor",
                path.display()
            ),
            read.trail.clone(),
        )),
        AnchorCheck::BadAnchor => Err(format!(
            "no valid anchor for this trail at {} (missing, or not made with the key {}). \
             Next: a trail moved or copied since it was written keeps its anchor where it was \
             (the anchors are in {}): name it with --audit-anchor FILE; a trail written under \
             another key file: name that one with --host-keys FILE; a trail written with \
             --insecure-no-host-keys: check it with that flag (its chain only)",
            anchor.display(),
            key_path.display(),
            anchor
                .parent()
                .map_or_else(|| ".".to_owned(), |d| d.display().to_string())
        )),
        AnchorCheck::BrokenChain => Err("the chain is broken".into()),
        AnchorCheck::Unkeyed { shard, seq } => Err(format!(
            "line {seq}{} has no link made with the host key ({}): it was written without the key",
            in_shard(&shard),
            links.display()
        )),
        AnchorCheck::Truncated {
            shard,
            events,
            anchored,
        } => Err(format!(
            "the trail is cut short{}: {events} events, its anchor covers {anchored}",
            in_shard(&shard)
        )),
        AnchorCheck::Diverged { shard } => Err(format!(
            "the trail's event at its anchored position{} is not the anchored one",
            in_shard(&shard)
        )),
        AnchorCheck::Extended {
            shard,
            events,
            anchored,
        } => Err(format!(
            "the trail goes on past its anchor{}: {events} events, the anchor covers {anchored} (keyed lines its anchor does not cover: another writer, or an older anchor put back)",
            in_shard(&shard)
        )),
        other => Err(format!(
            "the trail does not verify against its anchor: {other:?}"
        )),
    }
}
