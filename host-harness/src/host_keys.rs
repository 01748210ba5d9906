//! Keys the host holds and the component never sees (docs/host-keys.md):
//!
//! - [`AuthenticatedStorage`]: every value the gate stores carries an HMAC over its key and
//!   text, made with a host key; a value that fails it (rewritten params with a matching
//!   digest, a record moved to another key) is refused before the gate reads it;
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
use std::collections::BTreeMap;

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

/// The prefix of an authenticated value: `mac1.<key id>.<64 hex>.`.
const TAG: &str = "mac1.";

/// A store whose every value is authenticated by a host key: what the gate writes is stored
/// as `mac1.<key id>.<HMAC-SHA256(key; "mrtr-gate/storage/v1", gate key, text)>.<text>`, and
/// a value read back must carry a valid MAC by a key still accepted, for that very key.
pub struct AuthenticatedStorage<S> {
    inner: S,
    keys: HostKeys,
}

impl<S> AuthenticatedStorage<S> {
    /// Authenticate everything `inner` holds with `keys`.
    pub fn new(inner: S, keys: HostKeys) -> Self {
        Self { inner, keys }
    }
}

const STORAGE_CONTEXT: &[u8] = b"mrtr-gate/storage/v1";

impl<S: Storage> AuthenticatedStorage<S> {
    fn seal(&self, key: &str, text: &str) -> Result<String, HostError> {
        let id = self.keys.current_id();
        let mac = self
            .keys
            .mac(id, &[STORAGE_CONTEXT, key.as_bytes(), text.as_bytes()])
            .ok_or_else(|| HostError::new("the current host key is missing"))?;
        Ok(format!("{TAG}{id}.{}.{text}", hex(&mac)))
    }

    fn open(&self, key: &str, stored: &str) -> Result<String, HostError> {
        let refused = || HostError::new("a stored value failed its authentication");
        let rest = stored.strip_prefix(TAG).ok_or_else(refused)?;
        let (id, rest) = rest.split_once('.').ok_or_else(refused)?;
        let (tag, text) = rest.split_once('.').ok_or_else(refused)?;
        let tag = unhex(tag).filter(|t| t.len() == 32).ok_or_else(refused)?;
        if self.keys.verify(
            id,
            &[STORAGE_CONTEXT, key.as_bytes(), text.as_bytes()],
            &tag,
        ) {
            Ok(text.to_owned())
        } else {
            Err(refused())
        }
    }
}

impl<S: Storage> Storage for AuthenticatedStorage<S> {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Option<Versioned>>, HostError> {
        let found = self.inner.read(keys)?;
        keys.iter()
            .zip(found)
            .map(|(k, entry)| match entry {
                // The reader holds this version already (checked when it first read it).
                Some(v) if k.have == Some(v.version) && v.value.is_empty() => Ok(Some(v)),
                Some(v) => Ok(Some(Versioned {
                    value: self.open(k.key, &v.value)?,
                    version: v.version,
                })),
                None => Ok(None),
            })
            .collect()
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let sealed: Vec<Option<String>> = writes
            .iter()
            .map(|w| w.value.map(|v| self.seal(w.key, v)).transpose())
            .collect::<Result<_, _>>()?;
        let writes: Vec<Write<'_>> = writes
            .iter()
            .zip(&sealed)
            .map(|(w, s)| Write {
                value: s.as_deref(),
                ..*w
            })
            .collect();
        self.inner.write(&writes)
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
