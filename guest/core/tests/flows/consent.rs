//! User consent: each scripted answer, its receipt on record, and state-only rounds that need none.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::memory::ScriptedAnswer;
use mrtr_gate_core::{AcceptedRound, Policy};
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

/// The `consented` event names how the decision was made, and no other event carries it:
/// a trail tells a person's approval from a preset, a delegated or an automatic one.
#[test]
fn consent_method_is_recorded_on_the_consented_event() {
    use mrtr_gate_core::host::ConsentMethod;
    for (method, name) in [
        (None, "preset_answers"),
        (Some(ConsentMethod::UserAtScreen), "user_at_screen"),
        (Some(ConsentMethod::PresetAnswers), "preset_answers"),
        (
            Some(ConsentMethod::DelegatedToClient),
            "delegated_to_client",
        ),
        (Some(ConsentMethod::PolicyHook), "policy_hook"),
    ] {
        let mut fx = Fx::new();
        if let Some(m) = method {
            fx.consent.set_method(m);
        }
        fx.register_tool(1);
        fx.round(1, input_required(json!({"a": form("A")})));
        fx.retry_ok(n(1), n(2), &json!({"a": {"action": "decline"}}));
        for ev in fx.events() {
            let expected = if ev["event"] == "consented" {
                json!(name)
            } else {
                Value::Null
            };
            assert_eq!(ev["consent_method"], expected, "{name}: {ev}");
        }
        assert_eq!(
            fx.events()
                .iter()
                .filter(|e| e["event"] == "consented")
                .count(),
            1
        );
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

/// The view digest of the first round of a `tools/call` registered as `id` by `user` of
/// `tenant` with `arguments`, on a fixture of its own or on `fx`.
fn first_view(fx: &mut Fx, id: i64, user: &str, tenant: &str, arguments: Value) -> AcceptedRound {
    let mut r = registration(n(id), &tool_params("t", arguments), Policy::default());
    r.user = user.into();
    r.tenant = tenant.into();
    fx.gate.register(r).unwrap();
    fx.round(id, input_required(json!({"a": form("A")})))
}

#[test]
fn a_view_identifies_its_request_and_no_two_bindings_share_one() {
    let mut fx = Fx::new();
    let base = first_view(&mut fx, 1, USER, TENANT, json!({"to": "ada"}));
    let view = parse(&base.view_json);
    // The view shows what the tool will do and for whom.
    assert_eq!(view["request"]["arguments"]["value"], json!({"to": "ada"}));
    assert_eq!(view["request"]["arguments"]["bytes"], 12);
    assert_eq!(
        view["request"]["user_sha256"],
        mrtr_gate_core::digest::digest_str(USER)
    );
    assert_eq!(
        view["request"]["tenant_sha256"],
        mrtr_gate_core::digest::digest_str(TENANT)
    );
    assert_eq!(view["view"], "mrtr-gate/consent-view/v2");
    let mut digests = vec![base.view_sha256.clone()];
    // The same tool, id, round and schema for another user, another tenant, other
    // arguments, and the very same request again once the first has ended: each its own view.
    let mut others = Vec::new();
    for (user, tenant, arguments) in [
        ("mallory@example.com", TENANT, json!({"to": "ada"})),
        (USER, "tenant-b", json!({"to": "ada"})),
        (USER, TENANT, json!({"to": "eve"})),
    ] {
        let mut fresh = Fx::new();
        others.push(first_view(&mut fresh, 1, user, tenant, arguments).view_sha256);
    }
    fx.accept(1, complete()).unwrap();
    others.push(first_view(&mut fx, 1, USER, TENANT, json!({"to": "ada"})).view_sha256);
    digests.extend(others);
    let mut unique = digests.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        digests.len(),
        "every binding's view is its own: {digests:?}"
    );
}

#[test]
fn large_arguments_are_shown_by_size_and_covered_by_the_params_digest() {
    let mut fx = Fx::new();
    let big = "x".repeat(5000);
    let v = first_view(&mut fx, 1, USER, TENANT, json!({"blob": big}));
    let view = parse(&v.view_json);
    assert_eq!(view["request"]["arguments"]["value"], Value::Null);
    assert_eq!(view["request"]["arguments"]["bytes"], 5011);
    assert_eq!(view["request"]["params_sha256"].as_str().unwrap().len(), 64);
}

/// A consent provider that grants exactly what it is shown, under the receipt id it is set
/// to (a host's consent import, which picks the id the trail records).
#[derive(Clone)]
struct NamedReceipt(std::rc::Rc<std::cell::RefCell<String>>);

impl mrtr_gate_core::host::Consent for NamedReceipt {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_core::host::ConsentReceipt, mrtr_gate_core::host::HostError> {
        Ok(mrtr_gate_core::host::ConsentReceipt {
            receipt_id: self.0.borrow().clone(),
            decision: mrtr_gate_core::host::ConsentDecision::Granted,
            method: mrtr_gate_core::host::ConsentMethod::PresetAnswers,
            view_sha256: prompt.view_sha256.clone(),
            responses_sha256: prompt.responses_sha256.clone(),
        })
    }
}

/// The receipt id goes into the trail, so the host's import must name it as 1 to 128 bytes
/// of printable ASCII: an empty id, one over 128 bytes, or one with a control, space,
/// non-ASCII or bidi character is the host's fault (`consent_unavailable`), denied and
/// audited without the id, and the round stays open. 1 and 128 bytes pass.
#[test]
fn a_receipt_id_that_is_empty_too_long_or_holds_a_control_never_reaches_the_trail() {
    use mrtr_gate_core::host::Services;
    use mrtr_gate_core::{ErrorCause, Gate};
    let fx = Fx::new();
    let id = std::rc::Rc::new(std::cell::RefCell::new(String::new()));
    let mut gate = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: fx.storage.clone(),
        consent: NamedReceipt(id.clone()),
        audit: fx.audit.clone(),
    });
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    gate.accept_response(
        &server(),
        &response(1, input_required_state(json!({"a": form("A")}), "S")),
    )
    .unwrap();
    let answers = json!({"a": accept_with(form_content())});
    let long = "r".repeat(129);
    let refused = [
        String::new(),
        long.clone(),
        "receipt\n1".to_owned(),
        "receipt\u{1b}[2J".to_owned(),
        "receipt\u{7f}".to_owned(),
        "receipt\u{85}".to_owned(),
        "receipt 1".to_owned(),
        "receipt-\u{e9}".to_owned(),
        "receipt-\u{202e}1".to_owned(),
    ];
    for bad in &refused {
        *id.borrow_mut() = bad.clone();
        let d = assert_code(
            gate.build_retry(retry_request(n(1), n(2), &answers)),
            "consent_unavailable",
        );
        assert_eq!(d.error.cause(), ErrorCause::Host, "{bad:?}");
        assert!(d.audited, "{bad:?}");
        let ev = fx.last_event();
        assert_eq!(ev["event"], "rejected", "{bad:?}");
        assert_eq!(ev["cause"], "host", "{bad:?}");
        assert_eq!(ev["consent_receipt_id"], Value::Null, "{bad:?}");
    }
    assert!(
        fx.events()
            .iter()
            .all(|e| e["event"] != "consented" && e["event"] != "submitted"),
        "no refused receipt reached a consented or submitted event"
    );
    for e in fx.audit.entries() {
        for bad in refused.iter().filter(|b| b.len() > 1) {
            assert!(!e.line.contains(bad.as_str()), "{bad:?} in {}", e.line);
        }
    }
    // The round is still open: a receipt id at the 128-byte bound passes, and is recorded.
    let at_bound = format!("{}~", "!".repeat(127));
    *id.borrow_mut() = at_bound.clone();
    let retry = gate
        .build_retry(retry_request(n(1), n(2), &answers))
        .unwrap();
    assert_eq!(retry.consent_receipt_id.as_deref(), Some(at_bound.as_str()));
    for kind in ["consented", "submitted"] {
        let ev = fx
            .events_of(1)
            .into_iter()
            .find(|e| e["event"] == kind)
            .unwrap();
        assert_eq!(ev["consent_receipt_id"], at_bound.as_str(), "{kind}");
    }
    // And a one-byte id on the next round.
    gate.accept_response(
        &server(),
        &response(2, input_required(json!({"b": form("B")}))),
    )
    .unwrap();
    *id.borrow_mut() = "x".to_owned();
    let retry = gate
        .build_retry(retry_request(
            n(2),
            n(3),
            &json!({"b": {"action": "decline"}}),
        ))
        .unwrap();
    assert_eq!(retry.consent_receipt_id.as_deref(), Some("x"));
    fx.assert_chain();
}
