//! User consent: each scripted answer, its receipt on record, and state-only rounds that need none.

use crate::common::*;
use crate::support::*;
use mrtr_gate_core::memory::ScriptedAnswer;
use serde_json::{Value, json};

fn consent_case(answer: ScriptedAnswer, expected: &str) {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required_state(json!({"a": form("A")}), "S"));
    fx.consent.push(answer);
    let answers = json!({"a": accept_with(form_content())});
    let d = assert_code(fx.retry(n(1), n(2), &answers), expected);
    assert!(d.audited);
    let ev = fx.last_event();
    assert_eq!(ev["event"], "rejected");
    assert_eq!(ev["reason"], expected);
    assert!(
        fx.events()
            .iter()
            .all(|e| e["event"] != "consented" && e["event"] != "submitted")
    );
    // Nothing was consumed: the retry id is free, the round is still open.
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(params_of(&retry.request_json)["requestState"], "S");
}

#[test]
fn consent_refused_denies_the_retry() {
    consent_case(ScriptedAnswer::Refuse, "consent_refused");
}

#[test]
fn consent_for_another_view_denies_the_retry() {
    consent_case(ScriptedAnswer::GrantOtherView, "consent_mismatch");
}

#[test]
fn consent_for_other_answers_denies_the_retry() {
    consent_case(ScriptedAnswer::GrantOtherAnswers, "consent_mismatch");
}

#[test]
fn consent_failure_denies_the_retry() {
    consent_case(ScriptedAnswer::Fail, "consent_unavailable");
}

#[test]
fn consent_receipt_is_recorded() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let retry = fx.retry_ok(n(1), n(2), &json!({"a": {"action": "decline"}}));
    assert_eq!(retry.consent_receipt_id.as_deref(), Some("consent-1"));
    for kind in ["consented", "submitted"] {
        let ev = fx
            .events_of(1)
            .into_iter()
            .find(|e| e["event"] == kind)
            .unwrap();
        assert_eq!(ev["consent_receipt_id"], "consent-1", "{kind}");
        assert_eq!(ev["retry_id"], 2, "{kind}");
    }
}

/// A state-only round sends nothing of the user's: the gate retries without a prompt
/// (the spec lets the client retry at once), and records no receipt.
#[test]
fn state_only_round_needs_no_consent() {
    let mut fx = Fx::new();
    fx.consent.set_default(ScriptedAnswer::Fail);
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    let retry = fx.retry_ok(n(1), n(2), &json!({}));
    assert_eq!(retry.consent_receipt_id, None);
    assert!(fx.consent.prompts().is_empty());
    assert_eq!(kinds(&fx.events_of(1)), ["received", "submitted"]);
    assert_eq!(fx.events_of(1)[1]["consent_receipt_id"], Value::Null);
    // A round with inputs still needs the (now failing) consent.
    fx.round(2, input_required(json!({"a": form("A")})));
    assert_code(
        fx.retry(n(2), n(3), &json!({"a": {"action": "cancel"}})),
        "consent_unavailable",
    );
}
