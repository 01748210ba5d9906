//! Native end-to-end flows of the gate (AID-H-028.007 G001/G002 independent verification):
//! every denial is asserted by its stable code.
#![cfg(test)]

mod common;

use common::*;
use mrtr_gate_core::audit::{FIELDS, verify_chain};
use mrtr_gate_core::digest::digest_str;
use mrtr_gate_core::host::{AppendOutcome, Audit, AuditEntry, ChainHead, HostError, Services};
use mrtr_gate_core::memory::{
    AuditFault, ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{
    CallerOutcome, DeprecatedMethod, Gate, Policy, Registration, RequestId, ResponseVerdict,
    ServerIdentity, TerminalOutcome,
};
use serde_json::{Value, json};
use std::sync::Arc;

fn n(i: i64) -> RequestId {
    RequestId::Number(i)
}

fn s(v: &str) -> RequestId {
    RequestId::Text(v.into())
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn params_of(retry_json: &str) -> serde_json::Map<String, Value> {
    parse(retry_json)["params"]
        .as_object()
        .cloned()
        .expect("params object")
}

fn terminal_of(fx: &Fx, original: impl Into<Value>) -> Vec<Value> {
    fx.events_of(original)
        .into_iter()
        .filter(|e| e["event"] == "terminal")
        .collect()
}

// ---------------------------------------------------------------------------------------
// Form, URL, requestState
// ---------------------------------------------------------------------------------------

#[test]
fn form_mode_with_omitted_mode_end_to_end() {
    let mut fx = Fx::new();
    let reg = fx.register_tool(1);
    let sent = parse(&reg.request_json);
    assert_eq!(sent["jsonrpc"], "2.0");
    assert_eq!(sent["id"], 1);
    assert_eq!(sent["method"], "tools/call");
    assert_eq!(sent["params"]["_meta"], meta());

    let view = fx.round(1, input_required(json!({"github": form("Who are you?")})));
    assert_eq!(view.round, 1);
    assert_eq!(view.input_keys, vec!["github".to_owned()]);
    assert_eq!(view.request_state_sha256, None);
    // The consent view shows the verified server, the method/name, the fields and the effect.
    let shown = parse(&view.view_json);
    assert_eq!(shown["server"], SERVER);
    assert_eq!(shown["request"]["method"], "tools/call");
    assert_eq!(shown["request"]["name"], "get_weather");
    assert_eq!(shown["inputs"][0]["kind"], "form");
    assert_eq!(shown["inputs"][0]["fields"].as_array().unwrap().len(), 3);
    assert_eq!(shown["state"]["present"], false);
    assert!(!shown["effects"].as_array().unwrap().is_empty());

    let answers = json!({"github": accept_with(form_content())});
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(retry.round, 1);
    let msg = parse(&retry.request_json);
    assert_eq!(msg["jsonrpc"], "2.0");
    assert_eq!(msg["id"], 2);
    assert_eq!(msg["method"], "tools/call");
    let params = params_of(&retry.request_json);
    assert_eq!(params["name"], "get_weather");
    assert_eq!(params["arguments"], json!({"location": "Paris"}));
    assert_eq!(params["_meta"], meta());
    assert_eq!(params["inputResponses"], answers);
    assert!(
        !params.contains_key("requestState"),
        "no state was sent, none may be echoed"
    );

    // The consent prompt carried exactly this view and these answers.
    let prompts = fx.consent.prompts();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].view_json, view.view_json);
    assert_eq!(prompts[0].view_sha256, view.view_sha256);
    assert_eq!(parse(&prompts[0].responses_json), answers);

    assert_eq!(fx.accept(2, complete()).unwrap(), ResponseVerdict::Complete);
    assert_eq!(
        kinds(&fx.events_of(1)),
        ["received", "consented", "submitted", "terminal"]
    );
    let terminal = fx.last_event();
    assert_eq!(terminal["outcome"], "complete");
    assert!(
        fx.storage.is_empty(),
        "a finished binding leaves nothing in storage"
    );
    fx.assert_chain();
}

#[test]
fn form_mode_with_explicit_mode_and_every_action() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let view = fx.round(
        1,
        input_required(json!({
            "a": form_request(Some("form"), "A", form_schema()),
            "b": form_request(Some("form"), "B", form_schema()),
            "c": form_request(None, "C", form_schema()),
        })),
    );
    assert_eq!(view.input_keys, ["a", "b", "c"]);
    let answers = json!({
        "a": accept_with(form_content()),
        "b": {"action": "decline"},
        "c": {"action": "cancel"},
    });
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(params_of(&retry.request_json)["inputResponses"], answers);
}

#[test]
fn non_accept_with_content_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let d = assert_code(
        fx.retry(
            n(1),
            n(2),
            &json!({"a": {"action": "decline", "content": form_content()}}),
        ),
        "non_accept_response_must_not_have_content",
    );
    assert!(d.audited);
    assert_code(
        fx.retry(n(1), n(2), &json!({"a": {"action": "maybe"}})),
        "invalid_input_response",
    );
    assert_code(
        fx.retry(n(1), n(2), &json!({"a": "accept"})),
        "invalid_input_response",
    );
    assert_code(fx.retry(n(1), n(2), &json!([])), "invalid_input_response");
    // The round is still open after every refusal.
    fx.retry_ok(n(1), n(2), &json!({"a": accept_with(form_content())}));
}

#[test]
fn url_mode_end_to_end() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let url = "https://auth.example.com/oauth/authorize?client=abc";
    let view = fx.round(1, input_required(json!({"login": url_request(url)})));
    let shown = parse(&view.view_json);
    assert_eq!(shown["inputs"][0]["kind"], "url");
    assert_eq!(shown["inputs"][0]["url"]["full"], url);
    assert_eq!(shown["inputs"][0]["url"]["ascii_host"], "auth.example.com");
    assert_eq!(shown["inputs"][0]["url"]["has_query"], true);

    assert_code(
        fx.retry(
            n(1),
            n(2),
            &json!({"login": {"action": "accept", "content": {"x": "y"}}}),
        ),
        "url_elicitation_response_must_not_have_content",
    );
    let retry = fx.retry_ok(n(1), n(2), &json!({"login": {"action": "accept"}}));
    let params = params_of(&retry.request_json);
    assert_eq!(
        params["inputResponses"],
        json!({"login": {"action": "accept"}})
    );
    assert!(!params.contains_key("requestState"));
}

#[test]
fn unsafe_urls_and_unknown_modes_are_refused() {
    let mut fx = Fx::new();
    for (i, url) in [
        "http://auth.example.com/",
        "https://user:pw@auth.example.com/",
        "javascript:alert(1)",
        "https:///auth.example.com",
        "https://auth.exa\tmple.com/",
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(
            fx.accept(id, input_required(json!({"u": url_request(url)}))),
            "unsafe_url_elicitation",
        );
    }
    fx.register_tool(100);
    let weird = json!({"method": "elicitation/create", "params": {"mode": "Form", "message": "m", "requestedSchema": form_schema()}});
    assert_code(
        fx.accept(100, input_required(json!({"w": weird}))),
        "unknown_elicitation_mode",
    );
}

#[test]
fn request_state_only_round_echoes_state_without_input_responses() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let state = "eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9";
    let view = fx.round(1, state_only(state));
    assert!(view.input_keys.is_empty());
    assert_eq!(
        view.request_state_sha256.as_deref(),
        Some(digest_str(state).as_str())
    );
    let retry = fx.retry_ok(n(1), n(2), &json!({}));
    let params = params_of(&retry.request_json);
    assert_eq!(params["requestState"], state);
    assert!(!params.contains_key("inputResponses"));
    // Any response to a state-only round is extra.
    fx.register_tool(3);
    fx.round(3, state_only(state));
    assert_code(
        fx.retry(n(3), n(4), &json!({"x": {"action": "accept"}})),
        "input_response_population_mismatch",
    );
}

#[test]
fn request_state_is_echoed_byte_exact() {
    let states = [
        "plain-ascii-state",
        "héllo wörld — 日本語テキスト 🎉🦀 \u{10FFFF}",
        "{\"nonce\":\"6f1c\",\"originalId\":2}",
        "\"quoted\" \\back\\slash\\ /slash/ \n\r\t\u{8}\u{c} \u{1}\u{1f}\u{7f} \u{2028}\u{2029} </script> \\u0000",
        "   leading and trailing spaces   ",
        "\u{feff}BOM-led\u{200b}zero-width",
        "\\\\\\\\\"\"\"\"",
    ];
    let mut fx = Fx::new();
    for (i, state) in states.iter().enumerate() {
        let id = (i as i64) * 10 + 1;
        fx.register_tool(id);
        let view = fx.round(id, state_only(state));
        assert_eq!(view.request_state_sha256, Some(digest_str(state)));
        let retry = fx.retry_ok(n(id), n(id + 1), &json!({}));
        let params = params_of(&retry.request_json);
        assert_eq!(params["requestState"].as_str(), Some(*state), "state #{i}");
        assert_eq!(
            params["requestState"].as_str().unwrap().as_bytes(),
            state.as_bytes()
        );
    }
    // The same state written with escapes on the wire: the decoded string is echoed.
    fx.register_tool(500);
    let text = r#"{"jsonrpc":"2.0","id":500,"result":{"resultType":"input_required","requestState":"\u00e9\u0041\ud83e\udd80\"\/"}}"#;
    assert!(matches!(
        fx.accept_text(text),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let retry = fx.retry_ok(n(500), n(501), &json!({}));
    assert_eq!(params_of(&retry.request_json)["requestState"], "éA🦀\"/");
}

#[test]
fn combined_requests_and_state() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let state = "opaque-🙂-state";
    let view = fx.round(
        1,
        input_required_state(
            json!({"login": url_request("https://auth.example.com/"), "details": form("Details")}),
            state,
        ),
    );
    assert_eq!(view.input_keys, ["details", "login"]);
    assert_eq!(parse(&view.view_json)["state"]["present"], true);
    let answers = json!({"details": accept_with(form_content()), "login": {"action": "accept"}});
    let retry = fx.retry_ok(n(1), s("retry-1"), &answers);
    let msg = parse(&retry.request_json);
    assert_eq!(msg["id"], "retry-1");
    assert_eq!(msg["params"]["inputResponses"], answers);
    assert_eq!(msg["params"]["requestState"], state);
    assert_eq!(
        fx.accept("retry-1", complete()).unwrap(),
        ResponseVerdict::Complete
    );
}

#[test]
fn each_retry_has_a_new_id_and_no_stale_fields() {
    let mut fx = Fx::new();
    let params = tool_params("deploy", json!({"env": "prod", "n": 1}));
    fx.register(n(1), &params, Policy::default()).unwrap();

    // Round 1: inputs a + state S1.
    fx.round(1, input_required_state(json!({"a": form("A")}), "S1"));
    assert_code(
        fx.retry(n(1), n(1), &json!({"a": {"action": "cancel"}})),
        "retry_requires_new_jsonrpc_id",
    );
    let r1 = fx.retry_ok(n(1), n(2), &json!({"a": accept_with(form_content())}));
    let p1 = params_of(&r1.request_json);
    assert_eq!(p1["requestState"], "S1");
    assert_eq!(
        p1["inputResponses"],
        json!({"a": accept_with(form_content())})
    );

    // Round 2 (on the retry's id): inputs b only, no state.
    let v2 = fx.round(
        2,
        input_required(json!({"b": url_request("https://b.example.com/")})),
    );
    assert_eq!(v2.round, 2);
    // The original id and the round-1 id are both spent.
    assert_code(
        fx.retry(n(2), n(1), &json!({"b": {"action": "accept"}})),
        "retry_requires_new_jsonrpc_id",
    );
    assert_code(
        fx.retry(n(2), n(2), &json!({"b": {"action": "accept"}})),
        "retry_requires_new_jsonrpc_id",
    );
    let r2 = fx.retry_ok(n(2), s("three"), &json!({"b": {"action": "accept"}}));
    let p2 = params_of(&r2.request_json);
    assert_eq!(p2["inputResponses"], json!({"b": {"action": "accept"}}));
    assert!(
        !p2.contains_key("requestState"),
        "round 1's state must not be carried along"
    );
    assert_eq!(r2.round, 2);

    // Round 3: state only.
    fx.round("three", state_only("S3"));
    let r3 = fx.retry_ok(s("three"), n(4), &json!({}));
    let p3 = params_of(&r3.request_json);
    assert!(
        !p3.contains_key("inputResponses"),
        "round 2's answers must not be carried along"
    );
    assert_eq!(p3["requestState"], "S3");

    // Every retry is built from the original params.
    for p in [&p1, &p2, &p3] {
        let mut rest = (*p).clone();
        rest.remove("inputResponses");
        rest.remove("requestState");
        assert_eq!(Value::Object(rest), params);
    }
    assert_eq!(fx.accept(4, complete()).unwrap(), ResponseVerdict::Complete);
    let ids: Vec<Value> = [&r1, &r2, &r3]
        .iter()
        .map(|r| parse(&r.request_json)["id"].clone())
        .collect();
    assert_eq!(ids, [json!(2), json!("three"), json!(4)]);
}

#[test]
fn retry_id_live_in_another_binding_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.register_tool(2);
    fx.round(1, state_only("x"));
    assert_code(
        fx.retry(n(1), n(2), &json!({})),
        "retry_requires_new_jsonrpc_id",
    );
    assert_code(
        fx.retry(n(1), s(""), &json!({})),
        "retry_requires_new_jsonrpc_id",
    );
    fx.retry_ok(n(1), n(3), &json!({}));
}

#[test]
fn number_and_string_ids_are_different_ids() {
    let mut fx = Fx::new();
    fx.register_tool(7);
    assert_code(fx.accept("7", state_only("x")), "no_live_request");
    assert_code(fx.accept(7.0, state_only("x")), "malformed_response");
    fx.round(7, state_only("x"));
}

// ---------------------------------------------------------------------------------------
// Exact wire casing, resultType
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Identity, arguments, replay, expiry
// ---------------------------------------------------------------------------------------

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
        fx.gate.finish(&n(1), CallerOutcome::Cancelled).unwrap(),
        TerminalOutcome::Cancelled
    );
    assert_code(fx.retry(n(1), n(2), &json!({})), "inactive_mrtr_round");
    assert_code(
        fx.gate.finish(&n(1), CallerOutcome::Cancelled),
        "unknown_request",
    );
    assert_eq!(terminal_of(&fx, 1)[0]["outcome"], "cancelled");

    fx.register_tool(3);
    fx.round(3, state_only("s"));
    fx.clock.advance(Policy::default().round_trip_lifetime_ms);
    assert_eq!(
        fx.gate
            .finish(&n(3), CallerOutcome::Error("transport_closed".into()))
            .unwrap(),
        TerminalOutcome::Expired
    );
    assert_eq!(terminal_of(&fx, 3)[0]["outcome"], "expired");
}

// ---------------------------------------------------------------------------------------
// Deprecated requests and capabilities
// ---------------------------------------------------------------------------------------

fn roots_request() -> Value {
    json!({"method": "roots/list"})
}

fn sampling_request(tools: bool) -> Value {
    let mut p = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
        "maxTokens": 100,
        "systemPrompt": "be brief"
    });
    if tools {
        p["tools"] = json!([{"name": "calc", "inputSchema": {"type": "object"}}]);
    }
    json!({"method": "sampling/createMessage", "params": p})
}

fn all_caps() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "roots": {}, "sampling": {}})
}

#[test]
fn unapproved_roots_and_sampling_are_refused() {
    let mut fx = Fx::new();
    let params = tool_params_caps("t", json!({}), all_caps());
    for (i, req) in [
        roots_request(),
        sampling_request(false),
        json!({"method": "ping"}),
        json!({"method": "tools/call", "params": {"name": "x"}}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register(n(id), &params, Policy::default()).unwrap();
        assert_code(
            fx.accept(id, input_required(json!({"r": req}))),
            "unapproved_deprecated_client_request",
        );
        assert_code(fx.accept(id, complete()), "no_live_request");
    }
    // Approving roots does not approve sampling.
    let only_roots = Policy {
        allowed_deprecated: vec![DeprecatedMethod::RootsList],
        ..Policy::default()
    };
    fx.register(n(10), &params, only_roots).unwrap();
    assert_code(
        fx.accept(10, input_required(json!({"s": sampling_request(false)}))),
        "unapproved_deprecated_client_request",
    );
}

#[test]
fn approved_and_declared_roots_and_sampling_work_end_to_end() {
    let mut fx = Fx::new();
    let policy = Policy {
        allowed_deprecated: vec![
            DeprecatedMethod::RootsList,
            DeprecatedMethod::SamplingCreateMessage,
        ],
        policy_version: "p-2026-07".into(),
        ..Policy::default()
    };
    let params = tool_params_caps("t", json!({"q": 1}), all_caps());
    fx.register(n(1), &params, policy).unwrap();
    let view = fx.round(
        1,
        input_required(json!({"roots": roots_request(), "llm": sampling_request(false)})),
    );
    let shown = parse(&view.view_json);
    assert_eq!(shown["inputs"][0]["kind"], "sampling");
    assert_eq!(shown["inputs"][0]["deprecated"], true);
    assert_eq!(shown["inputs"][1]["kind"], "roots");

    let roots = json!({"roots": [{"uri": "file:///home/alice/project", "name": "project"}]});
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "Short."}, "model": "m-1", "stopReason": "endTurn"});
    // Wrong shapes are refused.
    assert_code(
        fx.retry(
            n(1),
            n(2),
            &json!({"roots": {"roots": [{"uri": "https://x.example/"}]}, "llm": sampled}),
        ),
        "invalid_input_response",
    );
    assert_code(
        fx.retry(
            n(1),
            n(2),
            &json!({"roots": roots, "llm": {"action": "accept"}}),
        ),
        "invalid_input_response",
    );
    assert_code(
        fx.retry(
            n(1),
            n(2),
            &json!({"roots": roots, "llm": {"role": "assistant", "content": [], "model": "m"}}),
        ),
        "invalid_input_response",
    );
    let answers = json!({"roots": roots, "llm": sampled});
    let retry = fx.retry_ok(n(1), n(2), &answers);
    assert_eq!(params_of(&retry.request_json)["inputResponses"], answers);
    assert_eq!(fx.accept(2, complete()).unwrap(), ResponseVerdict::Complete);
    let received = fx
        .events_of(1)
        .into_iter()
        .find(|e| e["event"] == "received")
        .unwrap();
    assert_eq!(
        received["input_kinds"],
        json!({"llm": "sampling", "roots": "roots"})
    );
    assert_eq!(received["policy_version"], "p-2026-07");
}

#[test]
fn approved_but_undeclared_capabilities_are_refused() {
    let mut fx = Fx::new();
    let policy = Policy {
        allowed_deprecated: vec![
            DeprecatedMethod::RootsList,
            DeprecatedMethod::SamplingCreateMessage,
        ],
        ..Policy::default()
    };
    let no_caps = tool_params_caps("t", json!({}), json!({"elicitation": {"form": {}}}));
    fx.register(n(1), &no_caps, policy.clone()).unwrap();
    assert_code(
        fx.accept(1, input_required(json!({"r": roots_request()}))),
        "undeclared_capability",
    );
    fx.register(n(2), &no_caps, policy.clone()).unwrap();
    assert_code(
        fx.accept(2, input_required(json!({"s": sampling_request(false)}))),
        "undeclared_capability",
    );
    // sampling declared, sampling.tools not: a tool-enabled sampling request is refused.
    let sampling = tool_params_caps("t", json!({}), json!({"sampling": {}}));
    fx.register(n(3), &sampling, policy.clone()).unwrap();
    assert_code(
        fx.accept(3, input_required(json!({"s": sampling_request(true)}))),
        "undeclared_capability",
    );
    let sampling_tools = tool_params_caps("t", json!({}), json!({"sampling": {"tools": {}}}));
    fx.register(n(4), &sampling_tools, policy).unwrap();
    fx.round(4, input_required(json!({"s": sampling_request(true)})));
}

#[test]
fn undeclared_elicitation_modes_are_refused() {
    let mut fx = Fx::new();
    // No capabilities at all.
    fx.register(
        n(1),
        &tool_params_caps("t", json!({}), json!({})),
        Policy::default(),
    )
    .unwrap();
    assert_code(
        fx.accept(1, input_required(json!({"a": form("A")}))),
        "undeclared_capability",
    );
    // No `_meta` at all.
    fx.register(
        n(2),
        &json!({"name": "t", "arguments": {}}),
        Policy::default(),
    )
    .unwrap();
    assert_code(
        fx.accept(2, input_required(json!({"a": form("A")}))),
        "undeclared_capability",
    );
    // Form only: url is undeclared.
    fx.register(
        n(3),
        &tool_params_caps("t", json!({}), json!({"elicitation": {"form": {}}})),
        Policy::default(),
    )
    .unwrap();
    assert_code(
        fx.accept(
            3,
            input_required(json!({"u": url_request("https://x.example.com/")})),
        ),
        "undeclared_capability",
    );
    // Url only: form is undeclared.
    fx.register(
        n(4),
        &tool_params_caps("t", json!({}), json!({"elicitation": {"url": {}}})),
        Policy::default(),
    )
    .unwrap();
    assert_code(
        fx.accept(4, input_required(json!({"a": form("A")}))),
        "undeclared_capability",
    );
    // `elicitation: {}` is form only.
    fx.register(
        n(5),
        &tool_params_caps("t", json!({}), json!({"elicitation": {}})),
        Policy::default(),
    )
    .unwrap();
    fx.round(5, input_required(json!({"a": form("A")})));
    fx.register(
        n(6),
        &tool_params_caps("t", json!({}), json!({"elicitation": {}})),
        Policy::default(),
    )
    .unwrap();
    assert_code(
        fx.accept(
            6,
            input_required(json!({"u": url_request("https://x.example.com/")})),
        ),
        "undeclared_capability",
    );
    // A state-only round needs no capability.
    fx.register(
        n(7),
        &tool_params_caps("t", json!({}), json!({})),
        Policy::default(),
    )
    .unwrap();
    fx.round(7, state_only("s"));
}

// ---------------------------------------------------------------------------------------
// Cross-server
// ---------------------------------------------------------------------------------------

#[test]
fn cross_server_responses_are_refused_and_the_binding_survives() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let d = assert_code(
        fx.accept_from(OTHER_SERVER, 1, input_required(json!({"a": form("A")}))),
        "server_origin_mismatch",
    );
    assert!(d.audited);
    let ev = fx.last_event();
    assert_eq!(ev["reason"], "server_origin_mismatch");
    assert_eq!(ev["server"], "https://evil.example.net/mcp");
    // Another server cannot end it either.
    assert_code(
        fx.accept_from(OTHER_SERVER, 1, complete()),
        "server_origin_mismatch",
    );
    assert_code(
        fx.gate.accept_response(
            &ServerIdentity::endpoint("stdio:weather").unwrap(),
            &response(1, complete()),
        ),
        "server_origin_mismatch",
    );
    // Same host, other path or scheme: other server.
    assert_code(
        fx.accept_from("https://mcp.example.com/other", 1, complete()),
        "server_origin_mismatch",
    );
    assert_code(
        fx.accept_from("http://mcp.example.com/mcp", 1, complete()),
        "server_origin_mismatch",
    );
    // The rightful server (spelled differently, same origin after normalisation) still works.
    fx.round(1, input_required(json!({"a": form("A")})));
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "decline"}}));
    assert_code(
        fx.accept_from(OTHER_SERVER, 2, complete()),
        "server_origin_mismatch",
    );
    assert_eq!(
        fx.accept_from("HTTPS://MCP.Example.COM:443/mcp", 2, complete())
            .unwrap(),
        ResponseVerdict::Complete
    );
    assert!(terminal_of(&fx, 1).len() == 1);
}

// ---------------------------------------------------------------------------------------
// Population, schema
// ---------------------------------------------------------------------------------------

#[test]
fn extra_and_missing_keys_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(
        1,
        input_required(json!({"a": form("A"), "b": url_request("https://b.example.com/")})),
    );
    let a = accept_with(form_content());
    let b = json!({"action": "accept"});
    for answers in [
        json!({"a": a}),
        json!({"b": b}),
        json!({}),
        json!({"a": a, "b": b, "c": b}),
        json!({"a": a, "B": b}),
        json!({"a": a, "b ": b}),
    ] {
        let d = assert_code(
            fx.retry(n(1), n(2), &answers),
            "input_response_population_mismatch",
        );
        assert!(d.audited);
    }
    fx.retry_ok(n(1), n(2), &json!({"a": a, "b": b}));
}

#[test]
fn invalid_input_keys_and_embedded_jsonrpc_are_refused() {
    let mut fx = Fx::new();
    let long = "k".repeat(65);
    for (i, requests) in [
        json!({"bad key": form("A")}),
        json!({"": form("A")}),
        json!({long.clone(): form("A")}),
        json!({"a": {"jsonrpc": "2.0", "id": 5, "method": "elicitation/create", "params": {"message": "m", "requestedSchema": form_schema()}}}),
        json!({"a": "elicitation/create"}),
        json!({"a": {"method": "elicitation/create"}}),
        json!({"a": {"method": "elicitation/create", "params": {"requestedSchema": form_schema()}}}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(fx.accept(id, input_required(requests)), "invalid_named_input_request");
    }
    fx.register_tool(50);
    assert_code(
        fx.accept(
            50,
            json!({"resultType": "input_required", "inputRequests": []}),
        ),
        "invalid_named_input_request",
    );
}

#[test]
fn schema_references_are_refused() {
    let mut fx = Fx::new();
    for (i, schema) in [
        json!({"type": "object", "properties": {"a": {"$ref": "https://evil.example/schema.json"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}),
        json!({"$ref": "#", "type": "object", "properties": {}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "$ref": "#/x"}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"], "$ref": "#"}}}}),
        json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^.*$"}}}),
        json!({"type": "object", "properties": {}, "additionalProperties": true}),
        json!({"type": "array", "items": {"type": "string"}}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as i64 + 1;
        fx.register_tool(id);
        assert_code(
            fx.accept(id, input_required(json!({"a": form_request(None, "m", schema.clone())}))),
            "invalid_form_requestedSchema",
        );
        // The binding is ended.
        assert_code(fx.accept(id, complete()), "no_live_request");
    }
}

#[test]
fn schema_invalid_content_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"f": form("F")})));
    for content in [
        json!({"count": 3}),                            // required `login` missing
        json!({"login": 42}),                           // wrong type
        json!({"login": ""}),                           // minLength
        json!({"login": "x".repeat(40)}),               // maxLength
        json!({"login": "octocat", "count": 0}),        // minimum
        json!({"login": "octocat", "count": 11}),       // maximum
        json!({"login": "octocat", "count": 2.5}),      // integer
        json!({"login": "octocat", "count": "3"}),      // no coercion
        json!({"login": "octocat", "confirm": "true"}), // no coercion
        json!({"login": "octocat", "admin": true}),     // a field the user never saw
        json!("octocat"),
        json!(null),
    ] {
        let d = assert_code(
            fx.retry(n(1), n(2), &json!({"f": accept_with(content.clone())})),
            "input_response_schema_mismatch",
        );
        assert!(d.audited, "{content}");
    }
    // accept without content against a schema with a required field.
    assert_code(
        fx.retry(n(1), n(2), &json!({"f": {"action": "accept"}})),
        "input_response_schema_mismatch",
    );
    assert!(
        fx.consent.prompts().is_empty(),
        "no consent is asked for invalid content"
    );
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"f": accept_with(json!({"login": "octocat"}))}),
    );
}

#[test]
fn enum_and_format_fields_validate() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let schema = json!({
        "type": "object",
        "properties": {
            "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}, "maxItems": 2},
            "mail": {"type": "string", "format": "email"}
        },
        "required": ["color"]
    });
    fx.round(
        1,
        input_required(json!({"f": form_request(None, "m", schema)})),
    );
    for content in [
        json!({"color": "blue"}),
        json!({"color": "r", "tags": ["c"]}),
        json!({"color": "r", "tags": ["a", "a"]}),
        json!({"color": "r", "mail": "not an email"}),
    ] {
        assert_code(
            fx.retry(n(1), n(2), &json!({"f": accept_with(content)})),
            "input_response_schema_mismatch",
        );
    }
    fx.retry_ok(n(1), n(2), &json!({"f": accept_with(json!({"color": "g", "tags": ["a", "b"], "mail": "a@b.example"}))}));
}

// ---------------------------------------------------------------------------------------
// Rounds
// ---------------------------------------------------------------------------------------

#[test]
fn rounds_up_to_the_limit_then_refused_and_binding_gone() {
    let mut fx = Fx::new();
    let policy = Policy {
        max_rounds: 3,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), policy)
        .unwrap();
    for round in 1..=3 {
        let id = round as i64;
        let view = fx.round(
            id,
            input_required_state(json!({"a": form("A")}), &format!("state-{round}")),
        );
        assert_eq!(view.round, round);
        assert_eq!(parse(&view.view_json)["max_rounds"], 3);
        let r = fx.retry_ok(n(id), n(id + 1), &json!({"a": {"action": "decline"}}));
        assert_eq!(r.round, round);
    }
    let d = assert_code(fx.accept(4, state_only("state-4")), "round_limit_exceeded");
    assert!(d.audited);
    // The binding is gone.
    assert_code(fx.retry(n(4), n(5), &json!({})), "inactive_mrtr_round");
    assert_code(fx.accept(4, complete()), "no_live_request");
    let t = terminal_of(&fx, 1);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["outcome"], "error");
    assert_eq!(t[0]["reason"], "round_limit_exceeded");
    assert_eq!(
        fx.events_of(1)
            .iter()
            .filter(|e| e["event"] == "received")
            .count(),
        3
    );
    assert!(fx.storage.is_empty());
    fx.assert_chain();
}

#[test]
fn one_round_policy_allows_exactly_one() {
    let mut fx = Fx::new();
    let policy = Policy {
        max_rounds: 1,
        ..Policy::default()
    };
    fx.register(n(1), &tool_params("t", json!({})), policy)
        .unwrap();
    fx.round(1, state_only("a"));
    fx.retry_ok(n(1), n(2), &json!({}));
    assert_code(fx.accept(2, state_only("b")), "round_limit_exceeded");
}

// ---------------------------------------------------------------------------------------
// Consent
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Audit sink faults
// ---------------------------------------------------------------------------------------

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
    fn head(&self) -> Result<ChainHead, HostError> {
        self.inner.head()
    }
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        if entry.line.contains(&format!("\"event\":\"{}\"", self.kind)) {
            return Err(HostError::new("refused"));
        }
        self.inner.append(entry)
    }
    fn read_back(&self, seq: u64) -> Result<Option<String>, HostError> {
        self.inner.read_back(seq)
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

// ---------------------------------------------------------------------------------------
// Storage faults and two instances
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Parser-level refusals
// ---------------------------------------------------------------------------------------

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
fn oversized_and_deep_responses_are_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"complete","x":{}1{}}}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    assert_code(fx.accept_text(&deep), "limit_exceeded");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"complete","x":"{}"}}}}"#,
        "a".repeat(5 << 20)
    );
    assert_code(fx.accept_text(&big), "limit_exceeded");
    fx.round(1, state_only("s"));
}

// ---------------------------------------------------------------------------------------
// Registration refusals
// ---------------------------------------------------------------------------------------

#[test]
fn registration_refusals() {
    let mut fx = Fx::new();
    let p = tool_params("t", json!({}));
    let reg = |id: RequestId| registration(id, &p, Policy::default());

    assert_code(fx.gate.register(reg(s(""))), "invalid_jsonrpc_request_id");
    assert_code(
        fx.gate.register(reg(s(&"x".repeat(257)))),
        "invalid_jsonrpc_request_id",
    );
    assert!(fx.gate.register(reg(s(&"x".repeat(256)))).is_ok());

    let mut r = reg(n(1));
    r.policy.round_trip_lifetime_ms = 0;
    assert_code(fx.gate.register(r), "invalid_mrtr_lifetime");
    let mut r = reg(n(1));
    r.policy.round_trip_lifetime_ms = 24 * 60 * 60 * 1000 + 1;
    assert_code(fx.gate.register(r), "invalid_mrtr_lifetime");

    let mut r = reg(n(1));
    r.policy.max_request_state_bytes = 0;
    assert_code(fx.gate.register(r), "invalid_requestState_policy");
    let mut r = reg(n(1));
    r.policy.max_request_state_bytes = (1 << 20) + 1;
    assert_code(fx.gate.register(r), "invalid_requestState_policy");

    let mut r = reg(n(1));
    r.policy.max_rounds = 0;
    assert_code(fx.gate.register(r), "invalid_policy");
    let mut r = reg(n(1));
    r.policy.policy_version = String::new();
    assert_code(fx.gate.register(r), "invalid_policy");

    for m in [
        "tools/list",
        "sampling/createMessage",
        "initialize",
        "Tools/Call",
    ] {
        let mut r = reg(n(1));
        r.method = m.into();
        assert_code(fx.gate.register(r), "unsupported_method");
    }

    for extra in [json!({"inputResponses": {}}), json!({"requestState": "s"})] {
        let mut params = p.clone();
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let mut r = reg(n(1));
        r.params_json = params.to_string();
        assert_code(fx.gate.register(r), "params_carry_mrtr_fields");
    }

    let mut r = reg(n(1));
    r.user = String::new();
    assert_code(fx.gate.register(r), "active_request_binding_missing");
    let mut r = reg(n(1));
    r.tenant = String::new();
    assert_code(fx.gate.register(r), "active_request_binding_missing");
    let mut r = reg(n(1));
    r.method = String::new();
    assert_code(fx.gate.register(r), "active_request_binding_missing");
    let mut r = reg(n(1));
    r.params_json = String::new();
    assert_code(fx.gate.register(r), "active_request_binding_missing");

    for bad in [
        "[]",
        "{",
        "{\"name\":\"t\",\"name\":\"u\"}",
        "{\"arguments\":{}}",
        "{\"name\":\"\"}",
    ] {
        let mut r = reg(n(1));
        r.params_json = bad.into();
        assert_code(fx.gate.register(r), "invalid_params");
    }
    let mut r = reg(n(1));
    r.user = "ali\nce".into();
    assert_code(fx.gate.register(r), "invalid_principal");

    // Nothing of all that reached storage.
    assert_eq!(
        fx.storage.len(),
        1,
        "only the 256-byte id registered (its record, under its id's key)"
    );
    fx.register_tool(1);
    assert_code(fx.gate.register(reg(n(1))), "request_id_in_use");
    // Registration refusals are returned, never audited as binding events.
    assert!(fx.events().is_empty());
}

#[test]
fn server_identity_refusals() {
    for bad in [
        "https://u:p@mcp.example.com/",
        "https://mcp.example.com/?t=1",
        "ftp://mcp.example.com/",
        "",
    ] {
        assert_eq!(
            ServerIdentity::origin(bad).unwrap_err().code(),
            "invalid_server_identity"
        );
    }
    assert_eq!(
        ServerIdentity::endpoint("bad id").unwrap_err().code(),
        "invalid_server_identity"
    );
}

#[test]
fn prompts_and_resources_are_bound_too() {
    let mut fx = Fx::new();
    let r = Registration {
        method: "prompts/get".into(),
        ..registration(
            n(1),
            &json!({"_meta": meta(), "name": "greet", "arguments": {"who": "x"}}),
            Policy::default(),
        )
    };
    fx.gate.register(r).unwrap();
    fx.round(1, state_only("p"));
    let retry = fx.retry_ok(n(1), n(2), &json!({}));
    assert_eq!(parse(&retry.request_json)["method"], "prompts/get");

    let r = Registration {
        method: "resources/read".into(),
        ..registration(
            n(10),
            &json!({"_meta": meta(), "uri": "https://files.example.com/doc.txt?sig=abc"}),
            Policy::default(),
        )
    };
    fx.gate.register(r).unwrap();
    let view = fx.round(10, state_only("r"));
    assert_eq!(
        parse(&view.view_json)["request"]["name"],
        "https://files.example.com/doc.txt?sig=abc"
    );
    let received = fx
        .events_of(10)
        .into_iter()
        .find(|e| e["event"] == "received")
        .unwrap();
    assert_eq!(received["name"], "https://files.example.com/doc.txt");
}

// ---------------------------------------------------------------------------------------
// Audit content (G002)
// ---------------------------------------------------------------------------------------

#[test]
fn audit_events_carry_the_bindings_and_nothing_else() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let view = fx.round(
        1,
        input_required_state(
            json!({"f": form("F"), "u": url_request("https://u.example.com/")}),
            "S",
        ),
    );
    fx.retry_ok(
        n(1),
        n(2),
        &json!({"f": {"action": "cancel"}, "u": {"action": "decline"}}),
    );
    fx.accept(2, complete()).unwrap();
    let events = fx.events_of(1);
    assert_eq!(
        kinds(&events),
        ["received", "consented", "submitted", "terminal"]
    );
    for e in &events {
        let obj = e.as_object().unwrap();
        for f in FIELDS {
            assert!(obj.contains_key(f), "missing field {f} in {e}");
        }
        for f in ["schema", "seq", "prev_sha256"] {
            assert!(obj.contains_key(f), "missing {f}");
        }
        assert_eq!(obj.len(), FIELDS.len() + 3, "unexpected fields in {e}");
        assert_eq!(e["server"], SERVER);
        assert_eq!(e["method"], "tools/call");
        assert_eq!(e["name"], "get_weather");
        assert_eq!(e["user_sha256"], digest_str(USER));
        assert_eq!(e["tenant_sha256"], digest_str(TENANT));
        assert_eq!(e["policy_version"], "default");
        assert_eq!(e["at_ms"], T0);
    }
    let received = &events[0];
    assert_eq!(received["state_sha256"], digest_str("S"));
    assert_eq!(received["view_sha256"], view.view_sha256);
    assert_eq!(received["input_kinds"], json!({"f": "form", "u": "url"}));
    assert_eq!(
        received["schema_sha256"]["f"],
        mrtr_gate_core::digest::digest(&form_schema())
    );
    assert_eq!(received["round"], 1);
    assert_eq!(events[2]["retry_id"], 2);
    assert_eq!(events[3]["live_id"], 2);
    fx.assert_chain();
}

#[test]
fn tampered_audit_chain_is_detected() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "cancel"}}));
    let lines: Vec<String> = fx.audit.entries().into_iter().map(|e| e.line).collect();
    assert_eq!(verify_chain(lines.iter().map(String::as_str)), Ok(3));
    let mut dropped = lines.clone();
    dropped.remove(1);
    assert!(verify_chain(dropped.iter().map(String::as_str)).is_err());
    let mut edited = lines.clone();
    edited[0] = edited[0].replace("\"received\"", "\"rejected\"");
    assert!(verify_chain(edited.iter().map(String::as_str)).is_err());
    let mut swapped = lines;
    swapped.swap(1, 2);
    assert!(verify_chain(swapped.iter().map(String::as_str)).is_err());
}

/// Canaries planted in every secret-bearing place must never reach an audit line.
#[test]
fn canary_secrets_never_reach_the_audit_trail() {
    const STATE: &str = "CANARY-STATE-91ab7e";
    const STATE2: &str = "CANARY-STATE2-0c44d1";
    const FORM_VALUE: &str = "CANARY-FORM-55cd02";
    const URL_TOKEN: &str = "CANARY-URL-3e8f6a";
    const URL_FRAGMENT: &str = "CANARY-FRAG-aa17";
    const ARG: &str = "CANARY-ARG-7f3a9c";
    const ARG_KEY: &str = "CANARY_ARGKEY_6612";
    const SAMPLED: &str = "CANARY-SAMPLED-cafe";
    const ROOT: &str = "CANARY-ROOT-beef";
    const RES_QUERY: &str = "CANARY-RESQUERY-9090";
    let canaries = [
        STATE,
        STATE2,
        FORM_VALUE,
        URL_TOKEN,
        URL_FRAGMENT,
        ARG,
        ARG_KEY,
        SAMPLED,
        ROOT,
        RES_QUERY,
        USER,
        TENANT,
    ];

    let mut fx = Fx::new();
    let policy = Policy {
        allowed_deprecated: vec![
            DeprecatedMethod::RootsList,
            DeprecatedMethod::SamplingCreateMessage,
        ],
        ..Policy::default()
    };
    let params = tool_params_caps(
        "get_weather",
        json!({"api_key": ARG, ARG_KEY: {"nested": [ARG]}}),
        all_caps(),
    );
    fx.register(n(1), &params, policy).unwrap();

    // Round 1: form + url + state; some wrong answers first (denials are audited too).
    let url = format!("https://auth.example.com/cb?token={URL_TOKEN}#{URL_FRAGMENT}");
    fx.round(
        1,
        input_required_state(json!({"f": form("F"), "u": url_request(&url)}), STATE),
    );
    let good = json!({"f": accept_with(json!({"login": FORM_VALUE, "count": 2})), "u": {"action": "accept"}});
    let bad_schema = json!({"f": accept_with(json!({"login": FORM_VALUE, "count": "NaN"})), "u": {"action": "accept"}});
    let bad_extra = json!({"f": accept_with(json!({"login": FORM_VALUE, FORM_VALUE: 1})), "u": {"action": "accept"}});
    assert_code(
        fx.retry(n(1), n(2), &bad_schema),
        "input_response_schema_mismatch",
    );
    assert_code(
        fx.retry(n(1), n(2), &bad_extra),
        "input_response_schema_mismatch",
    );
    let mut cross = retry_request(n(1), n(2), &good);
    cross.user = format!("{USER}-other");
    assert_code(
        fx.gate.build_retry(cross),
        "mrtr_identity_or_argument_mismatch",
    );
    fx.consent.push(ScriptedAnswer::Refuse);
    assert_code(fx.retry(n(1), n(2), &good), "consent_refused");
    let r1 = fx.retry_ok(n(1), n(2), &good);
    assert!(
        r1.request_json.contains(STATE)
            && r1.request_json.contains(FORM_VALUE)
            && r1.request_json.contains(ARG)
    );

    // Round 2: roots + sampling + another state.
    fx.round(
        2,
        input_required_state(
            json!({"r": roots_request(), "s": sampling_request(false)}),
            STATE2,
        ),
    );
    let answers = json!({
        "r": {"roots": [{"uri": format!("file:///home/{ROOT}"), "name": ROOT}]},
        "s": {"role": "assistant", "content": {"type": "text", "text": SAMPLED}, "model": "m"}
    });
    fx.retry_ok(n(2), n(3), &answers);
    // A replay of round 1 carrying the secrets, and an unsafe url carrying one.
    assert_code(
        fx.accept(
            1,
            input_required_state(json!({"u": url_request(&url)}), STATE),
        ),
        "no_live_request",
    );
    assert_code(
        fx.accept(
            3,
            input_required_state(
                json!({"u": url_request(&format!("http://x.example.com/?t={URL_TOKEN}"))}),
                STATE2,
            ),
        ),
        "unsafe_url_elicitation",
    );

    // A resource whose URI carries a secret query.
    let r = Registration {
        method: "resources/read".into(),
        ..registration(
            n(20),
            &json!({"_meta": meta(), "uri": format!("https://files.example.com/d?sig={RES_QUERY}")}),
            Policy::default(),
        )
    };
    fx.gate.register(r).unwrap();
    fx.round(20, state_only(STATE));
    fx.retry_ok(n(20), n(21), &json!({}));
    fx.clock.advance(Policy::default().round_trip_lifetime_ms);
    fx.gate.expire_stale().unwrap();

    let entries = fx.audit.entries();
    assert!(
        entries.len() >= 15,
        "the flow wrote {} events",
        entries.len()
    );
    for entry in &entries {
        for canary in canaries {
            assert!(
                !entry.line.contains(canary),
                "audit line leaks `{canary}`: {}",
                entry.line
            );
        }
    }
    verify_chain(entries.iter().map(|e| e.line.as_str())).unwrap();
}

/// A `resources/read` URI with userinfo must never reach an audit event's `name` with its
/// password (`url_view::redacted` clears userinfo, query and fragment). Found by this test.
#[test]
fn resource_uri_userinfo_never_reaches_the_audit_trail() {
    const PASSWORD: &str = "CANARY-PASSWORD-4242";
    let mut fx = Fx::new();
    let r = Registration {
        method: "resources/read".into(),
        ..registration(
            n(1),
            &json!({"_meta": meta(), "uri": format!("https://bob:{PASSWORD}@files.example.com/doc")}),
            Policy::default(),
        )
    };
    fx.gate.register(r).unwrap();
    fx.round(1, state_only("s"));
    for entry in fx.audit.entries() {
        assert!(
            !entry.line.contains(PASSWORD),
            "audit line leaks the uri password: {}",
            entry.line
        );
    }
}

/// A user who takes `ms` to decide, then grants: the clock moves while the prompt is open.
struct SlowUser {
    clock: Arc<ManualClock>,
    ms: u64,
    inner: ScriptedConsent,
}

impl mrtr_gate_core::host::Consent for SlowUser {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_core::host::ConsentReceipt, HostError> {
        self.clock.advance(self.ms);
        self.inner.request_consent(prompt)
    }
}

type SlowUserGate = Gate<Services<Arc<ManualClock>, MemoryStorage, SlowUser, MemoryAudit>>;

fn slow_user_gate(ms: u64) -> (SlowUserGate, MemoryAudit) {
    let clock = Arc::new(ManualClock::new(T0));
    let audit = MemoryAudit::new();
    let gate = Gate::new(Services {
        clock: clock.clone(),
        storage: MemoryStorage::new(clock.clone()),
        consent: SlowUser {
            clock,
            ms,
            inner: ScriptedConsent::new(ScriptedAnswer::Grant),
        },
        audit: audit.clone(),
    });
    (gate, audit)
}

/// Register 1, open a form round, and answer it through a user who takes `ms` to decide.
fn slow_user_round(
    ms: u64,
) -> (
    SlowUserGate,
    MemoryAudit,
    Result<mrtr_gate_core::Retry, mrtr_gate_core::Denial>,
) {
    let (mut gate, audit) = slow_user_gate(ms);
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    assert!(matches!(
        gate.accept_response(
            &server(),
            &response(1, input_required(json!({"who": form("Who?")})))
        ),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let retry = gate.build_retry(retry_request(
        n(1),
        n(2),
        &json!({"who": accept_with(form_content())}),
    ));
    (gate, audit, retry)
}

#[test]
fn a_binding_that_expires_while_the_user_decides_sends_no_retry() {
    let lifetime = Policy::default().round_trip_lifetime_ms;
    let (mut gate, audit, retry) = slow_user_round(lifetime + 1);
    assert_code(retry, "inactive_mrtr_round");
    // The consent was given and is on record, then the retry was refused; id 2 was given back.
    let events = audit.events();
    assert_eq!(kinds(&events), ["received", "consented", "rejected"]);
    assert_eq!(events[2]["reason"], "inactive_mrtr_round");
    assert!(
        events[1]["at_ms"].as_u64() > events[0]["at_ms"].as_u64(),
        "consent time is after the wait"
    );
    assert!(verify_chain(audit.entries().iter().map(|e| e.line.as_str())).is_ok());
    assert!(
        gate.register(registration(
            n(2),
            &tool_params("t", json!({})),
            Policy::default()
        ))
        .is_ok(),
        "the retry id was released"
    );
}

#[test]
fn a_user_who_decides_in_time_gets_the_retry_and_the_consent_is_stamped_when_given() {
    let (_gate, audit, retry) = slow_user_round(30_000);
    assert!(retry.is_ok());
    let events = audit.events();
    assert_eq!(kinds(&events), ["received", "consented", "submitted"]);
    assert_eq!(events[1]["at_ms"].as_u64(), Some(T0 + 30_000));
    assert_eq!(events[2]["at_ms"].as_u64(), Some(T0 + 30_000));
}

// ---------------------------------------------------------------------------------------
// Storage the gate did not write: every such value is refused, never trusted, never a crash
// ---------------------------------------------------------------------------------------

const KEY_PREFIX: &str = "mrtr-gate/v2/id/";

/// Put `value` at the key of `id` (the canonical JSON of the id), whatever is there.
fn plant(fx: &Fx, id: &str, value: &[u8]) {
    use mrtr_gate_core::host::Storage;
    let key = format!("{KEY_PREFIX}{id}");
    let current = fx.storage.get(&key).unwrap().map(|v| v.version);
    let applied = fx
        .storage
        .compare_and_swap(&key, current, Some(value), 600_000)
        .unwrap();
    assert!(matches!(
        applied,
        mrtr_gate_core::host::CasOutcome::Applied(_)
    ));
}

fn stored(fx: &Fx, id: &str) -> Vec<u8> {
    use mrtr_gate_core::host::Storage;
    fx.storage
        .get(&format!("{KEY_PREFIX}{id}"))
        .unwrap()
        .unwrap()
        .value
}

#[test]
fn a_binding_lives_under_its_ids_in_one_key_space() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    assert_eq!(stored(&fx, "1").first(), Some(&b'{'), "the record");
    fx.round(1, state_only("s"));
    fx.retry_ok(n(1), s("r-2"), &json!({}));
    assert_eq!(
        stored(&fx, "\"r-2\""),
        b"1",
        "the retry id points to the original"
    );
    // Ids share one key space: the retry id cannot be registered, the original neither.
    assert_code(
        fx.register(s("r-2"), &tool_params("t", json!({})), Policy::default()),
        "request_id_in_use",
    );
    assert_code(
        fx.register(n(1), &tool_params("t", json!({})), Policy::default()),
        "request_id_in_use",
    );
    fx.accept(json!("r-2"), complete()).unwrap();
    assert_eq!(fx.storage.len(), 0, "record and pointer gone");
}

#[test]
fn values_the_gate_did_not_write_are_refused_as_storage_corrupted() {
    // (what is planted, under which id, which id the response names)
    let cases: [(&str, &[u8], i64); 6] = [
        ("garbage record", b"{\"not\":\"a binding\"}", 7),
        ("not json", b"\xff\xfe", 7),
        ("a pointer to itself", b"7", 7),
        ("a pointer to a pointer", b"8", 7),
        ("an empty value", b"", 7),
        ("a record of another id", b"", 9),
    ];
    for (what, value, id) in cases {
        let mut fx = Fx::new();
        fx.register_tool(1);
        if what == "a record of another id" {
            let record = stored(&fx, "1");
            plant(&fx, "9", &record);
        } else {
            plant(&fx, "8", b"7");
            plant(&fx, &id.to_string(), value);
        }
        let d = assert_code(fx.accept(id, complete()), "storage_corrupted");
        assert!(d.audited, "{what}: the refusal is on record");
        assert_code(fx.retry(n(id), n(100), &json!({})), "storage_corrupted");
        // The real binding is untouched and still works.
        fx.round(1, state_only("s"));
        fx.retry_ok(n(1), n(2), &json!({}));
        fx.accept(2, complete()).unwrap();
        fx.assert_chain();
    }
}

#[test]
fn a_record_whose_params_no_longer_match_their_digest_is_refused() {
    let mut fx = Fx::new();
    fx.register(
        n(1),
        &tool_params("transfer", json!({"amount": 10})),
        Policy::default(),
    )
    .unwrap();
    fx.round(1, state_only("s"));
    // Someone with write access to the store edits the arguments the retry is rebuilt from
    // and leaves the digest as it was.
    let record = String::from_utf8(stored(&fx, "1")).unwrap();
    let edited = record.replace(
        r#""arguments":{"amount":10}"#,
        r#""arguments":{"amount":10000}"#,
    );
    assert_ne!(edited, record, "the test edits the stored arguments");
    plant(&fx, "1", edited.as_bytes());
    let d = assert_code(
        fx.retry(n(1), n(2), &json!({})),
        "mrtr_identity_or_argument_mismatch",
    );
    assert!(d.audited);
    // Checked on every retry of a record read back, not only on the first.
    let d = assert_code(
        fx.retry(n(1), n(3), &json!({})),
        "mrtr_identity_or_argument_mismatch",
    );
    assert!(d.audited);
    fx.assert_chain();
}

#[test]
fn a_retry_pointer_the_record_does_not_list_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    // A pointer planted for id 5, naming binding 1, which never used id 5.
    plant(&fx, "5", b"1");
    assert_code(fx.accept(5, complete()), "storage_corrupted");
    // Binding 1 goes on.
    fx.retry_ok(n(1), n(2), &json!({}));
}

#[test]
fn a_record_from_another_format_is_refused_and_the_sweeper_skips_what_it_cannot_read() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let mut record: Value = serde_json::from_slice(&stored(&fx, "1")).unwrap();
    assert!(record["format"].is_u64());
    record["format"] = json!(1);
    plant(&fx, "1", record.to_string().as_bytes());
    assert_code(fx.accept(1, complete()), "storage_corrupted");
    plant(&fx, "3", b"{\"format\":2}");
    plant(&fx, "4", b"1");
    fx.clock
        .advance(Policy::default().round_trip_lifetime_ms + 1);
    // Nothing the sweeper can read as a binding is ended; nothing panics.
    assert_eq!(fx.gate.expire_stale().unwrap(), 0);

    // A genuine record copied under another id's key is not a second binding to end.
    let mut fx = Fx::new();
    fx.register_tool(1);
    let record = stored(&fx, "1");
    plant(&fx, "9", &record);
    fx.clock
        .advance(Policy::default().round_trip_lifetime_ms + 1);
    assert_eq!(fx.gate.expire_stale().unwrap(), 1, "binding 1 only");
    assert_eq!(stored(&fx, "9"), record, "the copy is left to its TTL");
}
