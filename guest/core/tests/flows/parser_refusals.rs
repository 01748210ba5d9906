//! Parser-level refusals: duplicate keys, bad requestState, empty or oversized responses.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::Policy;
use serde_json::json;

#[test]
fn duplicate_json_keys_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","resultType":"input_required","requestState":"s"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{"resultType":"complete"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"a","requestState":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","method":"roots/list"}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"a","requestStat\u0065":"b"}}"#,
    ] {
        let d = assert_code(fx.accept_text(text), "duplicate_json_key");
        assert!(d.audited);
    }
    // The binding was not touched.
    fx.round(1, input_required(json!({"a": form("A")})));
    // Duplicate keys in the caller's answers.
    let mut r = retry_request(n(1), n(2), &json!({}));
    r.responses_json =
        r#"{"a":{"action":"decline","action":"accept","content":{"login":"x"}}}"#.into();
    assert_code(fx.gate.build_retry(r), "invalid_input_response");
}

#[test]
fn empty_and_oversized_request_state_is_refused() {
    let mut fx = Fx::new();
    let policy = Policy {
        max_request_state_bytes: 16,
        ..Policy::default()
    };
    let p = tool_params("t", json!({}));
    let mut id = 0;
    let mut next = |fx: &mut Fx| {
        id += 1;
        fx.register(n(id), &p, policy.clone()).unwrap();
        id
    };
    let i = next(&mut fx);
    assert_code(fx.accept(i, state_only("")), "invalid_requestState");
    let i = next(&mut fx);
    assert_code(
        fx.accept(i, input_required_state(json!({"a": form("A")}), "")),
        "invalid_requestState",
    );
    let i = next(&mut fx);
    assert_code(
        fx.accept(i, state_only(&"x".repeat(17))),
        "invalid_requestState",
    );
    let i = next(&mut fx);
    // The limit counts bytes, not characters.
    assert_code(
        fx.accept(i, state_only(&"é".repeat(9))),
        "invalid_requestState",
    );
    let i = next(&mut fx);
    assert_code(
        fx.accept(
            i,
            json!({"resultType": "input_required", "requestState": 5}),
        ),
        "invalid_requestState",
    );
    let i = next(&mut fx);
    assert_code(
        fx.accept(
            i,
            json!({"resultType": "input_required", "requestState": null}),
        ),
        "invalid_requestState",
    );
    let i = next(&mut fx);
    fx.round(i, state_only(&"x".repeat(16)));
    let i = next(&mut fx);
    fx.round(i, state_only(&"é".repeat(8)));
}

#[test]
fn input_required_with_neither_field_is_refused() {
    let mut fx = Fx::new();
    for (i, result) in [
        json!({"resultType": "input_required"}),
        json!({"resultType": "input_required", "inputRequests": {}}),
        json!({"resultType": "input_required", "_meta": {"x": 1}}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(fx.accept(id, result), "input_required_payload_empty");
        assert_code(fx.accept(id, complete()), "no_live_request");
    }
}

#[test]
fn oversized_and_deep_rounds_are_refused() {
    // A complete result is the user's, not the gate's: it passes however large or deep
    // (exact_json.rs); a round is read whole, under the strict limits.
    let mut fx = Fx::new();
    fx.register_tool(1);
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"input_required","requestState":"s","x":{}1{}}}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    assert_code(fx.accept_text(&deep), "limit_exceeded");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"input_required","requestState":"s","x":"{}"}}}}"#,
        "a".repeat(5 << 20)
    );
    assert_code(fx.accept_text(&big), "limit_exceeded");
    fx.round(1, state_only("s"));
}

/// The hard cap on input requests in one round, at its boundary: `MAX_INPUT_REQUESTS` pass
/// (each key in the view), one more is the server's `limit_exceeded` and ends the binding.
#[test]
fn a_round_of_exactly_the_input_request_cap_passes_and_one_more_is_refused() {
    use mrtr_gate_core::{ErrorCause, limits::MAX_INPUT_REQUESTS};
    let requests = |count: usize| {
        let map: serde_json::Map<String, serde_json::Value> = (0..count)
            .map(|i| (format!("k{i:02}"), form("A")))
            .collect();
        input_required(serde_json::Value::Object(map))
    };
    let mut fx = Fx::new();
    fx.register_tool(1);
    let d = assert_code(
        fx.accept(1, requests(MAX_INPUT_REQUESTS + 1)),
        "limit_exceeded",
    );
    assert_eq!(d.error.cause(), ErrorCause::Peer);
    assert!(d.audited);
    // The round named the live binding: it is ended, and nothing later reaches it.
    let t = terminal_of(&fx, 1);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["reason"], "limit_exceeded");
    assert_code(fx.accept(1, complete()), "no_live_request");

    fx.register_tool(2);
    let view = fx.round(2, requests(MAX_INPUT_REQUESTS));
    let keys = &parse(&view.view_json)["inputs"];
    assert_eq!(keys.as_array().map(Vec::len), Some(MAX_INPUT_REQUESTS));
    let answers: serde_json::Map<String, serde_json::Value> = (0..MAX_INPUT_REQUESTS)
        .map(|i| (format!("k{i:02}"), json!({"action": "decline"})))
        .collect();
    fx.retry_ok(n(2), n(3), &serde_json::Value::Object(answers));
    fx.assert_chain();
}
