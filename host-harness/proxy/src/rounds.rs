//! Where a client's retry finds its round: an index of the open rounds, kept in the storage
//! the gate itself uses (in memory, or on Redis for every replica; MAC'd under host keys).
//!
//! A retry comes with a new id and names its round only by what it repeats: the method, the
//! arguments and the `requestState`. The proxy files every round it delivers under a key
//! made of exactly those (and the server and the principal), and a retry takes the round
//! filed under the key its own params make. The index is a hint and nothing more: the gate
//! checks the retry against the binding it names ([`mrtr_gate_host::core::ClientRetry`]), so
//! a stale, wrong or forged entry can only be refused, and the refusal is audited. A round
//! found by no entry is refused `inactive_mrtr_round`, audited too.
//!
//! Keys live under [`PREFIX`], apart from the gate's own; their values (JSON arrays) are
//! never taken for a binding's record, which is an object.

use crate::engine::Principal;
use mrtr_gate_host::core::host::{ReadKey, Write};
use mrtr_gate_host::core::{RequestId, ServerIdentity, canonical, digest};
use mrtr_gate_host::services::SharedStorage;
use serde_json::{Map, Value};

/// The key space of the index.
pub const PREFIX: &str = "mrtr-gate-proxy/v1/round/";

/// How many times an update that lost a compare-and-swap to another replica is tried again.
/// Each loss means another update of the same key went through, so this bounds contention
/// between calls that share a method, arguments and principal, never a slow store.
const ATTEMPTS: usize = 16;

/// The members of a retry's params that are not the call's own.
const ROUND_MEMBERS: [&str; 3] = ["_meta", "inputResponses", "requestState"];

/// What files a round: its state when the server sent one (a state names its round), else
/// the call's params without `_meta` (the retry carries what the request carried).
#[derive(Clone, Copy, Debug)]
pub enum Filed<'a> {
    /// The SHA-256 of the round's `requestState` as a canonical JSON string (the gate's
    /// `request-state-sha256`).
    State(&'a str),
    /// The call's params object.
    Params(&'a Map<String, Value>),
}

/// The index's key for a round of `method` on `server` for `principal`, within `scope`: empty
/// where every replica may take the round (HTTP replicas of one endpoint), a replica's own
/// nonce where only it may (a stdio proxy: its client and its server process are its own, and
/// a round from its server is never another process's to retry).
pub fn key(
    scope: &str,
    server: &ServerIdentity,
    principal: &Principal,
    method: &str,
    filed: Filed<'_>,
) -> String {
    let (server_kind, server_text) = match server {
        ServerIdentity::Origin(o) => ("origin", o.as_str()),
        ServerIdentity::Endpoint(e) => ("endpoint", e.as_str()),
    };
    let (kind, what) = match filed {
        Filed::State(sha) => ("state", Value::String(sha.to_owned())),
        Filed::Params(params) => {
            let own: Map<String, Value> = params
                .iter()
                .filter(|(k, _)| !ROUND_MEMBERS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            ("params", Value::Object(own))
        }
    };
    let named = Value::Array(vec![
        scope.into(),
        server_kind.into(),
        server_text.into(),
        principal.user.as_str().into(),
        principal.tenant.as_str().into(),
        method.into(),
        kind.into(),
        what,
    ]);
    format!(
        "{PREFIX}{}",
        digest::sha256_hex(canonical::to_canonical(&named).as_bytes())
    )
}

/// The SHA-256 of `state` as a canonical JSON string: what the gate reports of a round's state.
pub fn state_sha256(state: &str) -> String {
    let mut text = String::with_capacity(state.len().saturating_add(2));
    canonical::write_string(&mut text, state);
    digest::sha256_hex(text.as_bytes())
}

/// How a retry names its round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Named {
    /// By its state (the SHA-256 of the `requestState` it carries, as [`state_sha256`]).
    ByState(String),
    /// By its params: it carries no state.
    ByParams,
    /// By nothing: its `requestState` is no string, no state a server can have sent.
    Nothing,
}

/// How a retry with these params names its round.
pub fn named_by(params: &Map<String, Value>) -> Named {
    match params.get("requestState") {
        None => Named::ByParams,
        Some(Value::String(state)) => Named::ByState(state_sha256(state)),
        Some(_) => Named::Nothing,
    }
}

/// Why the index could not be read or written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexError(pub String);

/// The open rounds' index over a store.
#[derive(Clone)]
pub struct RoundIndex {
    storage: SharedStorage,
    /// How long an entry lives after its last write: the longest a round filed there can
    /// (the policy's lifetime, and the gate's grace after it).
    ttl_ms: u64,
}

impl std::fmt::Debug for RoundIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoundIndex")
    }
}

impl RoundIndex {
    /// An index in `storage` (the gate's own store, so replicas sharing it share the index)
    /// whose entries live `ttl_ms` after their last write.
    pub fn new(storage: SharedStorage, ttl_ms: u64) -> Self {
        Self { storage, ttl_ms }
    }

    /// File the round whose binding's live id is `live_id` under `key`.
    pub fn file(&self, key: &str, live_id: &RequestId) -> Result<(), IndexError> {
        let RequestId::Text(live) = live_id else {
            return Err(IndexError("only minted ids are filed".into()));
        };
        self.update(key, |ids| {
            if !ids.iter().any(|id| id == live) {
                ids.push(live.clone());
            }
            Some(())
        })
        .map(|_| ())
    }

    /// Take the oldest round filed under `key`: a retry uses it (a second retry finds it
    /// gone). `None`: no round is filed there.
    pub fn take(&self, key: &str) -> Result<Option<RequestId>, IndexError> {
        let taken = self.update(key, |ids| {
            if ids.is_empty() {
                None
            } else {
                Some(ids.remove(0))
            }
        })?;
        Ok(taken.map(RequestId::Text))
    }

    /// Whether `live_id` is still filed under `key` (one read, nothing written): a round
    /// another engine or replica has retried is not.
    pub fn holds(&self, key: &str, live_id: &RequestId) -> Result<bool, IndexError> {
        let RequestId::Text(live) = live_id else {
            return Ok(false);
        };
        let (ids, _) = self.read(key)?;
        Ok(ids.iter().any(|id| id == live))
    }

    /// The ids under `key` and the entry's version (0: none).
    fn read(&self, key: &str) -> Result<(Vec<String>, u64), IndexError> {
        let read = self
            .storage
            .read(&[ReadKey::from(key)])
            .map_err(|e| IndexError(e.message))?;
        let Some(entry) = read.into_iter().next() else {
            return Err(IndexError("the store answered no entry".into()));
        };
        let ids = if entry.is_present() {
            serde_json::from_str(&entry.value)
                .map_err(|_| IndexError("an index entry is not a list of ids".into()))?
        } else {
            Vec::new()
        };
        Ok((ids, entry.version))
    }

    /// Take `live_id` out of the entry under `key`: its round ended another way.
    pub fn remove(&self, key: &str, live_id: &RequestId) -> Result<(), IndexError> {
        let RequestId::Text(live) = live_id else {
            return Ok(());
        };
        self.update(key, |ids| {
            let before = ids.len();
            ids.retain(|id| id != live);
            (ids.len() != before).then_some(())
        })
        .map(|_| ())
    }

    /// Read the ids under `key`, let `change` edit them, and write them back with a
    /// compare-and-swap on the version read (deleting the key when none are left); again
    /// when another writer got there first. `change` returning `None` writes nothing.
    fn update<T>(
        &self,
        key: &str,
        mut change: impl FnMut(&mut Vec<String>) -> Option<T>,
    ) -> Result<Option<T>, IndexError> {
        for _ in 0..ATTEMPTS {
            let (mut ids, version) = self.read(key)?;
            let Some(out) = change(&mut ids) else {
                return Ok(None);
            };
            let text = serde_json::to_string(&ids).map_err(|e| IndexError(e.to_string()))?;
            let write = Write {
                key,
                expected: version,
                value: (!ids.is_empty()).then_some(text.as_str()),
                ttl_ms: self.ttl_ms,
            };
            let applied = self
                .storage
                .write(&[write])
                .map_err(|e| IndexError(e.message))?;
            if applied.len() == 1 {
                return Ok(Some(out));
            }
        }
        Err(IndexError(format!(
            "the index entry kept changing under {ATTEMPTS} attempts"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrtr_gate_host::core::memory::{ManualClock, MemoryStorage};
    use serde_json::json;
    use std::sync::Arc;

    fn index() -> RoundIndex {
        let clock = Arc::new(ManualClock::new(1_000));
        RoundIndex::new(Arc::new(MemoryStorage::new(clock)), 60_000)
    }

    fn alice() -> Principal {
        Principal {
            user: "alice".into(),
            tenant: "acme".into(),
        }
    }

    fn server() -> ServerIdentity {
        ServerIdentity::endpoint("stdio:a").unwrap()
    }

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn a_retry_names_the_key_its_request_was_filed_under_and_nothing_else_does() {
        let request =
            object(json!({"name": "book", "arguments": {"to": "LIS"}, "_meta": {"a": 1}}));
        let retry = object(
            json!({"name": "book", "arguments": {"to": "LIS"}, "_meta": {"b": 2},
            "inputResponses": {"seat": {"action": "accept"}}}),
        );
        let k =
            |p: &Map<String, Value>| key("", &server(), &alice(), "tools/call", Filed::Params(p));
        assert_eq!(k(&request), k(&retry));
        let changed = object(json!({"name": "book", "arguments": {"to": "OPO"}}));
        assert_ne!(k(&request), k(&changed));
        let bob = Principal {
            user: "bob".into(),
            tenant: "acme".into(),
        };
        assert_ne!(
            k(&request),
            key("", &server(), &bob, "tools/call", Filed::Params(&request))
        );
        assert_ne!(
            k(&request),
            key(
                "",
                &server(),
                &alice(),
                "prompts/get",
                Filed::Params(&request)
            )
        );
        let other = ServerIdentity::endpoint("stdio:b").unwrap();
        assert_ne!(
            k(&request),
            key("", &other, &alice(), "tools/call", Filed::Params(&request))
        );
        // A state names its round whatever the arguments say.
        let sha = state_sha256("opaque");
        let by_state = key("", &server(), &alice(), "tools/call", Filed::State(&sha));
        // A replica's own scope is apart from the shared one.
        assert_ne!(
            by_state,
            key(
                "0000000000000001",
                &server(),
                &alice(),
                "tools/call",
                Filed::State(&sha)
            )
        );
        assert_ne!(by_state, k(&request));
        assert!(by_state.starts_with(PREFIX));
    }

    #[test]
    fn the_state_digest_is_the_gates_and_a_state_that_is_no_string_names_nothing() {
        // SHA-256 of `"opaque"`, quotes included, as the gate reports it.
        assert_eq!(state_sha256("opaque"), digest::sha256_hex(br#""opaque""#));
        assert_eq!(
            named_by(&object(json!({"requestState": "x"}))),
            Named::ByState(state_sha256("x"))
        );
        assert_eq!(named_by(&object(json!({"name": "x"}))), Named::ByParams);
        assert_eq!(
            named_by(&object(json!({"requestState": 7}))),
            Named::Nothing
        );
    }

    #[test]
    fn rounds_are_taken_once_oldest_first() {
        let index = index();
        let one = RequestId::Text("mg:1:1".into());
        let two = RequestId::Text("mg:1:2".into());
        index.file("k", &one).unwrap();
        index.file("k", &two).unwrap();
        index.file("k", &one).unwrap();
        index
            .remove("k", &RequestId::Text("mg:1:0".into()))
            .unwrap();
        assert_eq!(index.take("k").unwrap(), Some(one));
        index.file("k", &RequestId::Text("mg:1:3".into())).unwrap();
        index
            .remove("k", &RequestId::Text("mg:1:3".into()))
            .unwrap();
        assert_eq!(index.take("k").unwrap(), Some(two));
        assert_eq!(index.take("k").unwrap(), None);
        assert_eq!(index.take("other").unwrap(), None);
        assert!(index.file("k", &RequestId::Number(3)).is_err());
    }

    #[test]
    fn an_entry_that_is_not_a_list_of_ids_is_an_error_never_a_round() {
        let index = index();
        index
            .storage
            .write(&[Write {
                key: "k",
                expected: 0,
                value: Some(r#"{"x":1}"#),
                ttl_ms: 60_000,
            }])
            .unwrap();
        assert!(index.take("k").is_err());
    }
}
