//! The clock import's range: a time no JSON number or JavaScript host carries exactly (what
//! a binding that wraps `-1` into a `u64` hands over) denies; the largest one in range works.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::host::{Consent, ConsentPrompt, ConsentReceipt, HostError, Services};
use mrtr_gate_core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{Gate, MAX_TIME_MS, Policy, ResponseVerdict};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn a_clock_beyond_2_53_denies_every_operation_unaudited_and_changes_nothing() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let before = fx.events().len();
    fx.clock.set(u64::MAX);
    let answers = json!({"a": accept_with(form_content())});
    for d in [
        fx.accept(1, complete()).map(|_| ()),
        fx.retry(n(1), n(2), &answers).map(|_| ()),
        fx.gate
            .finish(finish_request(
                n(1),
                mrtr_gate_core::CallerOutcome::Cancelled,
            ))
            .map(|_| ()),
        fx.gate.expire_stale().map(|_| ()),
        fx.register(n(5), &tool_params("t", json!({})), Policy::default())
            .map(|_| ()),
    ] {
        let d = assert_code(d, "clock_out_of_range");
        assert!(!d.audited);
    }
    assert_eq!(fx.events().len(), before, "nothing written");
    assert!(fx.consent.prompts().is_empty(), "nobody was asked");
    fx.clock.set(T0);
    fx.retry_ok(n(1), n(2), &answers);
}

#[test]
fn the_last_millisecond_in_range_is_a_time_like_any_other() {
    let mut fx = Fx::new();
    // Registered so that at the last millisecond the binding is past its 5-minute lifetime
    // but still in storage (its grace).
    fx.clock.set(MAX_TIME_MS - 330_000);
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    fx.clock.set(MAX_TIME_MS);
    // Past the default lifetime: ended as expired, not refused for the clock.
    assert_code(fx.retry(n(1), n(2), &json!({})), "inactive_mrtr_round");
    let last = fx.last_event();
    assert_eq!(
        (&last["event"], &last["outcome"]),
        (&json!("terminal"), &json!("expired")),
        "{last}"
    );
    assert_eq!(last["at_ms"], json!(MAX_TIME_MS));
}

/// A consent provider that grants, and breaks the clock while the user decides (once).
struct BreaksTheClock {
    clock: Arc<ManualClock>,
    armed: AtomicBool,
    inner: ScriptedConsent,
}

impl Consent for BreaksTheClock {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.clock.set(u64::MAX);
        }
        self.inner.request_consent(prompt)
    }
}

#[test]
fn a_clock_that_breaks_while_the_user_decides_denies_the_retry_and_keeps_the_round() {
    let clock = Arc::new(ManualClock::new(T0));
    // The store keeps its own time, as a real one does.
    let storage = MemoryStorage::new(Arc::new(ManualClock::new(T0)));
    let audit = MemoryAudit::new();
    let mut gate = Gate::new(Services {
        clock: clock.clone(),
        storage: storage.clone(),
        consent: BreaksTheClock {
            clock: clock.clone(),
            armed: AtomicBool::new(true),
            inner: ScriptedConsent::new(ScriptedAnswer::Grant),
        },
        audit: audit.clone(),
    });
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    assert!(matches!(
        gate.accept_response(
            &server(),
            &response(1, input_required(json!({"a": form("A")})))
        ),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let answers = json!({"a": accept_with(form_content())});
    let d = assert_code(
        gate.build_retry(retry_request(n(1), n(2), &answers)),
        "clock_out_of_range",
    );
    assert!(d.audited, "the refusal is on record");
    let events = audit.events();
    let last = events.last().unwrap();
    assert_eq!(last["event"], "rejected");
    assert_eq!(last["reason"], "clock_out_of_range");
    assert_eq!(
        last["at_ms"],
        json!(T0),
        "stamped with the time the call began"
    );
    assert!(kinds(&events).iter().all(|k| k != "consented"));
    // The round stays open; once the clock is sane the same retry id goes out.
    clock.set(T0);
    gate.build_retry(retry_request(n(1), n(2), &answers))
        .unwrap();
}

#[test]
fn a_clock_set_back_before_the_registration_denies_what_touches_the_binding_and_changes_nothing() {
    for set_back_to in [T0 - 5_001, T0 - 3_600_000, 0] {
        let mut fx = Fx::new();
        fx.register_tool(1);
        fx.round(1, input_required(json!({"a": form("A")})));
        let before = fx.events().len();
        fx.clock.set(set_back_to);
        let answers = json!({"a": accept_with(form_content())});
        for d in [
            fx.retry(n(1), n(2), &answers).map(|_| ()),
            fx.accept(1, complete()).map(|_| ()),
            fx.gate
                .finish(finish_request(
                    n(1),
                    mrtr_gate_core::CallerOutcome::Cancelled,
                ))
                .map(|_| ()),
        ] {
            let d = assert_code(d, "clock_behind_binding");
            assert!(d.audited, "the refusal is on record");
        }
        let events = fx.events();
        assert_eq!(events.len(), before + 3, "one rejected event per refusal");
        for e in &events[before..] {
            assert_eq!(
                (&e["event"], &e["reason"], &e["at_ms"]),
                (
                    &json!("rejected"),
                    &json!("clock_behind_binding"),
                    &json!(set_back_to)
                ),
                "{e}"
            );
        }
        assert!(fx.consent.prompts().is_empty(), "nobody was asked");
        // Nothing was consumed or ended: with the clock right again the round goes on.
        fx.clock.set(T0 + 1);
        fx.retry_ok(n(1), n(2), &answers);
    }
}

#[test]
fn a_clock_behind_by_no_more_than_the_skew_tolerance_judges_as_usual() {
    // Another instance whose clock lags the registering one's by up to 5 s.
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    fx.clock.set(T0 - mrtr_gate_core::CLOCK_SKEW_TOLERANCE_MS);
    fx.retry_ok(n(1), n(2), &json!({"a": accept_with(form_content())}));
}
