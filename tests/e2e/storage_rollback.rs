//! `AuthenticatedStorage` (host-harness/host/src/host_keys.rs) against a store writer who does not
//! forge a MAC but replays: a value at a version the gate already holds is never taken on
//! its version alone (its MAC is checked on every read), and a value sealed earlier and
//! written back (the rollback of docs/host-keys.md) is refused by a host that saw a newer
//! one. What remains is pinned here too: a host that never saw the key cannot tell.

use crate::support;
use mrtr_gate_host::core::host::{HostError, ReadKey, Storage, Versioned, Write};
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::host_keys::{AuthenticatedStorage, HostKeys};
use mrtr_gate_host::reference_hosts::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::json;
use std::sync::{Arc, Mutex};

const KEY: &str = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/1";

fn keys() -> HostKeys {
    HostKeys::new("k1", &[7; 32]).unwrap()
}

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://rollback.example.com/mcp").unwrap()
}

/// A store that can be made to hold another value under a key without a new version (a
/// store that reuses versions, or a writer who sets the version field by hand).
struct SameVersion {
    inner: MemoryStorage,
    swapped: Arc<Mutex<Option<String>>>,
}

impl Storage for SameVersion {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        let swapped = self.swapped.lock().unwrap().clone();
        let mut found = self.inner.read(keys)?;
        for (k, entry) in keys.iter().zip(&mut found) {
            if let (true, Some(other)) = (entry.is_present(), &swapped) {
                // The read contract kept: a reader at this version is sent no value.
                entry.value = if k.have == entry.version {
                    String::new()
                } else {
                    other.clone()
                };
            }
        }
        Ok(found)
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.inner.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_host::core::host::DuePage, HostError> {
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}

fn raw(inner: &MemoryStorage, key: &str) -> Versioned {
    inner
        .read(&[ReadKey::from(key)])
        .unwrap()
        .pop()
        .and_then(|v| v.present())
        .unwrap()
}

/// A write of `value` over the test key at version `expected` (0: absent).
fn put(expected: u64, value: &str) -> Write<'_> {
    Write {
        key: KEY,
        expected,
        value: Some(value),
        ttl_ms: 60_000,
    }
}

#[test]
fn a_value_at_the_version_the_gate_holds_still_has_its_mac_checked() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let inner = MemoryStorage::new(clock);
    let swapped = Arc::new(Mutex::new(None));
    let store = AuthenticatedStorage::new(
        SameVersion {
            inner: inner.clone(),
            swapped: swapped.clone(),
        },
        keys(),
    );
    let v1 = store.write(&[put(0, "round open")]).unwrap()[0];
    let sealed_open = raw(&inner, KEY).value;
    let v2 = store.write(&[put(v1, "round used")]).unwrap()[0];
    let held = [ReadKey { key: KEY, have: v2 }];
    // The value the gate holds, unchanged: not sent again.
    assert_eq!(
        store.read(&held).unwrap()[0]
            .clone()
            .present()
            .unwrap()
            .value,
        ""
    );
    // Another value at that very version: unsigned, or sealed earlier for this key. Neither
    // is let through on the version the gate holds.
    for other in ["forged, no MAC".to_owned(), sealed_open] {
        *swapped.lock().unwrap() = Some(other.clone());
        assert!(
            store.read(&held).is_err(),
            "a value at the held version passed unchecked: {other}"
        );
    }
}

fn open_round(g: &mut ComponentGate) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    g.register(Registration {
        request_id: RequestId::Number(1),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json:
            json!({"name": "transfer", "arguments": {"to": "bob", "amount": 10}, "_meta": meta})
                .to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "inputRequests": {"ok": {"method": "elicitation/create", "params": {"message": "Confirm?",
            "requestedSchema": {"type": "object", "properties": {"yes": {"type": "boolean"}}}}}}}});
    assert!(matches!(
        g.accept_response(&server(), &round.to_string()),
        Ok(ResponseVerdict::InputRequired(_))
    ));
}

fn retry(g: &mut ComponentGate, retry_id: i64) -> Result<String, String> {
    g.build_retry(RetryRequest {
        server: server(),
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(retry_id),
        user: "alice".into(),
        tenant: "acme".into(),
        responses_json: json!({"ok": {"action": "accept", "content": {"yes": true}}}).to_string(),
    })
    .map(|r| r.request_json)
    .map_err(|d| d.code.to_string())
}

#[test]
fn a_round_written_back_after_its_retry_is_refused_by_a_host_that_saw_it_used() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let inner = MemoryStorage::new(clock.clone());
    let mut g = ComponentGate::new(
        support::runtime(),
        HostServices {
            clock,
            storage: Arc::new(AuthenticatedStorage::new(inner.clone(), keys())),
            consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
            audit: Arc::new(MemoryAudit::new()),
        },
    );
    open_round(&mut g);
    let record = inner.live_keys("mrtr-gate/").pop().unwrap();
    let open = raw(&inner, &record).value;
    retry(&mut g, 2).unwrap();
    // The store writer writes the open round's sealed record back (a new version; its MAC
    // is a good one, made by this host before the round was used).
    let now = raw(&inner, &record).version;
    let applied = inner
        .write(&[Write {
            key: &record,
            expected: now,
            value: Some(&open),
            ttl_ms: 300_000,
        }])
        .unwrap();
    assert_eq!(applied.len(), 1, "the writer could write the store");
    assert_eq!(
        retry(&mut g, 3),
        Err("storage_failed".into()),
        "the used round was answered a second time"
    );
    // What remains (docs/host-keys.md): a host that never saw the key cannot tell.
    let fresh = AuthenticatedStorage::new(inner.clone(), keys());
    assert!(fresh.read(&[ReadKey::from(record.as_str())]).is_ok());
}

/// A store that answers one read with a value it held before (what a read that crossed a
/// newer write from another thread of the process looks like to the wrapper).
struct OneStaleRead {
    inner: MemoryStorage,
    stale: Arc<Mutex<Option<Versioned>>>,
}

impl Storage for OneStaleRead {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        match self.stale.lock().unwrap().take() {
            Some(old) => Ok(vec![old]),
            None => self.inner.read(keys),
        }
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.inner.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_host::core::host::DuePage, HostError> {
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}

#[test]
fn a_read_that_crossed_a_newer_write_reads_again_and_is_not_taken_for_a_rollback() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let inner = MemoryStorage::new(clock);
    let stale = Arc::new(Mutex::new(None));
    let store = AuthenticatedStorage::new(
        OneStaleRead {
            inner: inner.clone(),
            stale: stale.clone(),
        },
        keys(),
    );
    let v1 = store.write(&[put(0, "first")]).unwrap()[0];
    let old = raw(&inner, KEY);
    store.write(&[put(v1, "second")]).unwrap();
    *stale.lock().unwrap() = Some(old);
    let got = store.read(&[ReadKey::from(KEY)]).unwrap();
    assert_eq!(got[0].clone().present().unwrap().value, "second");
}
