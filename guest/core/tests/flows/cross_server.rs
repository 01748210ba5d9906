//! Responses from another server are refused, and the binding survives them.

use crate::common::*;
use crate::support::*;
use mrtr_gate_core::{ResponseVerdict, ServerIdentity};
use serde_json::json;

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
    assert_eq!(
        ev["server"],
        redacted("https://evil.example.net", "https://evil.example.net/mcp")
    );
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
