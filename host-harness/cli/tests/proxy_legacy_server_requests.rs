//! A client that speaks the 2025 handshake (the TypeScript SDK client 2.4.0 by default) through
//! `mrtr-gate proxy`: its server asks for input with an `elicitation/create` request of its own,
//! which would reach the user around the gate. The proxy answers it upstream (−32601), the
//! refusal is audited (`legacy_server_request`), and the client's elicitation handler never
//! sees it; the call fails at the server instead of taking the user's answers unbound.
//! With `--allow-legacy-server-requests` the request is relayed, and the operator warned.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::json;
use support::{Proxy, ts_client_with, ts_server};

#[test]
fn a_servers_own_elicitation_request_never_reaches_a_2025_client() {
    let proxy = Proxy::new("legacy");
    let report = ts_client_with(
        &["--legacy"],
        &json!([["book_flight", {"origin": "OSL", "destination": "SFO"}]]),
        &proxy.argv(&[], &ts_server()),
    );
    let call = &report.calls[0];
    assert_eq!(call["elicited"], json!([]), "{call}");
    // The SDK server turns the refused request into a failed tool call.
    let failed = call["ok"] == false || call["is_error"] == true;
    assert!(failed, "{call}");
    // No round was gated, nothing consented to; the refusal is in the trail, which verifies.
    proxy.verify();
    let events = proxy.events();
    assert!(events.iter().all(|e| e["event"] != "consented"));
    let refused: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "rejected" && e["reason"] == "legacy_server_request")
        .collect();
    assert_eq!(refused.len(), 1, "{events:#?}");
    assert_eq!(refused[0]["method"], "elicitation/create");
    assert_eq!(refused[0]["cause"], "peer");
}

#[test]
fn with_allow_legacy_server_requests_the_servers_request_reaches_the_client() {
    let proxy = Proxy::new("legacy-allowed");
    let report = ts_client_with(
        &["--legacy"],
        &json!([["book_flight", {"origin": "OSL", "destination": "SFO"}]]),
        &proxy.argv(&["--allow-legacy-server-requests"], &ts_server()),
    );
    let call = &report.calls[0];
    // Around the gate: the client's handler was asked, and nothing was bound or audited.
    assert_eq!(call["elicited"].as_array().unwrap().len(), 1, "{call}");
    assert_eq!(call["ok"], true, "{call}");
    assert_eq!(call["is_error"], false, "{call}");
    assert!(proxy.events().is_empty());
    assert!(
        report.stderr.contains("--allow-legacy-server-requests"),
        "the operator is warned: {}",
        report.stderr
    );
}
