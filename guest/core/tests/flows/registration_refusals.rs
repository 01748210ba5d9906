//! Registration and server identity refusals, and prompts and resources bound like tools.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{Policy, Registration, RequestId, ServerIdentity};
use serde_json::json;

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
        "https://mcp.example.com/#t=1",
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
    assert_eq!(
        received["name"],
        redacted(
            "https://files.example.com",
            "https://files.example.com/doc.txt?sig=abc"
        )
    );
}
