//! The journal: a store write and the audit line that records it in one host call
//! (`mrtr_gate_core::host::journal`, WIT `journal`). Through it the trail is the trail of the
//! two calls, line for line, in four calls a round; a host that makes both steps at once and
//! then fails (its replica's `WAIT` short: it cannot tell which step is safe) leaves nothing
//! the gate denied resting on its writes; a journal that answers out of shape denies.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::host::{
    AppendOutcome, Audit, AuditEntry, ChainHead, DuePage, HostError, Journaled, Order, ReadKey,
    Services, Storage, Versioned, Write, sequential,
};
use mrtr_gate_core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{Gate, Policy, ResponseVerdict};
use serde_json::{Value, json};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

/// What the journal does to the call that carries one kind of event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Fault {
    #[default]
    None,
    /// Both steps made, as one, then `err`.
    BothThenErr(&'static str),
    /// The writes made and the line reported not written.
    WritesWithoutLine(&'static str),
    /// Nothing made, and no line reported.
    NoLine(&'static str),
}

/// A store that makes the journal itself (over the in-memory store and the sink it is given).
#[derive(Clone)]
struct Fused {
    inner: MemoryStorage,
    fault: Rc<Cell<Fault>>,
    calls: Rc<Cell<u32>>,
}

impl Storage for Fused {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        self.inner.read(keys)
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.inner.write(writes)
    }
    fn list_due(&self, due: u64, cursor: Option<&str>, limit: u32) -> Result<DuePage, HostError> {
        self.inner.list_due(due, cursor, limit)
    }
    fn journal(
        &self,
        audit: &dyn Audit,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<Journaled, HostError> {
        self.calls.set(self.calls.get() + 1);
        let carries = |kind: &str| entry.line.contains(&format!("\"event\":\"{kind}\""));
        match self.fault.get() {
            Fault::BothThenErr(kind) if carries(kind) => {
                sequential(&self.inner, audit, order, entry, writes)?;
                Err(HostError::new(
                    "WAIT: held by 0 of the 1 replicas it waits for",
                ))
            }
            Fault::WritesWithoutLine(kind) if carries(kind) => Ok(Journaled {
                applied: self.inner.write(writes)?,
                appended: Some(AppendOutcome::head_moved(ChainHead::genesis())),
                failed: None,
            }),
            Fault::NoLine(kind) if carries(kind) => Ok(Journaled::default()),
            _ => sequential(&self.inner, audit, order, entry, writes),
        }
    }
}

struct Rig {
    gate: Gate<Services<Arc<ManualClock>, Fused, ScriptedConsent, MemoryAudit>>,
    storage: MemoryStorage,
    audit: MemoryAudit,
    fused: Fused,
}

impl Rig {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(T0));
        let storage = MemoryStorage::new(clock.clone());
        let audit = MemoryAudit::new();
        let fused = Fused {
            inner: storage.clone(),
            fault: Rc::default(),
            calls: Rc::default(),
        };
        let gate = Gate::new(Services {
            clock,
            storage: fused.clone(),
            consent: ScriptedConsent::new(ScriptedAnswer::Grant),
            audit: audit.clone(),
        });
        Self {
            gate,
            storage,
            audit,
            fused,
        }
    }

    fn fault(&self, fault: Fault) {
        self.fused.fault.set(fault);
    }

    fn register(&mut self, id: i64) {
        self.gate
            .register(registration(
                n(id),
                &tool_params("get_weather", json!({"location": "Paris"})),
                Policy::default(),
            ))
            .unwrap();
    }

    fn accept(
        &mut self,
        id: i64,
        result: Value,
    ) -> Result<ResponseVerdict, mrtr_gate_core::Denial> {
        self.gate.accept_response(&server(), &response(id, result))
    }

    fn retry(
        &mut self,
        id: i64,
        retry_id: i64,
    ) -> Result<mrtr_gate_core::Retry, mrtr_gate_core::Denial> {
        let answers = json!({"a": accept_with(form_content())});
        self.gate
            .build_retry(retry_request(n(id), n(retry_id), &answers))
    }

    fn lines(&self) -> Vec<String> {
        self.audit.entries().into_iter().map(|e| e.line).collect()
    }

    /// The chain verifies, the trail reconciles, and the store holds nothing.
    fn assert_clean_and_ended(&self) {
        let lines = self.lines();
        mrtr_gate_core::audit::verify_chain(lines.iter().map(String::as_str)).unwrap();
        let r = mrtr_gate_core::reconcile::reconcile(lines.iter().map(String::as_str));
        assert!(r.consistent(), "{}", r.to_json());
        assert!(self.storage.is_empty(), "the binding is ended");
    }
}

fn form_round() -> Value {
    input_required(json!({"a": form("A")}))
}

#[test]
fn a_round_through_the_journal_leaves_the_two_calls_trail_line_for_line_in_four_calls() {
    let mut rig = Rig::new();
    let mut fx = Fx::new();
    rig.register(1);
    fx.register_tool(1);
    assert!(matches!(
        rig.accept(1, form_round()),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    fx.round(1, form_round());
    let journaled = rig.retry(1, 2).unwrap();
    let plain = fx.retry_ok(n(1), n(2), &json!({"a": accept_with(form_content())}));
    assert_eq!(journaled.request_json, plain.request_json);
    assert!(matches!(
        rig.accept(2, complete()),
        Ok(ResponseVerdict::Complete)
    ));
    assert!(matches!(
        fx.accept(2, complete()),
        Ok(ResponseVerdict::Complete)
    ));
    let plain_lines: Vec<String> = fx.audit.entries().into_iter().map(|e| e.line).collect();
    assert_eq!(rig.lines(), plain_lines);
    assert_eq!(
        kinds(&rig.audit.events()),
        ["received", "consented", "submitted", "terminal"]
    );
    assert_eq!(rig.fused.calls.get(), 4, "one journal call per line");
}

#[test]
fn a_host_that_made_both_steps_and_then_failed_leaves_nothing_resting_on_them() {
    // The line each call carries: what the gate is asked for, and the code it denies with.
    for kind in ["received", "consented", "submitted"] {
        let mut rig = Rig::new();
        rig.register(1);
        rig.fault(Fault::BothThenErr(kind));
        let denied = match kind {
            "received" => rig.accept(1, form_round()).map(|_| ()),
            _ => {
                rig.accept(1, form_round()).unwrap();
                rig.retry(1, 2).map(|_| ())
            }
        };
        assert_code(denied, "audit_write_failed");
        rig.fault(Fault::None);
        // No retry goes out for the round, and no answer is taken for one.
        assert!(
            rig.retry(1, 3).is_err(),
            "{kind}: a retry after the failure"
        );
        assert!(
            rig.accept(2, complete()).is_err(),
            "{kind}: an answer for the retry"
        );
        let ended = rig.audit.events().into_iter().any(|e| {
            e["event"] == "terminal"
                && e["outcome"] == "error"
                && e["reason"] == "audit_write_failed"
        });
        assert!(ended, "{kind}: the binding is ended for the failure");
        rig.assert_clean_and_ended();
    }
    // The removal and its `terminal`, made together, then the failure: the end stands.
    let mut rig = Rig::new();
    rig.register(1);
    rig.accept(1, form_round()).unwrap();
    rig.retry(1, 2).unwrap();
    rig.fault(Fault::BothThenErr("terminal"));
    assert_code(rig.accept(2, complete()), "storage_failed");
    rig.fault(Fault::None);
    assert_eq!(rig.audit.events().last().unwrap()["event"], "terminal");
    rig.assert_clean_and_ended();
}

#[test]
fn a_journal_that_answers_out_of_shape_denies() {
    // Writes made with no line written: the round they stored is ended.
    let mut rig = Rig::new();
    rig.register(1);
    rig.fault(Fault::WritesWithoutLine("received"));
    assert_code(rig.accept(1, form_round()), "audit_write_failed");
    rig.fault(Fault::None);
    assert_code(rig.retry(1, 2), "inactive_mrtr_round");
    assert!(
        rig.storage.is_empty(),
        "the round stored without its line is ended"
    );
    // No line reported for a call that must offer one: nothing was made, the round stays open.
    let mut rig = Rig::new();
    rig.register(1);
    rig.accept(1, form_round()).unwrap();
    rig.fault(Fault::NoLine("consented"));
    assert_code(rig.retry(1, 2), "audit_write_failed");
    rig.fault(Fault::None);
    assert!(rig.retry(1, 3).is_ok(), "the round was not used");
}
