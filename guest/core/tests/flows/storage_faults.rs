//! Storage faults (lost compare-and-swap, failing store), and two gate instances over one store.

use crate::common::*;
use crate::support::*;
use mrtr_gate_core::{CallerOutcome, Policy, ResponseVerdict, TerminalOutcome};
use serde_json::json;

#[test]
fn lost_compare_and_swap_is_refused_everywhere() {
    let mut fx = Fx::new();
    // Register: the id reservation loses.
    fx.storage.set_losing_cas(true);
    assert_code(
        fx.register(n(1), &tool_params("t", json!({})), Policy::default()),
        "request_id_in_use",
    );
    fx.storage.set_losing_cas(false);
    assert!(fx.storage.is_empty());

    // Accept: opening the round loses.
    fx.register_tool(1);
    fx.storage.set_losing_cas(true);
    let d = assert_code(fx.accept(1, state_only("s")), "state_already_used");
    assert!(d.audited);
    fx.storage.set_losing_cas(false);
    // The binding is as it was: the same round can be accepted now.
    fx.round(1, state_only("s"));

    // Retry: reserving the retry id loses (reported as a retry id that is not new).
    fx.storage.set_losing_cas(true);
    assert_code(
        fx.retry(n(1), n(2), &json!({})),
        "retry_requires_new_jsonrpc_id",
    );
    fx.storage.set_losing_cas(false);
    // Nothing was consumed.
    fx.retry_ok(n(1), n(2), &json!({}));

    // Finish: removing the binding loses.
    fx.storage.set_losing_cas(true);
    assert_code(
        fx.gate.finish(&n(2), CallerOutcome::Cancelled),
        "state_already_used",
    );
    fx.storage.set_losing_cas(false);
    assert_eq!(
        fx.gate.finish(&n(2), CallerOutcome::Cancelled).unwrap(),
        TerminalOutcome::Cancelled
    );
    assert_eq!(terminal_of(&fx, 1).len(), 1);
}

#[test]
fn failing_storage_is_refused() {
    let mut fx = Fx::new();
    fx.storage.set_failing(true);
    assert_code(
        fx.register(n(1), &tool_params("t", json!({})), Policy::default()),
        "storage_failed",
    );
    fx.storage.set_failing(false);
    fx.register_tool(1);
    fx.storage.set_failing(true);
    assert_code(fx.accept(1, state_only("s")), "storage_failed");
    fx.storage.set_failing(false);
    fx.round(1, state_only("s"));
    fx.storage.set_failing(true);
    assert_code(fx.retry(n(1), n(2), &json!({})), "storage_failed");
    assert!(fx.gate.expire_stale().is_err());
    fx.storage.set_failing(false);
    fx.retry_ok(n(1), n(2), &json!({}));
}

#[test]
fn two_instances_share_bindings_and_never_both_consume_a_round() {
    let mut fx = Fx::new();
    let mut other = fx.second_gate();
    fx.register_tool(1);
    // The round arrives at the other instance.
    assert!(matches!(
        other.accept_response(
            &server(),
            &response(1, input_required_state(json!({"a": form("A")}), "S"))
        ),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let answers = json!({"a": {"action": "decline"}});
    fx.retry_ok(n(1), n(2), &answers);
    assert_code(
        other.build_retry(retry_request(n(1), n(3), &answers)),
        "inactive_mrtr_round",
    );
    // Registering an id live in the other instance is refused.
    assert_code(
        other.register(registration(
            n(2),
            &tool_params("t", json!({})),
            Policy::default(),
        )),
        "request_id_in_use",
    );
    assert_eq!(
        other
            .accept_response(&server(), &response(2, complete()))
            .unwrap(),
        ResponseVerdict::Complete
    );
    // Both instances wrote to one chain.
    fx.assert_chain();
    // The late second retry was denied (and audited as such); one round, one submission.
    assert_eq!(
        kinds(&fx.events_of(1)),
        ["received", "consented", "submitted", "rejected", "terminal"]
    );
    let rejected = &fx.events_of(1)[3];
    assert_eq!(rejected["reason"], "inactive_mrtr_round");
    assert_eq!(rejected["retry_id"], 3);
}
