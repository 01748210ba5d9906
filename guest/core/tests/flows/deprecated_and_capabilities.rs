//! Deprecated requests (roots, sampling) and the client capabilities each request needs.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{DeprecatedMethod, Policy, ResponseVerdict};
use serde_json::json;

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
