//! Audit sink faults: every failure to append or read back denies the flow.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::audit::verify_chain;
use mrtr_gate_core::host::{AppendOutcome, Audit, AuditEntry, HostError, Services};
use mrtr_gate_core::memory::{
    AuditFault, ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{Gate, Policy, ResponseVerdict};
use serde_json::{Value, json};
use std::sync::Arc;

fn audit_fault_case(fault: AuditFault, expected: &str) {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let answers = json!({"a": accept_with(form_content())});
    fx.audit.set_fault(fault);
    let d = assert_code(fx.retry(n(1), n(2), &answers), expected);
    assert!(!d.audited, "a broken sink cannot have recorded the denial");
    fx.audit.set_fault(AuditFault::None);
    // No retry went out, and the round is still there once the sink works again.
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(parse(&retry.request_json)["id"], 2);
    let chain = fx.audit.entries();
    verify_chain(chain.iter().map(|e| e.line.as_str())).unwrap();
}

#[test]
fn audit_append_failure_denies_the_retry() {
    audit_fault_case(AuditFault::FailAppend, "audit_write_failed");
}

#[test]
fn audit_readback_corruption_denies_the_retry() {
    audit_fault_case(AuditFault::CorruptReadback, "audit_readback_mismatch");
}

#[test]
fn audit_lost_write_denies_the_retry() {
    audit_fault_case(AuditFault::LoseWrites, "audit_readback_mismatch");
}

#[test]
fn audit_readback_failure_denies_the_retry() {
    audit_fault_case(AuditFault::FailReadback, "audit_readback_mismatch");
}

#[test]
fn audit_failure_denies_the_round() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.audit.set_fault(AuditFault::FailAppend);
    assert_code(fx.accept(1, state_only("s")), "audit_write_failed");
    fx.audit.set_fault(AuditFault::None);
    // Nothing rests on an unaudited round: the binding is gone.
    assert_code(fx.retry(n(1), n(2), &json!({})), "inactive_mrtr_round");
    assert_code(fx.accept(1, complete()), "no_live_request");
    assert!(fx.storage.is_empty());
}

/// A sink that refuses one kind of event (to reach the step after the round is consumed).
#[derive(Clone)]
struct RefuseKind {
    inner: MemoryAudit,
    kind: &'static str,
}

impl Audit for RefuseKind {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        if entry.line.contains(&format!("\"event\":\"{}\"", self.kind)) {
            return Err(HostError::new("refused"));
        }
        self.inner.append(entry)
    }
}

#[test]
fn audit_failure_after_the_round_is_consumed_ends_the_binding() {
    let clock = Arc::new(ManualClock::new(T0));
    let storage = MemoryStorage::new(clock.clone());
    let inner = MemoryAudit::new();
    let mut gate = Gate::new(Services {
        clock: clock.clone(),
        storage: storage.clone(),
        consent: ScriptedConsent::new(ScriptedAnswer::Grant),
        audit: RefuseKind {
            inner: inner.clone(),
            kind: "submitted",
        },
    });
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    assert!(matches!(
        gate.accept_response(&server(), &response(1, state_only("s"))),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let d = assert_code(
        gate.build_retry(retry_request(n(1), n(2), &json!({}))),
        "audit_write_failed",
    );
    assert!(!d.audited);
    // No second chance: the round was consumed without a trail, the binding ended.
    assert_code(
        gate.build_retry(retry_request(n(1), n(3), &json!({}))),
        "inactive_mrtr_round",
    );
    assert_code(
        gate.accept_response(&server(), &response(2, complete())),
        "no_live_request",
    );
    let events = inner.events();
    let terminal: Vec<_> = events.iter().filter(|e| e["event"] == "terminal").collect();
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0]["outcome"], "error");
    assert_eq!(terminal[0]["reason"], "audit_write_failed");
    assert!(storage.is_empty());
}

#[test]
fn a_round_whose_received_event_failed_is_never_retriable_even_when_its_cleanup_fails() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    // `received` cannot be written, and ending the binding afterwards fails as well.
    fx.audit.set_fault(AuditFault::FailAppend);
    fx.storage.set_failing_deletes(true);
    assert_code(
        fx.accept(1, input_required(json!({"a": form("A")}))),
        "audit_write_failed",
    );
    fx.audit.set_fault(AuditFault::None);
    fx.storage.set_failing_deletes(false);
    // No round rests on the unaudited `received`: nothing to consent to, nothing to send.
    let answers = json!({"a": accept_with(form_content())});
    assert_code(fx.retry(n(1), n(2), &answers), "inactive_mrtr_round");
    let kinds: Vec<Value> = fx.events().iter().map(|e| e["event"].clone()).collect();
    assert!(
        !kinds.iter().any(|k| k == "consented" || k == "submitted"),
        "the trail shows no consent or retry for an unaudited round: {kinds:?}"
    );
    assert!(fx.consent.prompts().is_empty(), "the user was never asked");
}

/// A sink shared with other writers: before each of our first `others` appends, another
/// writer's event goes in on the head, so each of those appends finds the head moved.
struct Contended {
    inner: MemoryAudit,
    others: std::sync::Mutex<usize>,
}

impl Contended {
    fn head(&self, shard: &str) -> mrtr_gate_core::host::ChainHead {
        self.inner
            .heads()
            .remove(shard)
            .unwrap_or_else(mrtr_gate_core::host::ChainHead::genesis)
    }
}

impl Audit for Contended {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        let mut others = self.others.lock().unwrap();
        if *others > 0 {
            *others -= 1;
            // On the same shard: another writer's event about the same server.
            let head = self.head(&entry.shard);
            let line = json!({"event": "other", "seq": head.seq + 1, "shard": entry.shard,
                "prev_sha256": head.event_sha256, "n": *others})
            .to_string();
            let other = AuditEntry {
                shard: entry.shard.clone(),
                seq: head.seq + 1,
                prev_sha256: head.event_sha256,
                event_sha256: mrtr_gate_core::digest::sha256_hex(line.as_bytes()),
                line,
            };
            assert!(self.inner.append(&other)?.written);
        }
        self.inner.append(entry)
    }
}

#[test]
fn a_head_moved_by_other_writers_costs_retries_not_a_denial() {
    // Other processes win the head 100 times in a row (far more than one loser meets in a
    // real race, far more than the old bound of 16): every append is redone on the new head,
    // and the retry goes out.
    let clock = Arc::new(ManualClock::new(T0));
    let storage = MemoryStorage::new(clock.clone());
    let inner = MemoryAudit::new();
    let sink = Arc::new(Contended {
        inner: inner.clone(),
        others: std::sync::Mutex::new(100),
    });
    let mut gate = Gate::new(Services {
        clock: clock.clone(),
        storage: storage.clone(),
        consent: ScriptedConsent::new(ScriptedAnswer::Grant),
        audit: sink.clone(),
    });
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    assert!(matches!(
        gate.accept_response(&server(), &response(1, state_only("s"))),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let retry = gate
        .build_retry(retry_request(n(1), n(2), &json!({})))
        .unwrap_or_else(|d| panic!("contention denied a good retry: {d}"));
    assert_eq!(parse(&retry.request_json)["id"], 2);
    assert_eq!(
        *sink.others.lock().unwrap(),
        0,
        "every other writer went first"
    );
    let lines: Vec<String> = inner.entries().into_iter().map(|e| e.line).collect();
    verify_chain(lines.iter().map(String::as_str)).unwrap();
    let ours: Vec<Value> = inner
        .events()
        .into_iter()
        .filter(|e| e["event"] != "other")
        .collect();
    assert_eq!(
        kinds(&ours),
        ["received", "submitted"],
        "each event of ours is in the one chain, once"
    );
}

/// A sink that never writes: it answers every append with a head it chooses.
struct Refusing {
    calls: std::sync::Mutex<u64>,
    /// Whether each answer names a head one further than the last (a sink inventing
    /// progress) or always the same head (a sink refusing outright).
    advancing: bool,
}

impl Audit for Refusing {
    fn append(&self, _: &AuditEntry) -> Result<AppendOutcome, HostError> {
        let mut calls = self.calls.lock().unwrap();
        *calls += 1;
        let seq = if self.advancing { 41 + *calls } else { 41 };
        Ok(AppendOutcome::head_moved(mrtr_gate_core::host::ChainHead {
            seq,
            event_sha256: format!("{seq:064x}"),
        }))
    }
}

fn denied_by_a_refusing_sink(advancing: bool) -> u64 {
    let clock = Arc::new(ManualClock::new(T0));
    let sink = Arc::new(Refusing {
        calls: std::sync::Mutex::new(0),
        advancing,
    });
    let mut gate = Gate::new(Services {
        clock: clock.clone(),
        storage: MemoryStorage::new(clock.clone()),
        consent: ScriptedConsent::new(ScriptedAnswer::Grant),
        audit: sink.clone(),
    });
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    let d = assert_code(
        gate.accept_response(&server(), &response(1, state_only("s"))),
        "audit_contention",
    );
    assert!(!d.audited);
    *sink.calls.lock().unwrap()
}

#[test]
fn a_sink_that_keeps_refusing_an_entry_on_its_own_head_is_denied_after_a_few_tries() {
    // Two events are tried (`received`, then the `rejected` of the denial), each denied
    // after a handful of answers, not after the contention bound.
    let calls = denied_by_a_refusing_sink(false);
    assert!(calls <= 8, "{calls} appends to a sink that never writes");
}

#[test]
fn a_sink_inventing_an_ever_moving_head_is_still_denied() {
    let calls = denied_by_a_refusing_sink(true);
    assert!(
        (100..=2 * 1024).contains(&calls),
        "{calls} appends to a sink that never writes"
    );
}

#[test]
fn many_gates_sharing_one_sink_in_threads_never_deny_for_contention() {
    // Eight gates on eight threads, each with its own storage, one trail between them: each
    // loses the head to the others again and again, and every round still goes through.
    const THREADS: i64 = 8;
    const ROUNDS: i64 = 40;
    let audit = MemoryAudit::new();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let audit = audit.clone();
            std::thread::spawn(move || {
                let clock = Arc::new(ManualClock::new(T0));
                let mut gate = Gate::new(Services {
                    clock: clock.clone(),
                    storage: MemoryStorage::new(clock.clone()),
                    consent: ScriptedConsent::new(ScriptedAnswer::Grant),
                    audit,
                });
                for r in 0..ROUNDS {
                    let id = t * 10_000 + r * 2;
                    let params = tool_params("t", json!({}));
                    gate.register(registration(n(id), &params, Policy::default()))
                        .unwrap_or_else(|d| panic!("register: {d}"));
                    gate.accept_response(&server(), &response(id, state_only("s")))
                        .unwrap_or_else(|d| panic!("accept: {d}"));
                    gate.build_retry(retry_request(n(id), n(id + 1), &json!({})))
                        .unwrap_or_else(|d| panic!("retry: {d}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let lines: Vec<String> = audit.entries().into_iter().map(|e| e.line).collect();
    assert_eq!(
        verify_chain(lines.iter().map(String::as_str)).unwrap(),
        (THREADS * ROUNDS * 2) as u64
    );
}

/// A sink that loses a line it had confirmed (the head goes back before the writer's last
/// write, or another line takes that line's place) can confirm nothing after it: the writer
/// that sees it denies, and writes no more until its process starts again.
#[test]
fn a_sink_that_loses_a_confirmed_line_denies_every_later_write_of_that_writer() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let answers = json!({"a": accept_with(form_content())});
    // The round's `received` line, confirmed, is lost: the head is back at genesis.
    assert!(fx.audit.lose_newest().is_some());
    let d = assert_code(fx.retry(n(1), n(2), &answers), "audit_write_failed");
    let message = d.error.to_string();
    assert!(message.contains("lost lines it had confirmed"), "{message}");
    assert!(
        fx.audit.entries().is_empty(),
        "nothing written on a sink that lost lines"
    );
    // Latched: this writer writes nothing more, not even once the head moves on.
    fx.second_gate()
        .register(registration(
            n(5),
            &tool_params("t", json!({})),
            Policy::default(),
        ))
        .unwrap();
    fx.second_gate()
        .accept_response(
            &server(),
            &response(5, input_required(json!({"b": form("B")}))),
        )
        .unwrap();
    assert_eq!(fx.audit.entries().len(), 1);
    assert_code(fx.retry(n(1), n(3), &answers), "audit_write_failed");
    assert_code(
        fx.gate.finish(finish_request(
            n(1),
            mrtr_gate_core::CallerOutcome::Cancelled,
        )),
        "audit_write_failed",
    );
}

#[test]
fn another_line_in_place_of_a_confirmed_one_is_a_loss_too() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let lost = fx.audit.lose_newest().unwrap();
    // Another process writes its own line at the lost line's place.
    let mut other = fx.second_gate();
    other
        .register(registration(
            n(5),
            &tool_params("t", json!({})),
            Policy::default(),
        ))
        .unwrap();
    other
        .accept_response(
            &server(),
            &response(5, input_required(json!({"b": form("B")}))),
        )
        .unwrap();
    let entries = fx.audit.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].seq, lost.seq);
    assert_ne!(entries[0].event_sha256, lost.event_sha256);
    let answers = json!({"a": accept_with(form_content())});
    assert_code(fx.retry(n(1), n(2), &answers), "audit_write_failed");
    // The other process, which confirmed nothing that was lost, goes on.
    let retry = other.build_retry(retry_request(
        n(5),
        n(6),
        &json!({"b": accept_with(form_content())}),
    ));
    assert!(retry.is_ok(), "{retry:?}");
}

/// The flake once seen in `proxy_replicas` under a killed Cluster master, made deterministic:
/// the sink writes round 1's `received` but cannot confirm it (a replica's `WAIT` timed out),
/// so the gate refuses the round, and the removal of the binding fails too. The record stays
/// as registered; whoever ends it later writes a `terminal` naming round 0 after the trail's
/// `received` of round 1. Nothing rests on that round, and the trail reconciles.
#[test]
fn a_received_the_sink_wrote_but_could_not_confirm_leaves_a_trail_that_reconciles_once_ended() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.audit.set_fault(AuditFault::FailReadback);
    fx.storage.set_failing_deletes(true);
    assert_code(fx.accept(1, state_only("s")), "audit_readback_mismatch");
    fx.audit.set_fault(AuditFault::None);
    fx.storage.set_failing_deletes(false);
    // The round is not open: no retry rests on the unconfirmed `received`.
    assert_code(fx.retry(n(1), n(2), &json!({})), "inactive_mrtr_round");
    fx.gate
        .finish(finish_request(
            n(1),
            mrtr_gate_core::CallerOutcome::Error("gate_refused".into()),
        ))
        .unwrap();
    let ends: Vec<(Value, Value)> = fx
        .events_of(1)
        .into_iter()
        .filter(|e| e["event"] != "rejected")
        .map(|e| (e["event"].clone(), e["round"].clone()))
        .collect();
    assert_eq!(
        ends,
        vec![(json!("received"), json!(1)), (json!("terminal"), json!(0))]
    );
    fx.assert_reconciles();
    assert!(fx.reconciled().clean());
    assert!(fx.storage.is_empty());
}
