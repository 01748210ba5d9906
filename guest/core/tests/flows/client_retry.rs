//! `retry-from-client`: a relay's client sends its own retry (a new id, the request's params
//! again with `inputResponses` and `requestState`). Only the round's exact request, with the
//! round's exact state, is built into a retry, and the retry that goes out is the gate's.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{ClientRetry, Denial, Policy, RequestId, ResponseVerdict, Retry};
use serde_json::{Value, json};

fn arguments() -> Value {
    json!({"location": "Paris", "days": [1, 2]})
}

/// The client's params for a retry: the request's name and arguments under the client's own
/// `_meta`, with the MRTR fields given (`None`: the member is absent).
fn client_params(
    name: &str,
    arguments: Value,
    responses: Option<Value>,
    state: Option<&str>,
) -> Value {
    let mut p = json!({
        "_meta": {"io.modelcontextprotocol/protocolVersion": PROTOCOL, "progressToken": 7},
        "name": name,
        "arguments": arguments,
    });
    if let Some(r) = responses {
        p["inputResponses"] = r;
    }
    if let Some(s) = state {
        p["requestState"] = json!(s);
    }
    p
}

fn client_retry(request_id: Option<RequestId>, retry_id: RequestId, params: &str) -> ClientRetry {
    ClientRetry {
        server: server(),
        request_id,
        retry_id,
        user: USER.into(),
        tenant: TENANT.into(),
        method: "tools/call".into(),
        params_json: params.to_owned(),
    }
}

fn from_client(
    fx: &mut Fx,
    request_id: Option<RequestId>,
    retry_id: RequestId,
    params: &Value,
) -> Result<Retry, Denial> {
    fx.gate
        .retry_from_client(client_retry(request_id, retry_id, &params.to_string()))
}

/// Register id 1 (`get_weather` with [`arguments`]) and accept `result` as its round.
fn open(fx: &mut Fx, result: Value) {
    fx.register(
        n(1),
        &tool_params("get_weather", arguments()),
        Policy::default(),
    )
    .unwrap();
    fx.round(1, result);
}

fn answers() -> Value {
    json!({"a": accept_with(form_content())})
}

/// The last event is a `rejected` on binding 1 with `reason`, its round still open.
#[track_caller]
fn rejected_on_binding(fx: &Fx, d: &Denial, reason: &str) {
    assert!(d.audited, "{reason} is audited");
    let e = fx.last_event();
    assert_eq!(e["event"], "rejected");
    assert_eq!(e["reason"], reason);
    assert_eq!(e["request_id"], 1, "on the binding");
    assert_eq!(e["round"], 1);
}

#[test]
fn a_matched_form_retry_goes_out_as_the_gate_writes_it() {
    let mut fx = Fx::new();
    open(&mut fx, input_required_state(json!({"a": form("A")}), "S1"));
    let sent = client_params("get_weather", arguments(), Some(answers()), Some("S1"));
    let retry = from_client(&mut fx, Some(n(1)), s("r-2"), &sent).unwrap();
    assert_eq!(retry.round, 1);
    assert!(retry.consent_receipt_id.is_some());
    // Exactly what build-retry writes for these answers: the registered params with their
    // original `_meta`, never the client's.
    let mut built = Fx::new();
    open(
        &mut built,
        input_required_state(json!({"a": form("A")}), "S1"),
    );
    let expected = built.retry_ok(n(1), s("r-2"), &answers());
    assert_eq!(retry.request_json, expected.request_json);
    assert_eq!(params_of(&retry.request_json)["_meta"], meta());
    // The audit of a consented, submitted round, and the binding lives on under the new id.
    let events = kinds(&fx.events_of(1));
    assert_eq!(events, ["received", "consented", "submitted"]);
    assert_eq!(fx.consent.prompts().len(), 1);
    assert_eq!(
        fx.gate
            .accept_response(&server(), &response("r-2", complete()))
            .unwrap(),
        ResponseVerdict::Complete
    );
    fx.assert_chain();
}

#[test]
fn a_state_only_retry_may_omit_input_responses_and_asks_no_consent() {
    let mut fx = Fx::new();
    open(&mut fx, state_only("S1"));
    let sent = client_params("get_weather", arguments(), None, Some("S1"));
    let retry = from_client(&mut fx, Some(n(1)), n(2), &sent).unwrap();
    assert_eq!(retry.consent_receipt_id, None);
    let params = params_of(&retry.request_json);
    assert_eq!(params["requestState"], "S1");
    assert!(!params.contains_key("inputResponses"));
    assert!(fx.consent.prompts().is_empty());
}

#[test]
fn the_clients_meta_may_differ_and_member_order_and_spacing_do_not_matter() {
    let mut fx = Fx::new();
    open(&mut fx, input_required(json!({"a": form("A")})));
    let text = r#"{ "inputResponses" : {"a": {"content": {"confirm": true, "count": 3.0, "login": "octocat"}, "action": "accept"}},
        "arguments": {"days": [1, 2], "location": "Paris"}, "name": "get_weather",
        "_meta": {"anything": ["the client's own"]} }"#;
    let retry = fx
        .gate
        .retry_from_client(client_retry(Some(n(1)), n(2), text))
        .unwrap();
    assert_eq!(params_of(&retry.request_json)["_meta"], meta());
    assert!(!params_of(&retry.request_json).contains_key("requestState"));
}

#[test]
fn changed_arguments_name_or_method_are_refused_and_the_round_stays_open() {
    let mut fx = Fx::new();
    open(&mut fx, input_required_state(json!({"a": form("A")}), "S1"));
    let changed = [
        client_params(
            "get_weather",
            json!({"location": "Pariss", "days": [1, 2]}),
            Some(answers()),
            Some("S1"),
        ),
        client_params(
            "get_weather",
            json!({"location": "Paris", "days": [1, 2], "extra": null}),
            Some(answers()),
            Some("S1"),
        ),
        client_params("get_weather", json!({}), Some(answers()), Some("S1")),
        client_params("delete_repo", arguments(), Some(answers()), Some("S1")),
    ];
    for params in &changed {
        let d = assert_code(
            from_client(&mut fx, Some(n(1)), n(2), params),
            "mrtr_identity_or_argument_mismatch",
        );
        rejected_on_binding(&fx, &d, "mrtr_identity_or_argument_mismatch");
    }
    let mut missing = client_params("get_weather", arguments(), Some(answers()), Some("S1"));
    missing.as_object_mut().unwrap().remove("arguments");
    assert_code(
        from_client(&mut fx, Some(n(1)), n(2), &missing),
        "mrtr_identity_or_argument_mismatch",
    );
    let same = client_params("get_weather", arguments(), Some(answers()), Some("S1"));
    for method in ["prompts/get", "resources/read", "tools/list", ""] {
        let mut r = client_retry(Some(n(1)), n(2), &same.to_string());
        r.method = method.into();
        let d = assert_code(
            fx.gate.retry_from_client(r),
            "mrtr_identity_or_argument_mismatch",
        );
        rejected_on_binding(&fx, &d, "mrtr_identity_or_argument_mismatch");
    }
    assert!(fx.consent.prompts().is_empty(), "no consent for a mismatch");
    // The binding was kept: the real retry still goes out.
    from_client(&mut fx, Some(n(1)), n(2), &same).unwrap();
    fx.assert_chain();
}

#[test]
fn an_edited_added_or_removed_state_is_refused() {
    let mut fx = Fx::new();
    open(&mut fx, input_required_state(json!({"a": form("A")}), "S1"));
    for state in [Some("S2"), Some("S1 "), Some(""), None] {
        let params = client_params("get_weather", arguments(), Some(answers()), state);
        let d = assert_code(
            from_client(&mut fx, Some(n(1)), n(2), &params),
            "mrtr_identity_or_argument_mismatch",
        );
        rejected_on_binding(&fx, &d, "mrtr_identity_or_argument_mismatch");
    }
    // A round that sent no state takes a retry without one.
    let mut fx = Fx::new();
    open(&mut fx, input_required(json!({"a": form("A")})));
    let added = client_params("get_weather", arguments(), Some(answers()), Some("S1"));
    assert_code(
        from_client(&mut fx, Some(n(1)), n(2), &added),
        "mrtr_identity_or_argument_mismatch",
    );
    let none = client_params("get_weather", arguments(), Some(answers()), None);
    from_client(&mut fx, Some(n(1)), n(2), &none).unwrap();
}

#[test]
fn no_round_found_is_refused_unbound_with_the_retrys_principal() {
    let mut fx = Fx::new();
    open(&mut fx, input_required(json!({"a": form("A")})));
    let params = client_params("get_weather", arguments(), Some(answers()), None);
    let d = assert_code(
        from_client(&mut fx, None, s("client-9"), &params),
        "inactive_mrtr_round",
    );
    assert!(d.audited);
    let e = fx.last_event();
    assert_eq!(e["event"], "rejected");
    assert_eq!(e["request_id"], Value::Null);
    assert_eq!(e["live_id"], Value::Null);
    assert_eq!(e["retry_id"], "client-9");
    let received = &fx.events_of(1)[0];
    for field in ["server", "user_sha256", "tenant_sha256"] {
        assert_eq!(e[field], received[field], "{field}");
    }
    // Nothing of the binding moved.
    from_client(&mut fx, Some(n(1)), n(2), &params).unwrap();
    fx.assert_chain();
}

#[test]
fn a_second_retry_of_a_used_round_is_refused() {
    let mut fx = Fx::new();
    open(&mut fx, input_required_state(json!({"a": form("A")}), "S1"));
    let params = client_params("get_weather", arguments(), Some(answers()), Some("S1"));
    from_client(&mut fx, Some(n(1)), n(2), &params).unwrap();
    // By its old live id (a stale hint): the binding's round is used.
    let d = assert_code(
        from_client(&mut fx, Some(n(1)), n(3), &params),
        "inactive_mrtr_round",
    );
    assert!(d.audited);
    // By the retry's own id, whose round has not come.
    assert_code(
        from_client(&mut fx, Some(n(2)), n(3), &params),
        "inactive_mrtr_round",
    );
    // Once the binding ended, no record is left to match.
    fx.accept(2, complete()).unwrap();
    let d = assert_code(
        from_client(&mut fx, Some(n(1)), n(4), &params),
        "inactive_mrtr_round",
    );
    assert!(d.audited);
    assert_eq!(fx.last_event()["request_id"], Value::Null);
    let submitted = fx
        .events_of(1)
        .iter()
        .filter(|e| e["event"] == "submitted")
        .count();
    assert_eq!(submitted, 1);
    assert_eq!(fx.consent.prompts().len(), 1);
    fx.assert_chain();
}

#[test]
fn duplicate_keys_and_wrong_shapes_are_refused_on_the_binding() {
    let mut fx = Fx::new();
    open(&mut fx, input_required_state(json!({"a": form("A")}), "S1"));
    let answer = r#"{"action": "accept", "content": {"login": "octocat"}}"#;
    for (text, code) in [
        (
            format!(r#"{{"name": "get_weather", "name": "get_weather", "arguments": {{"location": "Paris", "days": [1, 2]}}, "requestState": "S1", "inputResponses": {{"a": {answer}}}}}"#),
            "invalid_params",
        ),
        (
            format!(r#"{{"name": "get_weather", "arguments": {{"location": "Paris", "days": [1, 2]}}, "requestState": "S1", "inputResponses": {{"a": {answer}, "a": {answer}}}}}"#),
            "invalid_params",
        ),
        (
            format!(r#"{{"name": "get_weather", "arguments": {{"location": "Paris", "days": [1, 2]}}, "requestState": ["S1"], "inputResponses": {{"a": {answer}}}}}"#),
            "invalid_params",
        ),
        (
            r#"{"name": "get_weather", "arguments": {"location": "Paris", "days": [1, 2]}, "requestState": "S1", "inputResponses": "yes"}"#.to_owned(),
            "invalid_input_response",
        ),
        ("[]".to_owned(), "invalid_params"),
        ("not json".to_owned(), "invalid_params"),
    ] {
        let d = assert_code(
            fx.gate
                .retry_from_client(client_retry(Some(n(1)), n(2), &text)),
            code,
        );
        rejected_on_binding(&fx, &d, code);
    }
    // The answers are held to the round as build-retry holds them.
    let wrong = client_params(
        "get_weather",
        arguments(),
        Some(json!({"b": accept_with(form_content())})),
        Some("S1"),
    );
    assert_code(
        from_client(&mut fx, Some(n(1)), n(2), &wrong),
        "input_response_population_mismatch",
    );
    let bad = client_params(
        "get_weather",
        arguments(),
        Some(json!({"a": accept_with(json!({"login": 7}))})),
        Some("S1"),
    );
    assert_code(
        from_client(&mut fx, Some(n(1)), n(2), &bad),
        "input_response_schema_mismatch",
    );
    // And a form round's retry without answers is an empty population.
    let empty = client_params("get_weather", arguments(), None, Some("S1"));
    assert_code(
        from_client(&mut fx, Some(n(1)), n(2), &empty),
        "input_response_population_mismatch",
    );
    assert!(fx.consent.prompts().is_empty());
    from_client(
        &mut fx,
        Some(n(1)),
        n(2),
        &client_params("get_weather", arguments(), Some(answers()), Some("S1")),
    )
    .unwrap();
}

#[test]
fn another_users_or_tenants_retry_is_refused_and_the_binding_kept() {
    let mut fx = Fx::new();
    open(&mut fx, input_required_state(json!({"a": form("A")}), "S1"));
    let params = client_params("get_weather", arguments(), Some(answers()), Some("S1"));
    for (user, tenant) in [("mallory@example.com", TENANT), (USER, "tenant-b")] {
        let mut r = client_retry(Some(n(1)), n(2), &params.to_string());
        r.user = user.into();
        r.tenant = tenant.into();
        let d = assert_code(
            fx.gate.retry_from_client(r),
            "mrtr_identity_or_argument_mismatch",
        );
        rejected_on_binding(&fx, &d, "mrtr_identity_or_argument_mismatch");
    }
    // Another server's round is not this one's, whatever the id.
    let mut r = client_retry(Some(n(1)), n(2), &params.to_string());
    r.server = mrtr_gate_core::ServerIdentity::origin(OTHER_SERVER).unwrap();
    assert_code(fx.gate.retry_from_client(r), "inactive_mrtr_round");
    from_client(&mut fx, Some(n(1)), n(2), &params).unwrap();
}

#[test]
fn the_retry_id_must_be_new_as_for_build_retry() {
    let mut fx = Fx::new();
    open(&mut fx, state_only("S1"));
    let params = client_params("get_weather", arguments(), None, Some("S1"));
    assert_code(
        from_client(&mut fx, Some(n(1)), n(1), &params),
        "retry_requires_new_jsonrpc_id",
    );
    fx.register_tool(5);
    assert_code(
        from_client(&mut fx, Some(n(1)), n(5), &params),
        "retry_requires_new_jsonrpc_id",
    );
    assert_code(
        from_client(&mut fx, Some(n(1)), s(""), &params),
        "retry_requires_new_jsonrpc_id",
    );
    assert_code(
        from_client(&mut fx, Some(s("")), n(2), &params),
        "invalid_jsonrpc_request_id",
    );
    from_client(&mut fx, Some(n(1)), n(2), &params).unwrap();
}
