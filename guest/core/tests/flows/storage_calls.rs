//! What each operation asks of storage, and why the fewer calls are still exact: a form
//! round is seven storage calls (one round trip each on a remote store); a cached binding
//! decides only what a compare-and-swap then confirms; a retry id taken between the read
//! and the consume is still refused.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::host::{DuePage, HostError, ReadKey, Services, Storage, Versioned, Write};
use mrtr_gate_core::memory::{ManualClock, MemoryAudit, MemoryStorage, ScriptedConsent};
use mrtr_gate_core::{CallerOutcome, Gate, Policy, ResponseVerdict};
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// A store that counts its calls and, once armed, takes a key itself just before the next
/// batch of writes (a rival instance winning the race for that key).
#[derive(Clone)]
struct Watched {
    inner: MemoryStorage,
    calls: Rc<Cell<u32>>,
    take_first: Rc<RefCell<Option<String>>>,
}

impl Watched {
    fn new(inner: &MemoryStorage) -> Self {
        Self {
            inner: inner.clone(),
            calls: Rc::default(),
            take_first: Rc::default(),
        }
    }
    fn calls_during(&self, op: impl FnOnce()) -> u32 {
        let before = self.calls.get();
        op();
        self.calls.get() - before
    }
}

impl Storage for Watched {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        self.calls.set(self.calls.get() + 1);
        self.inner.read(keys)
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.calls.set(self.calls.get() + 1);
        if let Some(key) = self.take_first.borrow_mut().take() {
            let rival = Write {
                key: &key,
                expected: 0,
                value: Some("\"rival\""),
                ttl_ms: 60_000,
            };
            assert_eq!(self.inner.write(&[rival]).unwrap().len(), 1);
        }
        self.inner.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        self.calls.set(self.calls.get() + 1);
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}

type WatchedGate = Gate<Services<Arc<ManualClock>, Watched, ScriptedConsent, MemoryAudit>>;

fn watched_gate(fx: &Fx) -> (WatchedGate, Watched) {
    let store = Watched::new(&fx.storage);
    let gate = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: store.clone(),
        consent: fx.consent.clone(),
        audit: fx.audit.clone(),
    });
    (gate, store)
}

#[test]
fn a_form_round_on_one_instance_is_seven_storage_calls() {
    let fx = Fx::new();
    let (mut gate, store) = watched_gate(&fx);
    let answers = json!({"a": accept_with(form_content())});
    let mut calls = Vec::new();
    calls.push(store.calls_during(|| {
        gate.register(registration(
            n(1),
            &tool_params("t", json!({})),
            Policy::default(),
        ))
        .unwrap();
    }));
    calls.push(store.calls_during(|| {
        let verdict = gate
            .accept_response(
                &server(),
                &response(1, input_required(json!({"a": form("A")}))),
            )
            .unwrap();
        assert!(matches!(verdict, ResponseVerdict::InputRequired(_)));
    }));
    calls.push(store.calls_during(|| {
        gate.build_retry(retry_request(n(1), n(2), &answers))
            .unwrap();
    }));
    calls.push(store.calls_during(|| {
        let verdict = gate
            .accept_response(&server(), &response(2, complete()))
            .unwrap();
        assert_eq!(verdict, ResponseVerdict::Complete);
    }));
    // register: insert; round: read, write; retry: read (with the retry id's key), reserve
    // and consume in one batch, then (its `submitted` event confirmed) mark it handed out;
    // result: remove record and pointer in one batch.
    assert_eq!(calls, [1, 2, 3, 1]);
    assert!(fx.storage.is_empty(), "{:?}", fx.storage.live_keys(""));
    assert_eq!(
        kinds(&fx.events_of(1)),
        ["received", "consented", "submitted", "terminal"]
    );
    fx.assert_chain();
}

#[test]
fn a_result_for_a_binding_another_instance_ended_is_refused_not_ended_twice() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.register_tool(2);
    // The result reaches the other instance first; then the same result (a duplicate)
    // reaches this one, whose cached copy still says live.
    let mut other = fx.second_gate();
    assert_eq!(
        other
            .accept_response(&server(), &response(1, complete()))
            .unwrap(),
        ResponseVerdict::Complete
    );
    assert_code(fx.accept(1, complete()), "no_live_request");
    // The same for finish: cancelled elsewhere, then finished here.
    other
        .finish(finish_request(n(2), CallerOutcome::Cancelled))
        .unwrap();
    assert_code(
        fx.gate
            .finish(finish_request(n(2), CallerOutcome::Cancelled)),
        "unknown_request",
    );
    // Neither was audited as received, so neither leaves a terminal event twice; a round
    // does.
    fx.register_tool(3);
    fx.round(3, state_only("s"));
    fx.retry_ok(n(3), n(4), &json!({}));
    other
        .accept_response(&server(), &response(4, complete()))
        .unwrap();
    assert_code(fx.accept(4, complete()), "no_live_request");
    assert_eq!(terminal_of(&fx, 3).len(), 1);
    assert!(fx.storage.is_empty(), "{:?}", fx.storage.live_keys(""));
    fx.assert_chain();
}

#[test]
fn a_cached_binding_that_moved_on_elsewhere_is_judged_on_what_storage_holds() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    // This instance cached the binding at registration; the round and the retry happen on
    // the other one, so the cached copy is two versions behind.
    let mut other = fx.second_gate();
    other
        .accept_response(&server(), &response(1, state_only("s")))
        .unwrap();
    other
        .build_retry(retry_request(n(1), n(2), &json!({})))
        .unwrap();
    // A result on the original id is late now, whatever the cache says.
    assert_code(fx.accept(1, complete()), "no_live_request");
    // The result on the retry id ends it, once; the pointer (written with the record, its
    // version learned from the read) goes with it.
    assert_eq!(fx.accept(2, complete()).unwrap(), ResponseVerdict::Complete);
    assert_eq!(terminal_of(&fx, 1).len(), 1);
    assert!(fx.storage.is_empty(), "{:?}", fx.storage.live_keys(""));
    fx.assert_chain();
}

#[test]
fn another_instance_deletes_a_pointer_written_with_its_record_without_reading_it_again() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    fx.retry_ok(n(1), n(2), &json!({}));
    // The record says the pointer's version is not known (it was written in the same
    // call); a fresh instance reads the pointer to find the record and learns it there.
    let (mut fresh, store) = watched_gate(&fx);
    let calls = store.calls_during(|| {
        assert_eq!(
            fresh
                .accept_response(&server(), &response(2, complete()))
                .unwrap(),
            ResponseVerdict::Complete
        );
    });
    // Read the pointer, read the record, remove both: no read before the pointer's delete.
    assert_eq!(calls, 3);
    assert!(fx.storage.is_empty(), "{:?}", fx.storage.live_keys(""));
}

#[test]
fn a_binding_ended_by_expiry_elsewhere_takes_its_pointers_with_it() {
    let mut fx = Fx::new();
    let brief = Policy {
        round_trip_lifetime_ms: 1_000,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), brief)
        .unwrap();
    fx.round(1, state_only("s"));
    fx.retry_ok(n(1), n(2), &json!({}));
    fx.clock.advance(1_000);
    // An instance that never saw the binding: its record does not know the pointer's
    // version, so the pointer is read, checked to name this binding, and deleted.
    assert_eq!(fx.second_gate().expire_stale().unwrap(), 1);
    assert!(fx.storage.is_empty(), "{:?}", fx.storage.live_keys(""));
    let terminal = terminal_of(&fx, 1);
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0]["outcome"], "expired");
}

#[test]
fn a_retry_id_taken_between_the_read_and_the_consume_is_refused_and_the_round_stays_open() {
    let fx = Fx::new();
    let (mut gate, store) = watched_gate(&fx);
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    gate.accept_response(
        &server(),
        &response(1, input_required(json!({"a": form("A")}))),
    )
    .unwrap();
    let answers = json!({"a": accept_with(form_content())});
    // Retry id 2 is free when read; a rival takes its key before the consume.
    let taken = {
        // The key of id 2 on this server, as the gate names it: what a registration writes.
        let mut elsewhere = Fx::new();
        elsewhere.register_tool(2);
        elsewhere.storage.live_keys("").pop().unwrap()
    };
    *store.take_first.borrow_mut() = Some(taken);
    let d = assert_code(
        gate.build_retry(retry_request(n(1), n(2), &answers)),
        "retry_requires_new_jsonrpc_id",
    );
    assert!(d.audited);
    // The user consented before the race was lost: the trail says so, and says the retry
    // was refused; nothing was submitted.
    assert_eq!(
        kinds(&fx.events_of(1)),
        ["received", "consented", "rejected"]
    );
    // The round is still open: the same answers go out once, under another id.
    let retry = gate
        .build_retry(retry_request(n(1), n(3), &answers))
        .unwrap();
    assert_eq!(parse(&retry.request_json)["id"], 3);
    assert_eq!(
        kinds(&fx.events_of(1)),
        [
            "received",
            "consented",
            "rejected",
            "consented",
            "submitted"
        ]
    );
    fx.assert_chain();
}
