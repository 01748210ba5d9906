//! Audit sink faults: every failure to append or read back denies the flow.

use crate::common::*;
use crate::support::*;
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
