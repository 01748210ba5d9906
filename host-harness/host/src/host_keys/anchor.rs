//! The audit trail under a host key (docs/host-keys.md, "The keyed trail"): every line the
//! gate appends gets a keyed link, and the head of each shard the sink last confirmed is
//! anchored apart from the trail. The trail itself is the core's, unchanged: any host verifies
//! its chains without a key (`verify_chain`); the key holder also verifies who wrote each line
//! and where each shard's chain ended ([`verify_anchor`]).
//!
//! - A **link** is one JSON line in the links file, written (and synced) before the line it
//!   covers is appended: `{"event_sha256":H,"key_id":K,"mac":M,"seq":N,"shard":S}`, M =
//!   HMAC-SHA256(key; "mrtr-gate/audit-link/v2", S, N, H). H is the digest of the line, which
//!   names the line before it in its shard (`prev_sha256`), so a link covers the shard's chain
//!   up to its line: a line appended without the key has no link that verifies.
//! - The **anchor** (checkpoint) is one line per shard, in shard order, the whole file
//!   replaced after every append that was written: `{"event_sha256":H,"key_id":K,"mac":M,
//!   "seq":N,"shard":S}`, M = HMAC-SHA256(key; "mrtr-gate/audit-anchor/v2", S, N, H): each
//!   shard's head when the gate last wrote to it. Lines past it are reported `Extended`,
//!   lines missing before it `Truncated`.
//! - A trail written before shards (audit `v2`/`v3` lines, no `shard`) was keyed without one:
//!   `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}` over "mrtr-gate/audit-link/v1" and
//!   "mrtr-gate/audit-anchor/v1" with (N, H). Those lines and that anchor still verify, as
//!   the shard `""`.
//!
//! Every MAC input is length-prefixed (`HostKeys::mac`): an 8-byte big-endian length, then
//! the bytes; N is 8 bytes big-endian, H its 64 lowercase hex digits as ASCII, S its ASCII.

use super::{HostKeys, hex, unhex};
use mrtr_gate_core::host::{AppendOutcome, Audit, AuditEntry, ChainHead, HostError, ShardHeads};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::reference_hosts::group_sync::GroupSync;

const ANCHOR_CONTEXT: &[u8] = b"mrtr-gate/audit-anchor/v2";
const LINK_CONTEXT: &[u8] = b"mrtr-gate/audit-link/v2";
/// The contexts of a trail keyed before shards (no `shard` in the link or the anchor).
const ANCHOR_CONTEXT_V1: &[u8] = b"mrtr-gate/audit-anchor/v1";
const LINK_CONTEXT_V1: &[u8] = b"mrtr-gate/audit-link/v1";

/// An audit sink under a host key: each line keyed by a link written beside the trail, each
/// shard's head anchored apart from it. A trail whose newest lines were removed still verifies
/// as a chain, and so does one with lines appended by whoever can write it; against the links
/// and the anchor neither does ([`verify_anchor`]).
pub struct AnchoredAudit<A> {
    inner: A,
    keys: HostKeys,
    checkpoint: PathBuf,
    links: PathBuf,
    /// Held across an append, from the early refusal to the anchor.
    order: Mutex<()>,
    /// The links file, opened at the first append and kept; its `fsync`s through
    /// [`GroupSync`] (one that failed fails every later link).
    links_file: Mutex<Option<Arc<std::fs::File>>>,
    links_sync: GroupSync,
    /// Set when a link write failed: see [`AnchoredAudit::link`].
    links_broken: std::sync::atomic::AtomicBool,
    /// Each shard's anchor line as last written, by shard (the file is these lines in shard
    /// order): a shard's anchor only moves forward. Starts from the checkpoint's lines that
    /// verify, so a process started again keeps the shards it has not written to yet.
    anchored: Mutex<BTreeMap<String, (u64, String)>>,
    /// Each shard's head `inner` named last to this sink (in a write or a refusal), used when
    /// it gives no `head_hint`. An entry at or below the head's `seq` cannot extend it (a
    /// chain only grows), so it is refused here without a link: with several gate instances in
    /// a process, each one's guess of the head is often one behind (another's line went in
    /// while its `fsync` ran), and its link would be written and synced for nothing.
    newest: Mutex<BTreeMap<String, ChainHead>>,
}

impl<A> AnchoredAudit<A> {
    /// Key `inner`'s lines in the `links` file (beside the trail: links are not secret) and
    /// anchor its shards' heads in `checkpoint` (kept where the trail's writer cannot reach),
    /// with `keys`' current key. The checkpoint's lines that verify are kept for the shards
    /// this sink has not written to yet.
    pub fn new(
        inner: A,
        keys: HostKeys,
        checkpoint: impl AsRef<Path>,
        links: impl AsRef<Path>,
    ) -> Self {
        let anchored = std::fs::read_to_string(checkpoint.as_ref())
            .map(|text| {
                text.lines()
                    .filter_map(|line| {
                        let head = parse_keyed_head(line)?;
                        // A `v1` line (a trail keyed before shards) anchors the shard `""`,
                        // kept verbatim: that chain is closed, and its anchor must outlive
                        // every rewrite, or its lines would read as past their anchor.
                        let shard = head.shard.clone().unwrap_or_default();
                        verifies(&keys, Kind::Anchor, &head)
                            .then(|| (shard, (head.seq, line.to_owned())))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            inner,
            keys,
            checkpoint: checkpoint.as_ref().to_owned(),
            links: links.as_ref().to_owned(),
            order: Mutex::new(()),
            links_file: Mutex::new(None),
            links_sync: GroupSync::default(),
            links_broken: std::sync::atomic::AtomicBool::new(false),
            anchored: Mutex::new(anchored),
            newest: Mutex::new(BTreeMap::new()),
        }
    }
}

/// A link or an anchor line.
#[derive(Clone, Copy)]
enum Kind {
    Link,
    Anchor,
}

/// The MAC input of a keyed head: (S, N, H) in the `v2` context, or (N, H) in the `v1` one
/// for a head keyed before shards.
fn mac_parts<'a>(
    kind: Kind,
    shard: Option<&'a str>,
    seq: &'a [u8; 8],
    digest: &'a str,
) -> Vec<&'a [u8]> {
    match (kind, shard) {
        (Kind::Link, Some(s)) => vec![LINK_CONTEXT, s.as_bytes(), seq, digest.as_bytes()],
        (Kind::Anchor, Some(s)) => vec![ANCHOR_CONTEXT, s.as_bytes(), seq, digest.as_bytes()],
        (Kind::Link, None) => vec![LINK_CONTEXT_V1, seq, digest.as_bytes()],
        (Kind::Anchor, None) => vec![ANCHOR_CONTEXT_V1, seq, digest.as_bytes()],
    }
}

/// `{"event_sha256":H,"key_id":K,"mac":M,"seq":N,"shard":S}` (keys in canonical order), MAC'd
/// with `keys`' current key. `shard` is a sink's shard name (lowercase letters and digits:
/// nothing to escape).
fn keyed_head(
    keys: &HostKeys,
    kind: Kind,
    shard: &str,
    seq: u64,
    event_sha256: &str,
) -> Result<String, HostError> {
    let id = keys.current_id();
    let n = seq.to_be_bytes();
    let mac = keys
        .mac(id, &mac_parts(kind, Some(shard), &n, event_sha256))
        .ok_or_else(|| HostError::new("the current host key is missing"))?;
    Ok(format!(
        "{{\"event_sha256\":\"{event_sha256}\",\"key_id\":\"{id}\",\"mac\":\"{}\",\"seq\":{seq},\"shard\":\"{shard}\"}}",
        hex(&mac)
    ))
}

/// A file these options create is the owner's only (0600 on Unix): the links and the anchor
/// say what the trail holds and when.
fn owner_only(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    options
}

impl<A> AnchoredAudit<A> {
    /// Open the links file now (kept for the appends) and the anchor (its content untouched),
    /// so a process that cannot write either learns it at its start, with the file named,
    /// instead of at its first round. Both are created owner-only when missing.
    pub fn prepare(&self) -> Result<(), String> {
        let links = owner_only(std::fs::OpenOptions::new().create(true).append(true))
            .open(&self.links)
            .map_err(|e| format!("the audit links file {}: {e}", self.links.display()))?;
        owner_only(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false),
        )
        .open(&self.checkpoint)
        .map_err(|e| format!("the audit anchor {}: {e}", self.checkpoint.display()))?;
        *self
            .links_file
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(links));
        Ok(())
    }
}

impl<A: Audit> AnchoredAudit<A> {
    fn link(&self, entry: &AuditEntry) -> Result<(), HostError> {
        let mut line = keyed_head(
            &self.keys,
            Kind::Link,
            &entry.shard,
            entry.seq,
            &entry.event_sha256,
        )?;
        line.push('\n');
        // One write of one line, durable before the append is tried: the line it covers is
        // never in the trail without it.
        let failed = |_| HostError::new("the audit link could not be written");
        let (file, number) = {
            let mut open = self
                .links_file
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let file = match &*open {
                Some(f) => Arc::clone(f),
                None => {
                    let f = owner_only(std::fs::OpenOptions::new().create(true).append(true))
                        .open(&self.links)
                        .map_err(failed)?;
                    Arc::clone(open.insert(Arc::new(f)))
                }
            };
            // A write that failed part way may have left a torn line, onto which the next
            // link would be glued (and its line read as unkeyed): no link is written after it.
            if self.links_broken.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(HostError::new(
                    "an earlier audit link write failed; nothing more is appended",
                ));
            }
            if let Err(e) = (&*file).write_all(line.as_bytes()) {
                self.links_broken
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(failed(e));
            }
            let number = self.links_sync.wrote();
            (file, number)
        };
        self.links_sync.sync_through(number, &file).map_err(failed)
    }

    fn anchor(&self, entry: &AuditEntry) -> Result<(), HostError> {
        let mut anchored = self.anchored.lock().unwrap_or_else(PoisonError::into_inner);
        if anchored
            .get(&entry.shard)
            .is_some_and(|(seq, _)| entry.seq <= *seq)
        {
            // Another thread confirmed and anchored a later line of the shard already.
            return Ok(());
        }
        let line = keyed_head(
            &self.keys,
            Kind::Anchor,
            &entry.shard,
            entry.seq,
            &entry.event_sha256,
        )?;
        let before = anchored.insert(entry.shard.clone(), (entry.seq, line));
        let mut text = String::new();
        for (_, line) in anchored.values() {
            text.push_str(line);
            text.push('\n');
        }
        // Replaced in place: one write of a few short lines at offset 0. A rename over the old
        // file, on ext4, flushed the new file and freed the old inode on every append, most
        // of the gate's time in `mrtr-gate proxy` (docs/performance.md, "The proxy"). `seq`s
        // only grow and shards are only added, so the new text is never shorter than the old
        // unless the key id changed; then the rest is cut. A reader racing the write, or a
        // crash tearing the sector, sees an anchor whose MAC fails (`BadAnchor`), never a
        // wrong one that verifies.
        owner_only(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false),
        )
        .open(&self.checkpoint)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            if f.metadata()?.len() > text.len() as u64 {
                f.set_len(text.len() as u64)?;
            }
            Ok(())
        })
        .map_err(|_| {
            // Not anchored: the next append of the shard writes it again.
            match before {
                Some(b) => anchored.insert(entry.shard.clone(), b),
                None => anchored.remove(&entry.shard),
            };
            HostError::new("the audit anchor could not be written")
        })
    }
}

impl<A: ShardHeads> ShardHeads for AnchoredAudit<A> {
    fn heads(&self) -> Result<BTreeMap<String, ChainHead>, HostError> {
        self.inner.heads()
    }
    fn last_root(&self) -> Result<Option<String>, HostError> {
        self.inner.last_root()
    }
}

impl<A: Audit> Audit for AnchoredAudit<A> {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        // One append at a time from link to anchor: a link is synced before its line is
        // written, so a writer that linked a `seq` another writer of this process then took
        // would have synced a link for nothing (docs/performance.md, "The proxy").
        // The shard is written into the link and the anchor as it is: only a name a sink can
        // key on (and that the line carries) gets that far.
        if !mrtr_gate_core::audit::shard_ok(entry) {
            return Err(HostError::new(
                "the entry's shard is not a shard name its line carries",
            ));
        }
        let _order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        // The inner sink's own word when it gives one cheaply; else the head it last named.
        let newest = match self.inner.head_hint(&entry.shard) {
            Some(hint) => hint,
            None => self
                .newest
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&entry.shard)
                .cloned()
                .unwrap_or_else(ChainHead::genesis),
        };
        if entry.seq <= newest.seq {
            return Ok(AppendOutcome::head_moved(newest));
        }
        // The link first: an append the sink then refuses (its head moved) leaves a link to
        // a line that is nowhere in the trail, which matches nothing and is ignored.
        self.link(entry)?;
        let outcome = self.inner.append(entry)?;
        let named = if outcome.written {
            ChainHead {
                seq: entry.seq,
                event_sha256: entry.event_sha256.clone(),
            }
        } else {
            ChainHead {
                seq: outcome.head_seq,
                event_sha256: outcome.head_sha256.clone(),
            }
        };
        // Whatever the inner sink named last, lower too: a sink that lost lines names a head
        // below the one remembered, and an entry on that head must reach it (so that the
        // gate sees the loss, or writes on), not be refused here for ever.
        self.newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(entry.shard.clone(), named);
        if outcome.written && outcome.stored.is_some() {
            // An anchor that cannot be written is a failed append (the gate then denies).
            self.anchor(entry)?;
        }
        Ok(outcome)
    }
}

/// What checking a trail against its links and anchor found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnchorCheck {
    /// Every line is keyed and every shard ends exactly at its anchored head.
    Intact {
        /// Events in the trail.
        events: u64,
    },
    /// The anchor is missing or unreadable, or a line of it fails its MAC.
    BadAnchor,
    /// The trail's chain itself is broken.
    BrokenChain,
    /// The line at `seq` of `shard` has no link that verifies: it was written without the key
    /// (or its link was removed).
    Unkeyed {
        /// The shard of the first such line (`""`: a line from before shards).
        shard: String,
        /// Its `seq`.
        seq: u64,
    },
    /// A shard ends before its anchored head: lines were removed from its end (or the whole
    /// shard).
    Truncated {
        /// The shard.
        shard: String,
        /// Events in the shard.
        events: u64,
        /// Events the anchor says were written to it.
        anchored: u64,
    },
    /// A shard's event at its anchored position is not the anchored one.
    Diverged {
        /// The shard.
        shard: String,
    },
    /// A shard goes on past its anchored head (or has none). Its lines are keyed, so a key
    /// holder wrote them: another process sharing the trail, or an anchor put back to an
    /// older one.
    Extended {
        /// The shard.
        shard: String,
        /// Events in the shard.
        events: u64,
        /// Events the anchor covers.
        anchored: u64,
    },
}

/// A link or anchor line, as read.
struct KeyedHead {
    /// None: keyed before shards (`v1`).
    shard: Option<String>,
    seq: u64,
    event_sha256: String,
    key_id: String,
    mac: Vec<u8>,
}

fn parse_keyed_head(text: &str) -> Option<KeyedHead> {
    let v = serde_json::from_str::<Value>(text).ok()?;
    let shard = match v.get("shard") {
        None => None,
        Some(s) => Some(s.as_str()?.to_owned()),
    };
    Some(KeyedHead {
        shard,
        seq: v.get("seq").and_then(Value::as_u64)?,
        event_sha256: v.get("event_sha256").and_then(Value::as_str)?.to_owned(),
        key_id: v.get("key_id").and_then(Value::as_str)?.to_owned(),
        mac: v
            .get("mac")
            .and_then(Value::as_str)
            // Only the spelling a host writes (lowercase hex, no sign), as every host reads it.
            .filter(|m| m.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .and_then(unhex)?,
    })
}

fn verifies(keys: &HostKeys, kind: Kind, head: &KeyedHead) -> bool {
    let n = head.seq.to_be_bytes();
    let parts = mac_parts(kind, head.shard.as_deref(), &n, &head.event_sha256);
    keys.verify(&head.key_id, &parts, &head.mac)
}

/// Check `trail` (JSON lines) against its `links` and the `checkpoint` text with `keys`.
/// In order: every anchor line's MAC, the chains (`verify_trail`), a verifying link for every
/// line, then where each shard ends against its anchored head (shards in shard order).
pub fn verify_anchor(trail: &str, links: &str, checkpoint: &str, keys: &HostKeys) -> AnchorCheck {
    let mut anchors: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for line in checkpoint.lines() {
        let Some(head) = parse_keyed_head(line).filter(|a| verifies(keys, Kind::Anchor, a)) else {
            return AnchorCheck::BadAnchor;
        };
        let shard = head.shard.unwrap_or_default();
        if anchors
            .insert(shard, (head.seq, head.event_sha256))
            .is_some()
        {
            return AnchorCheck::BadAnchor;
        }
    }
    if anchors.is_empty() {
        return AnchorCheck::BadAnchor;
    }
    let Ok(verified) = mrtr_gate_core::audit::verify_trail(trail.lines()) else {
        return AnchorCheck::BrokenChain;
    };
    let keyed: std::collections::BTreeSet<(String, u64, String)> = links
        .lines()
        .filter_map(parse_keyed_head)
        .filter(|l| verifies(keys, Kind::Link, l))
        .map(|l| (l.shard.unwrap_or_default(), l.seq, l.event_sha256))
        .collect();
    // Each shard's line digests, by seq (the chains verified above: seq is the position).
    let mut digests: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in trail.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let shard = v
            .get("shard")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let seq = v.get("seq").and_then(Value::as_u64).unwrap_or(0);
        let digest = mrtr_gate_core::digest::sha256_hex(line.as_bytes());
        if !keyed.contains(&(shard.clone(), seq, digest.clone())) {
            return AnchorCheck::Unkeyed { shard, seq };
        }
        digests.entry(shard).or_default().push(digest);
    }
    let shards: std::collections::BTreeSet<&String> =
        anchors.keys().chain(verified.heads.keys()).collect();
    for shard in shards {
        let events = verified.heads.get(shard).map_or(0, |h| h.seq);
        let (anchored, head) = anchors.get(shard).cloned().unwrap_or((0, String::new()));
        if events < anchored {
            return AnchorCheck::Truncated {
                shard: shard.clone(),
                events,
                anchored,
            };
        }
        let at = digests
            .get(shard)
            .and_then(|d| d.get(usize::try_from(anchored.saturating_sub(1)).ok()?));
        if anchored > 0 && at != Some(&head) {
            return AnchorCheck::Diverged {
                shard: shard.clone(),
            };
        }
        if events > anchored {
            return AnchorCheck::Extended {
                shard: shard.clone(),
                events,
                anchored,
            };
        }
    }
    AnchorCheck::Intact {
        events: verified.lines,
    }
}
