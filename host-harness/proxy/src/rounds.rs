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
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The key space of the index.
pub const PREFIX: &str = "mrtr-gate-proxy/v1/round/";

/// How many times an update that lost a compare-and-swap to another replica is tried again.
/// Each loss means another update of the same key went through, so this bounds contention
/// between calls that share a method, arguments and principal, never a slow store.
const ATTEMPTS: usize = 16;

/// How many entries this process remembers writing (see [`RoundIndex`]); past it, it forgets
/// them all and reads again. A bound on memory, not on correctness.
const REMEMBERED: usize = 4096;

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

/// The SHA-256 of `state` as a canonical JSON string: what the gate reports of a round's state
/// (the core's own digest of it, so the two cannot differ).
pub fn state_sha256(state: &str) -> String {
    digest::digest_str(state)
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
///
/// An update is a read and a compare-and-swap on the version read: two round trips on Redis,
/// and a round files and takes one entry. So the index remembers what it wrote last under
/// each key (the version the store gave the write, and the ids), and starts an update from
/// that instead of a read; filing under a key it knows nothing of starts from "absent". A
/// store that moved on since (another engine or replica wrote, the entry expired) refuses the
/// swap, and the update reads and goes on as before. The guess is never trusted further: a
/// present key's version is never reused, so a swap that applies at a remembered version
/// applies to exactly the entry remembered, and an update that would change nothing on the
/// guess reads before it says so.
#[derive(Clone)]
pub struct RoundIndex {
    storage: SharedStorage,
    /// How long an entry lives after its last write: the longest a round filed there can
    /// (the policy's lifetime, and the gate's grace after it).
    ttl_ms: u64,
    /// What this process wrote last under each key, shared by its engines.
    written: Arc<Mutex<HashMap<String, Written>>>,
}

/// The version the store gave a write, and the ids it wrote.
type Written = (u64, Vec<String>);

impl std::fmt::Debug for RoundIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoundIndex")
    }
}

impl RoundIndex {
    /// An index in `storage` (the gate's own store, so replicas sharing it share the index)
    /// whose entries live `ttl_ms` after their last write.
    pub fn new(storage: SharedStorage, ttl_ms: u64) -> Self {
        Self {
            storage,
            ttl_ms,
            written: Arc::default(),
        }
    }

    /// File the round whose binding's live id is `live_id` under `key`.
    pub fn file(&self, key: &str, live_id: &RequestId) -> Result<(), IndexError> {
        let RequestId::Text(live) = live_id else {
            return Err(IndexError("only minted ids are filed".into()));
        };
        self.update(key, Guess::AbsentUnlessKnown, |ids| {
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
        let taken = self.update(key, Guess::Known, |ids| {
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
        self.update(key, Guess::Known, |ids| {
            let before = ids.len();
            ids.retain(|id| id != live);
            (ids.len() != before).then_some(())
        })
        .map(|_| ())
    }

    /// Read the ids under `key`, let `change` edit them, and write them back with a
    /// compare-and-swap on the version read (deleting the key when none are left); again
    /// when another writer got there first. `change` returning `None` writes nothing. The
    /// first try may start from `guess` instead of a read (see [`RoundIndex`]).
    fn update<T>(
        &self,
        key: &str,
        guess: Guess,
        mut change: impl FnMut(&mut Vec<String>) -> Option<T>,
    ) -> Result<Option<T>, IndexError> {
        let mut guessed = self.guess(key, guess);
        for _ in 0..ATTEMPTS {
            let on_guess = guessed.is_some();
            let (mut ids, version) = match guessed.take() {
                Some(g) => g,
                None => self.read(key)?,
            };
            let Some(out) = change(&mut ids) else {
                if on_guess {
                    // Nothing to do on the guess; the store may say otherwise.
                    continue;
                }
                return Ok(None);
            };
            let text = serde_json::to_string(&ids).map_err(|e| IndexError(e.to_string()))?;
            let write = Write {
                key,
                expected: version,
                value: (!ids.is_empty()).then_some(text.as_str()),
                ttl_ms: self.ttl_ms,
            };
            let applied = self.storage.write(&[write]);
            let applied = match applied {
                Ok(applied) => applied,
                Err(e) => {
                    self.remember(key, None);
                    return Err(IndexError(e.message));
                }
            };
            if let [new_version] = applied[..] {
                self.remember(key, (!ids.is_empty()).then_some((new_version, ids)));
                return Ok(Some(out));
            }
            self.remember(key, None);
        }
        Err(IndexError(format!(
            "the index entry kept changing under {ATTEMPTS} attempts"
        )))
    }

    /// Where an update under `key` may start without a read.
    fn guess(&self, key: &str, guess: Guess) -> Option<(Vec<String>, u64)> {
        let written = self.written.lock().ok()?;
        match (written.get(key), guess) {
            (Some((version, ids)), _) => Some((ids.clone(), *version)),
            (None, Guess::AbsentUnlessKnown) => Some((Vec::new(), 0)),
            (None, Guess::Known) => None,
        }
    }

    /// What this process now knows it wrote under `key` (`None`: nothing to start from).
    fn remember(&self, key: &str, entry: Option<Written>) {
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        match entry {
            Some(entry) => {
                if written.len() >= REMEMBERED && !written.contains_key(key) {
                    written.clear();
                }
                written.insert(key.to_owned(), entry);
            }
            None => {
                written.remove(key);
            }
        }
    }
}

/// What an update may guess when it remembers nothing under its key.
#[derive(Clone, Copy)]
enum Guess {
    /// That the key is absent: filing a new round's key, the common case.
    AbsentUnlessKnown,
    /// Nothing: read first.
    Known,
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrtr_gate_host::core::host::{DuePage, HostError, Storage, Versioned};
    use mrtr_gate_host::core::memory::{ManualClock, MemoryStorage};
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn index() -> RoundIndex {
        let clock = Arc::new(ManualClock::new(1_000));
        RoundIndex::new(Arc::new(MemoryStorage::new(clock)), 60_000)
    }

    /// A store whose reads and writes are counted: each is one round trip on Redis.
    struct Counted {
        inner: MemoryStorage,
        reads: AtomicUsize,
        writes: AtomicUsize,
    }

    impl Storage for Counted {
        fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.read(keys)
        }
        fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.inner.write(writes)
        }
        fn list_due(
            &self,
            due: u64,
            cursor: Option<&str>,
            limit: u32,
        ) -> Result<DuePage, HostError> {
            self.inner.list_due(due, cursor, limit)
        }
    }

    /// Two replicas' indexes over one counted store, and the store's clock.
    fn replicas() -> (RoundIndex, RoundIndex, Arc<Counted>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_000));
        let store = Arc::new(Counted {
            inner: MemoryStorage::new(clock.clone()),
            reads: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
        });
        let a = RoundIndex::new(store.clone(), 60_000);
        let b = RoundIndex::new(store.clone(), 60_000);
        (a, b, store, clock)
    }

    fn id(n: u64) -> RequestId {
        RequestId::Text(format!("mg:1:{n}"))
    }

    #[test]
    fn a_round_filed_and_taken_by_one_process_costs_one_write_each_and_no_read() {
        let (a, _, store, _) = replicas();
        a.file("k", &id(1)).unwrap();
        assert_eq!(a.take("k").unwrap(), Some(id(1)));
        assert_eq!(store.reads.load(Ordering::SeqCst), 0);
        assert_eq!(store.writes.load(Ordering::SeqCst), 2);
        assert_eq!(a.take("k").unwrap(), None, "taken once");
        // A clone (another engine of the process) shares what was written.
        let engine = a.clone();
        engine.file("j", &id(2)).unwrap();
        let reads = store.reads.load(Ordering::SeqCst);
        assert_eq!(a.take("j").unwrap(), Some(id(2)));
        assert_eq!(store.reads.load(Ordering::SeqCst), reads);
    }

    #[test]
    fn what_another_replica_wrote_since_is_read_never_overwritten() {
        let (a, b, _, _) = replicas();
        a.file("k", &id(1)).unwrap();
        b.file("k", &id(2)).unwrap(); // b guessed "absent": refused, read, appended
        a.file("k", &id(3)).unwrap(); // a's guess is stale: refused, read, appended
        assert_eq!(b.take("k").unwrap(), Some(id(1)));
        // a remembers [1, 2, 3]; the store holds [2, 3]. Removing 1 from the guess is refused
        // at the stale version, and on the store there is nothing to remove.
        a.remove("k", &id(1)).unwrap();
        a.remove("k", &id(2)).unwrap();
        assert_eq!(a.take("k").unwrap(), Some(id(3)));
        assert_eq!(b.take("k").unwrap(), None);
        assert_eq!(a.take("k").unwrap(), None);
        // Nothing to do on the guess is not the answer: the store is asked.
        b.file("j", &id(4)).unwrap();
        a.file("j", &id(5)).unwrap();
        a.remove("j", &id(5)).unwrap(); // a now remembers [4]
        b.take("j").unwrap();
        b.file("j", &id(6)).unwrap(); // the store: [6]; a remembers [4]
        a.remove("j", &id(6)).unwrap(); // not on a's guess; on the store
        assert_eq!(b.take("j").unwrap(), None);
    }

    #[test]
    fn an_entry_that_expired_is_not_brought_back_by_what_was_remembered() {
        let (a, _, _, clock) = replicas();
        a.file("k", &id(1)).unwrap();
        clock.advance(60_001);
        a.file("k", &id(2)).unwrap();
        assert_eq!(a.take("k").unwrap(), Some(id(2)));
        assert_eq!(a.take("k").unwrap(), None);
    }

    #[test]
    fn a_failed_write_forgets_the_guess() {
        let clock = Arc::new(ManualClock::new(1_000));
        let store = Arc::new(MemoryStorage::new(clock));
        let a = RoundIndex::new(store.clone(), 60_000);
        a.file("k", &id(1)).unwrap();
        store.set_failing(true);
        assert!(a.file("k", &id(2)).is_err());
        store.set_failing(false);
        assert_eq!(a.take("k").unwrap(), Some(id(1)));
        assert_eq!(a.take("k").unwrap(), None);
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
