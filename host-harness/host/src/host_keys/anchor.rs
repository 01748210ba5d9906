//! The audit trail under a host key (docs/host-keys.md, "The keyed trail"): every line the
//! gate appends gets a keyed link, and the head the sink last confirmed is anchored apart
//! from the trail. The trail itself is the core's, unchanged: any host verifies its chain
//! without a key (`verify_chain`); the key holder also verifies who wrote each line and where
//! the trail ended ([`verify_anchor`]).
//!
//! - A **link** is one JSON line in the links file, written (and synced) before the line it
//!   covers is appended: `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}`, M =
//!   HMAC-SHA256(key; "mrtr-gate/audit-link/v1", N, H). H is the digest of the line, which
//!   names the line before it (`prev_sha256`), so a link covers the chain up to its line: a
//!   line appended without the key has no link that verifies.
//! - The **anchor** (checkpoint) is replaced after every append that was written:
//!   `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}`, M = HMAC-SHA256(key;
//!   "mrtr-gate/audit-anchor/v1", N, H): the head the trail had when the gate last wrote.
//!   Lines past it are reported `Extended`, lines missing before it `Truncated`.
//!
//! Every MAC input is length-prefixed (`HostKeys::mac`): an 8-byte big-endian length, then
//! the bytes; N is 8 bytes big-endian, H its 64 lowercase hex digits as ASCII.

use super::{HostKeys, hex, unhex};
use mrtr_gate_core::host::{AppendOutcome, Audit, AuditEntry, ChainHead, HostError};
use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::reference_hosts::group_sync::GroupSync;

const ANCHOR_CONTEXT: &[u8] = b"mrtr-gate/audit-anchor/v1";
const LINK_CONTEXT: &[u8] = b"mrtr-gate/audit-link/v1";

/// An audit sink under a host key: each line keyed by a link written beside the trail, the
/// head anchored apart from it. A trail whose newest lines were removed still verifies as a
/// chain, and so does one with lines appended by whoever can write it; against the links and
/// the anchor neither does ([`verify_anchor`]).
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
    /// The `seq` last anchored by this sink: the anchor only moves forward, whichever thread's
    /// append is confirmed first.
    anchored: Mutex<u64>,
    /// The head `inner` named last to this sink (in a write or a refusal), used when it
    /// gives no `head_hint`. An entry at or below the head's `seq` cannot extend it (a chain
    /// only grows), so it is refused here without a link: with several gate instances in a
    /// process, each one's guess of the head is often one behind (another's line went in
    /// while its `fsync` ran), and its link would be written and synced for nothing.
    newest: Mutex<ChainHead>,
}

impl<A> AnchoredAudit<A> {
    /// Key `inner`'s lines in the `links` file (beside the trail: links are not secret) and
    /// anchor its head in `checkpoint` (kept where the trail's writer cannot reach), with
    /// `keys`' current key.
    pub fn new(
        inner: A,
        keys: HostKeys,
        checkpoint: impl AsRef<Path>,
        links: impl AsRef<Path>,
    ) -> Self {
        Self {
            inner,
            keys,
            checkpoint: checkpoint.as_ref().to_owned(),
            links: links.as_ref().to_owned(),
            order: Mutex::new(()),
            links_file: Mutex::new(None),
            links_sync: GroupSync::default(),
            links_broken: std::sync::atomic::AtomicBool::new(false),
            anchored: Mutex::new(0),
            newest: Mutex::new(ChainHead::genesis()),
        }
    }
}

/// `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}` (keys in canonical order), MAC'd with
/// `keys`' current key in `context`.
fn keyed_head(
    keys: &HostKeys,
    context: &[u8],
    seq: u64,
    event_sha256: &str,
) -> Result<String, HostError> {
    let id = keys.current_id();
    let mac = keys
        .mac(id, &[context, &seq.to_be_bytes(), event_sha256.as_bytes()])
        .ok_or_else(|| HostError::new("the current host key is missing"))?;
    Ok(format!(
        "{{\"event_sha256\":\"{event_sha256}\",\"key_id\":\"{id}\",\"mac\":\"{}\",\"seq\":{seq}}}",
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

impl<A: Audit> AnchoredAudit<A> {
    fn link(&self, entry: &AuditEntry) -> Result<(), HostError> {
        let mut line = keyed_head(&self.keys, LINK_CONTEXT, entry.seq, &entry.event_sha256)?;
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
        if entry.seq <= *anchored {
            // Another thread confirmed and anchored a later line already.
            return Ok(());
        }
        let mut text = keyed_head(&self.keys, ANCHOR_CONTEXT, entry.seq, &entry.event_sha256)?;
        text.push('\n');
        // Replaced in place: one write of one short line at offset 0. A rename over the old
        // file, on ext4, flushed the new file and freed the old inode on every append, most
        // of the gate's time in `mrtr-gate proxy` (docs/performance.md, "The proxy"). `seq`
        // only grows, so the new line is never shorter than the old one unless the key id
        // changed; then the rest is cut. A reader racing the write, or a crash tearing the
        // sector, sees an anchor whose MAC fails (`BadAnchor`), never a wrong one that verifies.
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
        .map_err(|_| HostError::new("the audit anchor could not be written"))?;
        *anchored = entry.seq;
        Ok(())
    }
}

impl<A: Audit> Audit for AnchoredAudit<A> {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        // One append at a time from link to anchor: a link is synced before its line is
        // written, so a writer that linked a `seq` another writer of this process then took
        // would have synced a link for nothing (docs/performance.md, "The proxy").
        let _order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        // The inner sink's own word when it gives one cheaply; else the head it last named.
        let newest = match self.inner.head_hint() {
            Some(hint) => hint,
            None => self
                .newest
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
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
        *self.newest.lock().unwrap_or_else(PoisonError::into_inner) = named;
        if outcome.written && outcome.stored.is_some() {
            // An anchor that cannot be written is a failed append (the gate then denies).
            self.anchor(entry)?;
        }
        Ok(outcome)
    }
}

/// What checking a trail against its links and anchor found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorCheck {
    /// Every line is keyed and the trail ends exactly at the anchored head.
    Intact {
        /// Events in the trail.
        events: u64,
    },
    /// The anchor is missing, unreadable or its MAC fails.
    BadAnchor,
    /// The trail's chain itself is broken.
    BrokenChain,
    /// The line at `seq` has no link that verifies: it was written without the key (or its
    /// link was removed).
    Unkeyed {
        /// The first such line's `seq`.
        seq: u64,
    },
    /// The trail ends before the anchored head: lines were removed from its end.
    Truncated {
        /// Events in the trail.
        events: u64,
        /// Events the anchor says were written.
        anchored: u64,
    },
    /// The trail's event at the anchored position is not the anchored one.
    Diverged,
    /// The trail goes on past the anchored head. Its lines are keyed, so a key holder wrote
    /// them: another process sharing the trail, or an anchor put back to an older one.
    Extended {
        /// Events in the trail.
        events: u64,
        /// Events the anchor covers.
        anchored: u64,
    },
}

/// `(seq, event_sha256, key id, mac)` of a link or anchor line.
fn parse_keyed_head(text: &str) -> Option<(u64, String, String, Vec<u8>)> {
    let v = serde_json::from_str::<Value>(text).ok()?;
    Some((
        v.get("seq").and_then(Value::as_u64)?,
        v.get("event_sha256").and_then(Value::as_str)?.to_owned(),
        v.get("key_id").and_then(Value::as_str)?.to_owned(),
        v.get("mac")
            .and_then(Value::as_str)
            // Only the spelling a host writes (lowercase hex, no sign), as every host reads it.
            .filter(|m| m.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .and_then(unhex)?,
    ))
}

fn verifies(keys: &HostKeys, context: &[u8], head: &(u64, String, String, Vec<u8>)) -> bool {
    let (seq, digest, id, mac) = head;
    keys.verify(id, &[context, &seq.to_be_bytes(), digest.as_bytes()], mac)
}

/// Check `trail` (JSON lines) against its `links` and the `checkpoint` text with `keys`.
/// In order: the anchor's MAC, the chain, a verifying link for every line, then where the
/// trail ends against the anchored head.
pub fn verify_anchor(trail: &str, links: &str, checkpoint: &str, keys: &HostKeys) -> AnchorCheck {
    let Some(anchor) =
        parse_keyed_head(checkpoint.trim_end()).filter(|a| verifies(keys, ANCHOR_CONTEXT, a))
    else {
        return AnchorCheck::BadAnchor;
    };
    let Ok(events) = mrtr_gate_core::audit::verify_chain(trail.lines()) else {
        return AnchorCheck::BrokenChain;
    };
    let keyed: std::collections::BTreeSet<(u64, String)> = links
        .lines()
        .filter_map(parse_keyed_head)
        .filter(|l| verifies(keys, LINK_CONTEXT, l))
        .map(|(seq, digest, _, _)| (seq, digest))
        .collect();
    for (seq, line) in (1u64..).zip(trail.lines()) {
        let digest = mrtr_gate_core::digest::sha256_hex(line.as_bytes());
        if !keyed.contains(&(seq, digest)) {
            return AnchorCheck::Unkeyed { seq };
        }
    }
    let (seq, head, _, _) = anchor;
    if events < seq {
        return AnchorCheck::Truncated {
            events,
            anchored: seq,
        };
    }
    let at = trail
        .lines()
        .nth(usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX))
        .map(|l| mrtr_gate_core::digest::sha256_hex(l.as_bytes()));
    if seq > 0 && at.as_deref() != Some(head.as_str()) {
        return AnchorCheck::Diverged;
    }
    if events > seq {
        return AnchorCheck::Extended {
            events,
            anchored: seq,
        };
    }
    AnchorCheck::Intact { events }
}
