//! Keys the host holds and the component never sees (docs/host-keys.md):
//!
//! - [`AuthenticatedStorage`]: every value the gate stores carries an HMAC over its key, the
//!   version it replaced and its text, made with a host key; a value that fails it
//!   (rewritten params with a matching digest, a record moved to another key) is refused
//!   before the gate reads it, on every read (a value the gate holds already included), and
//!   so is one older than a value this process has seen under that key (a rollback);
//! - [`Pseudonyms`]: the user and tenant the gate binds (and the trail digests) are keyed
//!   pseudonyms, not the addresses themselves: a dictionary over email addresses recovers
//!   nothing from the trail without the key;
//! - [`AnchoredAudit`] ([`anchor`]): each line the gate appends is keyed by a link beside the
//!   trail, and a MAC'd checkpoint of the chain's head is kept apart from it, so a line
//!   appended without the key and a trail cut short (its newest lines removed, which the
//!   chain alone cannot show) are both detected ([`verify_anchor`]).
//!
//! Keys have ids: values name the key that made them, so keys rotate without a flag day (new
//! writes use the current key; reads accept every key still listed).

pub mod anchor;
pub mod key_file;

pub use anchor::{AnchorCheck, AnchoredAudit, verify_anchor};

use hmac::{Hmac, Mac};
use mrtr_gate_core::host::{HostError, ReadKey, Storage, Versioned, Write};
use sha2::Sha256;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

type HmacSha256 = Hmac<Sha256>;

/// A host's keys: the current one (used for new MACs) and older ones still accepted.
#[derive(Clone)]
pub struct HostKeys {
    current: String,
    keys: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for HostKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key bytes.
        f.debug_struct("HostKeys")
            .field("current", &self.current)
            .field("ids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A key the host cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError(pub String);

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyError {}

impl HostKeys {
    /// Keys with `id` (1 to 32 bytes of `[A-Za-z0-9_-]`) as the current one; `secret` must be
    /// at least 32 bytes.
    pub fn new(id: &str, secret: &[u8]) -> Result<Self, KeyError> {
        let mut keys = Self {
            current: id.to_owned(),
            keys: BTreeMap::new(),
        };
        keys.add(id, secret)?;
        Ok(keys)
    }

    /// Accept `id` too (an older key, during a rotation).
    pub fn add(&mut self, id: &str, secret: &[u8]) -> Result<(), KeyError> {
        let ok_id = !id.is_empty()
            && id.len() <= 32
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok_id {
            return Err(KeyError(
                "a key id is 1 to 32 bytes of [A-Za-z0-9_-]".into(),
            ));
        }
        if secret.len() < 32 {
            return Err(KeyError("a host key is at least 32 bytes".into()));
        }
        self.keys.insert(id.to_owned(), secret.to_vec());
        Ok(())
    }

    /// Make `id` (already added) the key new MACs use.
    pub fn rotate_to(&mut self, id: &str) -> Result<(), KeyError> {
        if !self.keys.contains_key(id) {
            return Err(KeyError(format!("no key `{id}`")));
        }
        self.current = id.to_owned();
        Ok(())
    }

    /// Stop accepting `id` (the end of a rotation); the current key cannot be dropped.
    pub fn retire(&mut self, id: &str) {
        if id != self.current {
            self.keys.remove(id);
        }
    }

    /// The current key's id.
    pub fn current_id(&self) -> &str {
        &self.current
    }

    fn mac(&self, id: &str, parts: &[&[u8]]) -> Option<[u8; 32]> {
        let key = self.keys.get(id)?;
        let mut mac = HmacSha256::new_from_slice(key).ok()?;
        for part in parts {
            // Length-prefixed, so no two splits of the same bytes MAC alike.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        Some(mac.finalize().into_bytes().into())
    }

    fn verify(&self, id: &str, parts: &[&[u8]], tag: &[u8]) -> bool {
        let Some(key) = self.keys.get(id) else {
            return false;
        };
        let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
            return false;
        };
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        // Constant time.
        mac.verify_slice(tag).is_ok()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

/// The prefix of an authenticated value: `mac2.<key id>.<replaced version: 16 hex>.<64 hex>.`.
const TAG: &str = "mac2.";

/// A store whose every value is authenticated by a host key: what the gate writes is stored
/// as `mac2.<key id>.<prev>.<HMAC-SHA256(key; "mrtr-gate/storage/v2", gate key, prev,
/// text)>.<text>`, `prev` the version the write replaced (0: the key was absent), and a
/// value read back must carry a valid MAC by a key still accepted, for that very key.
///
/// No read trusts a value on its version alone: the inner store is always asked for the
/// value, its MAC checked, and the gate is spared the value it holds (`have`) only when
/// this wrapper saw that very value (same version, same MAC) under the key. And no read
/// goes back in time past what this process saw: per key it keeps the last version it
/// read or wrote, and refuses a value whose version, or whose `prev`, is older than it in
/// the same store life (a value sealed earlier and written back: the rollback of
/// docs/host-keys.md). Versions are compared as the reference stores make them: a store
/// life's epoch in the high 32 bits, a counter rising within it in the low 32 (the
/// `storage` contract, wit/gate.wit); versions of two lives are not ordered.
pub struct AuthenticatedStorage<S> {
    inner: S,
    keys: HostKeys,
    seen: Mutex<HashMap<String, Seen>>,
}

/// The last version of a key this process read or wrote, and the MAC of its value (none:
/// this process deleted the key at that version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    version: u64,
    mac: Option<[u8; 32]>,
}

/// How many keys the rollback check remembers: past it, it starts again (forgetting only
/// weakens the check for the keys forgotten, it never refuses a good value).
const SEEN_KEYS: usize = 65_536;

/// A value opened: its MAC, the version it replaced and its text.
struct Opened {
    mac: [u8; 32],
    prev: u64,
    text: String,
}

/// Two versions of one store life (the same epoch, the high 32 bits).
fn same_life(a: u64, b: u64) -> bool {
    a >> 32 == b >> 32
}

impl Seen {
    /// Whether a value at `version` that replaced `prev` and has `mac` is older than this
    /// one, or this one changed without a new version.
    fn refuses(&self, version: u64, prev: u64, mac: &[u8; 32]) -> bool {
        if version == self.version {
            // The value seen, or a different one at its version (or one this process
            // deleted, back): only the very value seen passes.
            return self.mac.as_ref() != Some(mac);
        }
        if same_life(version, self.version) && version < self.version {
            return true;
        }
        // A value written over a version older than the one seen was sealed before it
        // (a delete consumed the version it deleted: nothing is written over it).
        prev != 0
            && same_life(prev, self.version)
            && (prev < self.version || (prev == self.version && self.mac.is_none()))
    }
}

impl<S> AuthenticatedStorage<S> {
    /// Authenticate everything `inner` holds with `keys`.
    pub fn new(inner: S, keys: HostKeys) -> Self {
        Self {
            inner,
            keys,
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        // A poisoned lock means a thread panicked between plain map updates: still a map.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A read that met a value older than one this process saw under its key.
struct Older;

/// Note `now` as the last seen of `key`, unless a newer version of the same life is noted
/// already (threads of one process note what they read and wrote in any order).
fn remember(seen: &mut HashMap<String, Seen>, key: &str, now: Seen) {
    if let Some(old) = seen.get(key)
        && same_life(old.version, now.version)
        && now.version < old.version
    {
        return;
    }
    if seen.len() >= SEEN_KEYS && !seen.contains_key(key) {
        seen.clear();
    }
    seen.insert(key.to_owned(), now);
}

const STORAGE_CONTEXT: &[u8] = b"mrtr-gate/storage/v2";

impl<S: Storage> AuthenticatedStorage<S> {
    fn seal(&self, key: &str, prev: u64, text: &str) -> Result<(String, [u8; 32]), HostError> {
        let id = self.keys.current_id();
        let mac = self
            .keys
            .mac(
                id,
                &[
                    STORAGE_CONTEXT,
                    key.as_bytes(),
                    &prev.to_be_bytes(),
                    text.as_bytes(),
                ],
            )
            .ok_or_else(|| HostError::new("the current host key is missing"))?;
        Ok((format!("{TAG}{id}.{prev:016x}.{}.{text}", hex(&mac)), mac))
    }

    /// One read of `keys`, every value's MAC checked; `Older` (and nothing noted) when a
    /// value is older than one this process saw under its key.
    fn read_checked(
        &self,
        keys: &[ReadKey<'_>],
    ) -> Result<Result<Vec<Versioned>, Older>, HostError> {
        // Every value, even one the gate holds: its MAC is checked on every read.
        let whole: Vec<ReadKey<'_>> = keys.iter().map(|k| ReadKey::from(k.key)).collect();
        let mut opened = Vec::with_capacity(keys.len());
        for (k, entry) in keys.iter().zip(self.inner.read(&whole)?) {
            opened.push(match entry.present() {
                Some(v) => Some((v.version, self.open(k.key, &v.value)?)),
                None => None,
            });
        }
        let mut seen = self.seen();
        let older = keys.iter().zip(&opened).any(|(k, entry)| {
            entry.as_ref().is_some_and(|(version, o)| {
                seen.get(k.key)
                    .is_some_and(|s| s.refuses(*version, o.prev, &o.mac))
            })
        });
        if older {
            return Ok(Err(Older));
        }
        let mut out = Vec::with_capacity(opened.len());
        for (k, entry) in keys.iter().zip(opened) {
            let Some((version, o)) = entry else {
                out.push(Versioned::absent());
                continue;
            };
            let now = Seen {
                version,
                mac: Some(o.mac),
            };
            let before = seen.get(k.key).copied();
            remember(&mut seen, k.key, now);
            // The gate is spared only the very value this wrapper saw at its version.
            let value = if k.have == version && before == Some(now) {
                String::new()
            } else {
                o.text
            };
            out.push(Versioned { value, version });
        }
        Ok(Ok(out))
    }

    fn open(&self, key: &str, stored: &str) -> Result<Opened, HostError> {
        let refused = || HostError::new("a stored value failed its authentication");
        let rest = stored.strip_prefix(TAG).ok_or_else(refused)?;
        let (id, rest) = rest.split_once('.').ok_or_else(refused)?;
        let (prev, rest) = rest.split_once('.').ok_or_else(refused)?;
        let (tag, text) = rest.split_once('.').ok_or_else(refused)?;
        // Only the spelling `seal` writes (lowercase hex, no sign): one value has one text,
        // and every host (Rust, Python, Node) accepts exactly the same ones.
        let lower_hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let prev = Some(prev)
            .filter(|p| p.len() == 16 && lower_hex(p))
            .and_then(|p| u64::from_str_radix(p, 16).ok())
            .ok_or_else(refused)?;
        let mac: [u8; 32] = Some(tag)
            .filter(|t| lower_hex(t))
            .and_then(unhex)
            .and_then(|t| t.try_into().ok())
            .ok_or_else(refused)?;
        if self.keys.verify(
            id,
            &[
                STORAGE_CONTEXT,
                key.as_bytes(),
                &prev.to_be_bytes(),
                text.as_bytes(),
            ],
            &mac,
        ) {
            Ok(Opened {
                mac,
                prev,
                text: text.to_owned(),
            })
        } else {
            Err(refused())
        }
    }
}

/// Each write's sealed value and its MAC (none: a delete).
struct Sealed(Vec<Option<(String, [u8; 32])>>);

impl Sealed {
    /// `writes` with their values sealed.
    fn writes<'a>(&'a self, writes: &[Write<'a>]) -> Vec<Write<'a>> {
        writes
            .iter()
            .zip(&self.0)
            .map(|(w, s)| Write {
                value: s.as_ref().map(|(text, _)| text.as_str()),
                ..*w
            })
            .collect()
    }
}

impl<S: Storage> AuthenticatedStorage<S> {
    fn seal_all(&self, writes: &[Write<'_>]) -> Result<Sealed, HostError> {
        writes
            .iter()
            .map(|w| w.value.map(|v| self.seal(w.key, w.expected, v)).transpose())
            .collect::<Result<_, _>>()
            .map(Sealed)
    }

    /// Note the version each applied write left (the value's MAC, or the version a delete
    /// consumed), for the rollback check.
    fn note_applied(&self, writes: &[Write<'_>], sealed: &Sealed, applied: &[u64]) {
        let mut seen = self.seen();
        for ((w, s), version) in writes.iter().zip(&sealed.0).zip(applied) {
            match (s, (w.expected != 0).then_some(w.expected)) {
                (Some((_, mac)), _) => remember(
                    &mut seen,
                    w.key,
                    Seen {
                        version: *version,
                        mac: Some(*mac),
                    },
                ),
                (None, Some(deleted)) => remember(
                    &mut seen,
                    w.key,
                    Seen {
                        version: deleted,
                        mac: None,
                    },
                ),
                (None, None) => {}
            }
        }
    }
}

impl<S: Storage> Storage for AuthenticatedStorage<S> {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        match self.read_checked(keys)? {
            Ok(found) => Ok(found),
            // Read before a newer write another thread of this process made and noted: read
            // once more. A value still older than one seen is a rollback.
            Err(Older) => self.read_checked(keys)?.map_err(|Older| {
                HostError::new("a stored value is older than one this host has seen (a rollback)")
            }),
        }
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let sealed = self.seal_all(writes)?;
        let applied = self.inner.write(&sealed.writes(writes))?;
        self.note_applied(writes, &sealed, &applied);
        Ok(applied)
    }

    /// The writes sealed, then the journal call passed on with them (in one step if the inner
    /// store can), and what applied noted as [`Storage::write`] notes it.
    fn journal(
        &self,
        audit: &dyn mrtr_gate_core::host::Audit,
        order: mrtr_gate_core::host::Order,
        entry: &mrtr_gate_core::host::AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<mrtr_gate_core::host::Journaled, HostError> {
        let sealed = self.seal_all(writes)?;
        let done = self
            .inner
            .journal(audit, order, entry, &sealed.writes(writes))?;
        self.note_applied(writes, &sealed, &done.applied);
        Ok(done)
    }

    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_core::host::DuePage, HostError> {
        // Keys are not sealed (only values are): the listing passes through.
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}

/// Keyed pseudonyms for the principals the gate binds: `u1.<32 hex>` for a user and
/// `t1.<32 hex>` for a tenant (the first 128 bits of HMAC-SHA256 with the host key over a
/// context and the name). The same name always maps to the same pseudonym under one key, so
/// bindings, consent views and the trail still tell users apart, and the host (which holds
/// the key) can map a name to its pseudonym to search the trail; a reader of the trail alone
/// cannot. Pseudonyms are made with the current key: rotating it starts new pseudonyms.
#[derive(Clone, Debug)]
pub struct Pseudonyms {
    keys: HostKeys,
}

impl Pseudonyms {
    /// Pseudonyms under `keys`' current key.
    pub fn new(keys: HostKeys) -> Self {
        Self { keys }
    }

    fn of(&self, kind: &str, name: &str) -> String {
        let mac = self
            .keys
            .mac(
                self.keys.current_id(),
                &[b"mrtr-gate/pseudonym/v1", kind.as_bytes(), name.as_bytes()],
            )
            .map(|m| hex(m.get(..16).unwrap_or_default()))
            .unwrap_or_default();
        format!("{kind}1.{mac}")
    }

    /// The pseudonym to pass the gate for `user`.
    pub fn user(&self, user: &str) -> String {
        self.of("u", user)
    }

    /// The pseudonym to pass the gate for `tenant`.
    pub fn tenant(&self, tenant: &str) -> String {
        self.of("t", tenant)
    }
}
