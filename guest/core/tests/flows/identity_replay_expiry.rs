//! Bindings held to user, tenant and arguments; replayed rounds and retries; expiry, sweeper.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{CallerOutcome, Policy, ResponseVerdict, TerminalOutcome};
use serde_json::{Value, json};

fn retry_as(
    fx: &mut Fx,
    user: &str,
    tenant: &str,
    from: i64,
    to: i64,
    responses: &Value,
) -> Result<mrtr_gate_core::Retry, mrtr_gate_core::Denial> {
    let mut r = retry_request(n(from), n(to), responses);
    r.user = user.into();
    r.tenant = tenant.into();
    fx.gate.build_retry(r)
}

#[test]
fn cross_user_retry_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let answers = json!({"a": accept_with(form_content())});
    let d = assert_code(
        retry_as(&mut fx, "mallory@example.com", TENANT, 1, 2, &answers),
        "mrtr_identity_or_argument_mismatch",
    );
    assert!(d.audited);
    assert_code(
        retry_as(&mut fx, &USER.to_uppercase(), TENANT, 1, 2, &answers),
        "mrtr_identity_or_argument_mismatch",
    );
    assert_code(
        retry_as(&mut fx, "", TENANT, 1, 2, &answers),
        "mrtr_identity_or_argument_mismatch",
    );
    let rejected = fx.last_event();
    assert_eq!(rejected["event"], "rejected");
    assert_eq!(rejected["reason"], "mrtr_identity_or_argument_mismatch");
    assert_eq!(rejected["cause"], "caller");
    // The rightful user can still answer.
    fx.retry_ok(n(1), n(2), &answers);
    assert!(
        fx.consent.prompts().len() == 1,
        "no consent is asked for a misbound retry"
    );
}

#[test]
fn cross_tenant_retry_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    assert_code(
        retry_as(&mut fx, USER, "tenant-b", 1, 2, &json!({})),
        "mrtr_identity_or_argument_mismatch",
    );
    assert_code(
        retry_as(&mut fx, USER, "tenant-a ", 1, 2, &json!({})),
        "mrtr_identity_or_argument_mismatch",
    );
    fx.retry_ok(n(1), n(2), &json!({}));
}

#[test]
fn replayed_retry_and_replayed_round_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required_state(json!({"a": form("A")}), "S"));
    let answers = json!({"a": accept_with(form_content())});
    fx.retry_ok(n(1), n(2), &answers);
    // A second retry on the same round: the state is single-use.
    assert_code(fx.retry(n(1), n(3), &answers), "inactive_mrtr_round");
    assert_code(fx.retry(n(1), n(2), &answers), "inactive_mrtr_round");
    // A retry for the new id before its round arrived.
    assert_code(fx.retry(n(2), n(3), &answers), "inactive_mrtr_round");
    // The old id's input_required replayed by the server (or an attacker).
    assert_code(
        fx.accept(1, input_required_state(json!({"a": form("A")}), "S")),
        "no_live_request",
    );
    assert_code(fx.accept(1, complete()), "no_live_request");
    // A round for an id never sent.
    assert_code(fx.accept(99, state_only("S")), "no_live_request");
    // The binding is untouched by all that and completes on the live id.
    assert_eq!(fx.accept(2, complete()).unwrap(), ResponseVerdict::Complete);
    assert_code(fx.accept(2, complete()), "no_live_request");
    assert_eq!(
        fx.events_of(1)
            .iter()
            .filter(|e| e["event"] == "submitted")
            .count(),
        1
    );
    fx.assert_chain();
}

#[test]
fn duplicate_round_on_open_id_keeps_the_first_round() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    assert_code(
        fx.accept(1, input_required(json!({"b": form("B")}))),
        "duplicate_round",
    );
    assert_code(
        fx.retry(n(1), n(2), &json!({"b": accept_with(form_content())})),
        "input_response_population_mismatch",
    );
    fx.retry_ok(n(1), n(2), &json!({"a": accept_with(form_content())}));
}

#[test]
fn expiry_denies_accept_and_retry_and_audits_expired() {
    let policy = Policy {
        round_trip_lifetime_ms: 10_000,
        ..Policy::default()
    };
    let mut fx = Fx::new();
    let reg = fx
        .register(n(1), &tool_params("t", json!({})), policy.clone())
        .unwrap();
    assert_eq!(reg.expires_at_ms, T0 + 10_000);
    fx.register(n(2), &tool_params("t", json!({})), policy.clone())
        .unwrap();
    fx.register(n(3), &tool_params("t", json!({})), policy)
        .unwrap();
    fx.round(2, state_only("s2"));
    fx.round(3, state_only("s3"));

    fx.clock.advance(10_000); // exactly the lifetime: expired
    // Binding 1: the late response finds no live request.
    let d = assert_code(fx.accept(1, state_only("late")), "no_live_request");
    assert!(d.audited);
    assert_code(fx.retry(n(1), n(11), &json!({})), "inactive_mrtr_round");
    let t1 = terminal_of(&fx, 1);
    assert_eq!(t1.len(), 1);
    assert_eq!(t1[0]["outcome"], "expired");

    // Binding 2: the retry comes too late.
    assert_code(fx.retry(n(2), n(12), &json!({})), "inactive_mrtr_round");
    assert_code(fx.accept(2, complete()), "no_live_request");
    let t2 = terminal_of(&fx, 2);
    assert_eq!(t2.len(), 1);
    assert_eq!(t2[0]["outcome"], "expired");

    // Binding 3: the sweeper ends it.
    assert_eq!(fx.gate.expire_stale().unwrap(), 1);
    assert_eq!(fx.gate.expire_stale().unwrap(), 0);
    let t3 = terminal_of(&fx, 3);
    assert_eq!(t3.len(), 1);
    assert_eq!(t3[0]["outcome"], "expired");
    assert_code(fx.retry(n(3), n(13), &json!({})), "inactive_mrtr_round");

    assert!(fx.storage.is_empty());
    fx.assert_chain();
}

#[test]
fn sweep_within_the_grace_records_the_expiry() {
    let mut fx = Fx::new();
    let policy = Policy {
        round_trip_lifetime_ms: 10_000,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), policy)
        .unwrap();
    fx.round(1, input_required(json!({"a": form("A")})));
    // Expired, but still held for the grace period so its end can be audited.
    fx.clock
        .advance(10_000 + mrtr_gate_core::EXPIRY_GRACE_MS - 1);
    assert!(!fx.storage.is_empty());
    assert_eq!(fx.second_gate().expire_stale().unwrap(), 1);
    assert_eq!(terminal_of(&fx, 1)[0]["outcome"], "expired");
    assert!(fx.storage.is_empty());
    fx.assert_chain();
}

#[test]
fn one_millisecond_before_expiry_is_still_live() {
    let mut fx = Fx::new();
    let policy = Policy {
        round_trip_lifetime_ms: 10_000,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), policy)
        .unwrap();
    fx.clock.advance(9_999);
    fx.round(1, state_only("s"));
    fx.retry_ok(n(1), n(2), &json!({}));
    fx.clock.advance(1);
    assert_code(fx.accept(2, complete()), "no_live_request");
    assert_eq!(terminal_of(&fx, 1)[0]["outcome"], "expired");
}

#[test]
fn finish_cancels_and_reports_expired_when_late() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    assert_eq!(
        fx.gate
            .finish(finish_request(n(1), CallerOutcome::Cancelled))
            .unwrap(),
        TerminalOutcome::Cancelled
    );
    assert_code(fx.retry(n(1), n(2), &json!({})), "inactive_mrtr_round");
    assert_code(
        fx.gate
            .finish(finish_request(n(1), CallerOutcome::Cancelled)),
        "unknown_request",
    );
    assert_eq!(terminal_of(&fx, 1)[0]["outcome"], "cancelled");

    fx.register_tool(3);
    fx.round(3, state_only("s"));
    fx.clock.advance(Policy::default().round_trip_lifetime_ms);
    assert_eq!(
        fx.gate
            .finish(finish_request(
                n(3),
                CallerOutcome::Error("transport_closed".into())
            ))
            .unwrap(),
        TerminalOutcome::Expired
    );
    assert_eq!(terminal_of(&fx, 3)[0]["outcome"], "expired");
}

/// A plain request that saw no round leaves no trail when it is cancelled, but one the caller
/// ends with an error is on record with the reason: a host adapter that refused the server's
/// first answer (a second response in the stream, say) is visible in the trail.
#[test]
fn finish_with_an_error_before_any_round_is_audited_and_a_cancel_is_not() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    assert_eq!(
        fx.gate
            .finish(finish_request(n(1), CallerOutcome::Cancelled))
            .unwrap(),
        TerminalOutcome::Cancelled
    );
    assert!(fx.events().is_empty());

    fx.register_tool(2);
    assert_eq!(
        fx.gate
            .finish(finish_request(
                n(2),
                CallerOutcome::Error("duplicate_response".into())
            ))
            .unwrap(),
        TerminalOutcome::Error
    );
    let events = fx.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "terminal");
    assert_eq!(events[0]["outcome"], "error");
    assert_eq!(events[0]["reason"], "duplicate_response");
    assert_eq!(events[0]["request_id"], 2);
    assert_eq!(events[0]["round"], 0);
    fx.assert_reconciles();
}

#[test]
fn finish_is_refused_to_another_user_or_tenant_and_audited() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    let mut other_user = finish_request(n(1), CallerOutcome::Cancelled);
    other_user.user = "mallory@example.com".into();
    let d = assert_code(
        fx.gate.finish(other_user),
        "mrtr_identity_or_argument_mismatch",
    );
    assert!(d.audited, "the attempt is in the trail");
    let mut other_tenant = finish_request(n(1), CallerOutcome::Cancelled);
    other_tenant.tenant = "tenant-b".into();
    assert_code(
        fx.gate.finish(other_tenant),
        "mrtr_identity_or_argument_mismatch",
    );
    // The binding goes on for its own user: no terminal event was written.
    assert!(terminal_of(&fx, 1).is_empty());
    fx.retry_ok(n(1), n(2), &json!({}));
    // Not even an expired binding is ended on another user's behalf.
    fx.clock.advance(Policy::default().round_trip_lifetime_ms);
    let mut late = finish_request(n(2), CallerOutcome::Cancelled);
    late.user = "mallory@example.com".into();
    assert_code(fx.gate.finish(late), "mrtr_identity_or_argument_mismatch");
    assert!(terminal_of(&fx, 1).is_empty());
    assert_eq!(
        fx.gate
            .finish(finish_request(n(2), CallerOutcome::Cancelled))
            .unwrap(),
        TerminalOutcome::Expired
    );
    fx.assert_chain();
}

/// A URL round is completed by the user who started the request, or not at all: another
/// user (or tenant) accepting it is refused and audited before any consent is asked, and
/// the round stays open for its own user (AISVS C10 10.4.18, the client's half).
#[test]
fn a_url_round_is_completed_only_by_the_user_who_started_it() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let url = "https://auth.example.com/connect?flow=7";
    fx.round(1, input_required(json!({"login": url_request(url)})));
    let accept = json!({"login": {"action": "accept"}});
    for (user, tenant) in [("mallory@example.com", TENANT), (USER, "tenant-b")] {
        let d = assert_code(
            retry_as(&mut fx, user, tenant, 1, 2, &accept),
            "mrtr_identity_or_argument_mismatch",
        );
        assert!(d.audited);
    }
    assert!(fx.consent.prompts().is_empty(), "no consent was asked");
    let retry = fx.retry_ok(n(1), n(2), &accept);
    assert_eq!(
        params_of(&retry.request_json)["inputResponses"],
        json!({"login": {"action": "accept"}})
    );
    fx.assert_chain();
}
