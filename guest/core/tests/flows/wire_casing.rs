//! Exact wire casing, `resultType` values, and malformed JSON-RPC envelopes.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::ResponseVerdict;
use serde_json::json;

#[test]
fn exact_wire_casing_is_enforced() {
    let mut fx = Fx::new();
    let variants = [
        json!({"ResultType": "input_required", "inputRequests": {"a": form("A")}}),
        json!({"resulttype": "input_required", "requestState": "s"}),
        json!({"resultType": "input_Required", "inputRequests": {"a": form("A")}}),
        json!({"resultType": "INPUT_REQUIRED", "requestState": "s"}),
        json!({"resultType": "input-required", "requestState": "s"}),
        json!({"resultType": "input_required", "InputRequests": {"a": form("A")}}),
        json!({"resultType": "input_required", "requestState": "s", "RequestState": "t"}),
        json!({"resultType": "complete", "inputrequests": {}}),
        json!({"resultType": "Complete"}),
        json!({"ResultType": "complete"}),
    ];
    for (i, result) in variants.into_iter().enumerate() {
        let id = i as i64 + 1;
        fx.register_tool(id);
        let d = assert_code(fx.accept(id, result.clone()), "invalid_result_type");
        assert!(d.audited, "{result}");
        // A protocol violation ends the binding (fail closed).
        assert_code(fx.accept(id, complete()), "no_live_request");
        assert_code(
            fx.retry(n(id), n(id + 1000), &json!({})),
            "inactive_mrtr_round",
        );
        let t = terminal_of(&fx, id);
        assert_eq!(t.len(), 1, "{result}");
        assert_eq!(t[0]["outcome"], "error");
        assert_eq!(t[0]["reason"], "invalid_result_type");
    }
    assert!(fx.storage.is_empty());
    fx.assert_chain();
}

#[test]
fn unknown_result_type_is_invalid() {
    let mut fx = Fx::new();
    for (i, rt) in [
        json!("partial"),
        json!(""),
        json!(1),
        json!(null),
        json!(["input_required"]),
        json!({"v": "complete"}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(
            fx.accept(id, json!({"resultType": rt, "requestState": "s"})),
            "invalid_result_type",
        );
    }
}

#[test]
fn absent_result_type_is_complete_and_errors_end_the_binding() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    assert_eq!(
        fx.accept(
            1,
            json!({"content": [{"type": "text", "text": "no-result-type-test-ok"}]})
        )
        .unwrap(),
        ResponseVerdict::Complete
    );
    fx.register_tool(2);
    assert_eq!(
        fx.accept(2, json!({"resultType": "complete"})).unwrap(),
        ResponseVerdict::Complete
    );
    fx.register_tool(3);
    assert_eq!(
        fx.accept_text(&error_response(3, -32602)).unwrap(),
        ResponseVerdict::Error(-32602)
    );
    // Every one of them ended its binding.
    for id in 1..=3 {
        assert_code(fx.accept(id, complete()), "no_live_request");
    }
    // Plain requests that never saw a round leave no binding trail.
    assert!(fx.events().iter().all(|e| e["event"] == "rejected"));
    assert!(fx.storage.is_empty());
}

#[test]
fn malformed_jsonrpc_envelopes_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    for text in [
        "",
        "[]",
        "null",
        "{\"jsonrpc\":\"2.0\",\"result\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} trailing",
    ] {
        assert_code(fx.accept_text(text), "malformed_response");
    }
    // Those were not attributable to the binding: it is still live.
    fx.round(1, state_only("s"));
    fx.register_tool(2);
    assert_code(
        fx.accept_text(r#"{"jsonrpc":"1.0","id":2,"result":{"resultType":"complete"}}"#),
        "malformed_response",
    );
    fx.register_tool(3);
    assert_code(
        fx.accept_text(r#"{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1}}"#),
        "malformed_response",
    );
    fx.register_tool(4);
    assert_code(
        fx.accept_text(r#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete"},"extra":1}"#),
        "malformed_response",
    );
    fx.register_tool(5);
    assert_code(
        fx.accept(
            5,
            json!({"resultType": "input_required", "requestState": "s", "surprise": 1}),
        ),
        "malformed_response",
    );
}
