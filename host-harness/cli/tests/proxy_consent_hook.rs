//! `mrtr-gate proxy --consent command CMD` between the official Python SDK client (automatic
//! MRTR mode) and the Python SDK server: a hook that answers `yes` lets the round through,
//! recorded as `policy_hook`; one that answers anything else refuses it, and the client gets
//! the gate's refusal as a JSON-RPC error (−31001, `consent_refused`) instead of a result.
//! A hook that never answers is refused once `--consent-timeout` has passed.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::json;
use support::{Proxy, python_client, python_server};

fn hook(answer: &str) -> String {
    format!("sh -c 'cat >/dev/null; echo {answer}'")
}

#[test]
fn a_hook_that_says_yes_grants_and_the_trail_says_policy_hook() {
    let proxy = Proxy::new("hook-yes");
    let argv = proxy.argv(&["--consent", "command", &hook("yes")], &python_server());
    let report = python_client(
        &json!([["book_flight", {"origin": "OSL", "destination": "SFO"}]]),
        &argv,
    );
    assert_eq!(
        report.calls[0]["ok"], true,
        "{:?}\n{}",
        report.calls, report.stderr
    );
    proxy.verify();
    let consented: Vec<_> = proxy
        .events()
        .into_iter()
        .filter(|e| e["event"] == "consented")
        .collect();
    assert_eq!(consented.len(), 1);
    assert_eq!(consented[0]["consent_method"], "policy_hook");
}

#[test]
fn a_hook_that_says_no_refuses_and_the_client_gets_consent_refused() {
    let proxy = Proxy::new("hook-no");
    let argv = proxy.argv(&["--consent", "command", &hook("no")], &python_server());
    let report = python_client(
        &json!([["book_flight", {"origin": "OSL", "destination": "SFO"}]]),
        &argv,
    );
    let call = &report.calls[0];
    assert_eq!(call["ok"], false, "{call}");
    assert_eq!(call["code"], -31001, "{call}");
    assert_eq!(
        call["data"]["mrtr_gate"]["code"], "consent_refused",
        "{call}"
    );
    assert_eq!(call["data"]["mrtr_gate"]["cause"], "caller", "{call}");
    // The user was asked once (the round reached the client), and nothing was consented.
    assert_eq!(call["elicited"].as_array().unwrap().len(), 1, "{call}");
    proxy.verify();
    let events = proxy.events();
    assert!(
        events
            .iter()
            .all(|e| e["event"] != "consented" && e["event"] != "submitted")
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "rejected" && e["reason"] == "consent_refused"),
        "{events:#?}"
    );
}

#[test]
fn a_hook_that_never_answers_is_refused_after_consent_timeout() {
    let proxy = Proxy::new("hook-hangs");
    let argv = proxy.argv(
        &[
            "--consent",
            "command",
            "sh -c 'exec sleep 600'",
            "--consent-timeout",
            "1",
        ],
        &python_server(),
    );
    let report = python_client(
        &json!([["book_flight", {"origin": "OSL", "destination": "SFO"}]]),
        &argv,
    );
    let call = &report.calls[0];
    assert_eq!(call["code"], -31001, "{call}");
    assert_eq!(
        call["data"]["mrtr_gate"]["code"], "consent_refused",
        "{call}"
    );
}
