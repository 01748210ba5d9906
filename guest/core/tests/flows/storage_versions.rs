//! A store that loses its data (restarted empty, flushed) or only its version counter, under
//! two gate instances each with its own record cache: the round one instance still holds
//! was used through the other, and a new binding under the same key reaches the version the
//! first one holds. The store's versions carry its life (wit/gate.wit, `storage`), so the
//! first instance's cached copy never stands for the new record: the used round is never
//! retried a second time, and the new binding's consent view is its own.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::memory::MemoryStorage;
use mrtr_gate_core::{Policy, ResponseVerdict};
use serde_json::json;

fn round_with_state(state: &str) -> serde_json::Value {
    input_required_state(json!({"a": form("A")}), state)
}

/// The attack of issue 23 (3) against the in-memory store, with `loss` as what the store
/// loses after round R was used.
fn no_second_retry_after(loss: impl Fn(&MemoryStorage)) {
    let mut fx = Fx::new();
    let mut b = fx.second_gate();
    let answers = json!({"a": {"action": "decline"}});
    // A holds round R in its cache.
    fx.register_tool(1);
    let r_view = fx.round(1, round_with_state("S1"));
    // R is used through B, and the request completes there: its binding is gone.
    let used = b
        .build_retry(retry_request(n(1), n(2), &answers))
        .unwrap_or_else(|d| panic!("B's retry of R: {d}"));
    assert_eq!(params_of(&used.request_json)["requestState"], "S1");
    assert_eq!(
        b.accept_response(&server(), &response(2, complete()))
            .unwrap(),
        ResponseVerdict::Complete
    );
    loss(&fx.storage);
    // A new request with the same id on the same server: a new binding under R's key, with
    // as many writes as R's binding had when A cached it.
    b.register(registration(
        n(1),
        &tool_params("get_weather", json!({"location": "Paris"})),
        Policy::default(),
    ))
    .unwrap_or_else(|d| panic!("the new binding: {d}"));
    let new_view = match b.accept_response(&server(), &response(1, round_with_state("S2"))) {
        Ok(ResponseVerdict::InputRequired(v)) => v,
        other => panic!("the new binding's round: {other:?}"),
    };
    assert_ne!(
        new_view.view_sha256, r_view.view_sha256,
        "the new binding's consent view is its own (a consent to R does not answer it)"
    );
    // A retries R from its cache. Whatever it gets, R is never sent a second time: either a
    // denial, or a retry of the round the store holds now.
    match fx.retry(n(1), n(3), &answers) {
        Ok(retry) => assert_eq!(
            params_of(&retry.request_json)["requestState"],
            "S2",
            "round R was retried a second time: {}",
            retry.request_json
        ),
        Err(denial) => eprintln!("A's retry denied: {denial}"),
    }
    let submitted_r = fx
        .events()
        .iter()
        .filter(|e| e["event"] == "submitted" && e["view_sha256"] == r_view.view_sha256.as_str())
        .count();
    assert_eq!(submitted_r, 1, "round R submitted exactly once");
    fx.assert_chain();
}

#[test]
fn a_store_restarted_empty_never_lets_a_used_round_be_retried_again() {
    no_second_retry_after(MemoryStorage::lose_everything);
}

#[test]
fn a_store_that_lost_its_version_counter_never_lets_a_used_round_be_retried_again() {
    no_second_retry_after(MemoryStorage::lose_counter);
}
