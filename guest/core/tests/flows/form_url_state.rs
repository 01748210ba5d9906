//! Form and URL elicitation end to end, requestState echoed byte-exact, fresh retry ids.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::digest::digest_str;
use mrtr_gate_core::{Policy, ResponseVerdict};
use serde_json::{Value, json};

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
