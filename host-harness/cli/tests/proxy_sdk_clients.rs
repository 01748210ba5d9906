//! `mrtr-gate proxy -- SERVER` as the stdio server entry of the official SDK clients, each
//! unchanged and in its automatic MRTR mode with an elicitation handler (the Python SDK's
//! `mcp.Client`, the TypeScript SDK's `Client` 2.4.0), in front of the Python and TypeScript
//! SDK servers of tests/peers: form, URL, state-only and multi-round tools complete through
//! the gate; the trail verifies and shows every round received, consented (delegated to the
//! client) and submitted; the server's stderr is in the log, never on the client's stream.

#![cfg(test)]
#![cfg(unix)]

#[path = "support/proxy.rs"]
mod support;

use serde_json::{Value, json};
use support::{
    Proxy, Report, binding, bindings, python_client, python_server, ts_client, ts_server,
};

/// What the server writes on its stderr before it starts (a wrapper line: the SDK servers'
/// own logging is theirs to change).
const STDERR_MARK: &str = "SERVERSTDERR-7f3a";

/// `server`, started by a shell line that first writes [`STDERR_MARK`] on its stderr (the
/// proxy runs `sh` without a shell of its own; `sh` is the server command here).
fn noisy(server: Vec<String>) -> Vec<String> {
    let quoted: Vec<String> = server
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    vec![
        "sh".into(),
        "-c".into(),
        // Printed in two halves: the mark itself is in no argv, so no line naming the
        // command (the proxy's own, on the client's stderr) can carry it.
        format!(
            "printf '%s-%s\\n' {} >&2; exec {}",
            STDERR_MARK.replacen('-', " ", 1),
            quoted.join(" ")
        ),
    ]
}

/// One expected call: the tool, its arguments, what its text holds, and the elicitations the
/// client's handler saw (`form:<message>` or `url:<url>`), round after round.
struct Expect {
    tool: &'static str,
    arguments: Value,
    text: &'static [&'static str],
    elicited: &'static [&'static str],
}

fn book_flight() -> Expect {
    Expect {
        tool: "book_flight",
        arguments: json!({"origin": "OSL", "destination": "SFO"}),
        text: &["booked", "Ada Lovelace", "window"],
        elicited: &["form:Who is flying?"],
    }
}

fn pay() -> Expect {
    Expect {
        tool: "pay",
        arguments: json!({"amount": 5}),
        text: &["paid 5", "accept"],
        elicited: &["url:https://pay.example.com/authorize?session=SECRET-SESSION"],
    }
}

fn continue_job() -> Expect {
    Expect {
        tool: "continue_job",
        arguments: json!({}),
        text: &["job done after step-1"],
        elicited: &[],
    }
}

fn survey() -> Expect {
    Expect {
        tool: "survey",
        arguments: json!({}),
        text: &["survey:", "yes"],
        elicited: &["form:Question 1", "form:Question 2", "form:Question 3"],
    }
}

fn calls(expected: &[Expect]) -> Value {
    Value::Array(
        expected
            .iter()
            .map(|e| json!([e.tool, e.arguments]))
            .collect(),
    )
}

fn seen(call: &Value) -> Vec<String> {
    call["elicited"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["mode"].as_str().unwrap() {
            "url" => format!("url:{}", e["url"].as_str().unwrap()),
            _ => format!("form:{}", e["message"].as_str().unwrap()),
        })
        .collect()
}

/// Every call completed with what its tool returns, after exactly its rounds.
fn assert_completed(report: &Report, expected: &[Expect]) {
    assert_eq!(report.calls.len(), expected.len(), "{:?}", report.calls);
    for (call, e) in report.calls.iter().zip(expected) {
        assert_eq!(call["tool"], e.tool);
        assert_eq!(
            call["ok"], true,
            "{} failed: {call}\n{}",
            e.tool, report.stderr
        );
        assert_eq!(call["is_error"], false, "{call}");
        let text = call["text"].as_str().unwrap();
        for part in e.text {
            assert!(text.contains(part), "{}: {text:?} lacks {part:?}", e.tool);
        }
        assert_eq!(seen(call), e.elicited, "{}", e.tool);
    }
}

/// The trail verifies; each call is one binding whose every round was received, consented
/// to as the client's (a state-only round has nothing to consent to) and submitted, and which
/// ended complete, once.
fn assert_trail(proxy: &Proxy, expected: &[Expect]) {
    proxy.verify();
    let events = proxy.events();
    let ids = bindings(&events);
    assert_eq!(
        ids.len(),
        expected.len(),
        "one binding per call: {events:#?}"
    );
    for (id, e) in ids.iter().zip(expected) {
        let of = binding(&events, id);
        let kinds: Vec<&str> = of.iter().map(|e| e["event"].as_str().unwrap()).collect();
        let rounds = e.elicited.len().max(1);
        let mut want = Vec::new();
        for _ in 0..rounds {
            want.push("received");
            if !e.elicited.is_empty() {
                want.push("consented");
            }
            want.push("submitted");
        }
        want.push("terminal");
        assert_eq!(kinds, want, "{}: {of:#?}", e.tool);
        for event in &of {
            assert_eq!(event["name"], e.tool);
            if event["event"] == "consented" {
                assert_eq!(event["consent_method"], "delegated_to_client", "{event}");
            }
        }
        assert_eq!(of.last().unwrap()["outcome"], "complete", "{}", e.tool);
        // The server is the spawned command the trail names, never what it says of itself.
        assert!(
            of[0]["server"]
                .as_str()
                .unwrap()
                .starts_with("endpoint:stdio:sh/-c/"),
            "{}",
            of[0]["server"]
        );
    }
    // The URL's secret and the user's answers are digested, never written.
    let text = std::fs::read_to_string(&proxy.trail).unwrap();
    for secret in ["SECRET-SESSION", "Ada Lovelace"] {
        assert!(!text.contains(secret), "{secret} in the trail");
    }
}

/// The server's stderr went to the log, never to the client (whose stderr the proxy's own
/// lines share) nor onto the protocol stream (every line the client read parsed).
fn assert_server_stderr_logged(proxy: &Proxy, report: &Report) {
    let log = std::fs::read_to_string(&proxy.log).unwrap();
    assert!(log.contains(STDERR_MARK), "the log: {log}");
    assert!(!report.stderr.contains(STDERR_MARK), "{}", report.stderr);
    assert!(
        report.stderr.contains("the server's stderr is logged to"),
        "{}",
        report.stderr
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&proxy.log).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the log is the owner's only: {mode:o}");
}

#[test]
fn the_python_sdk_client_completes_every_kind_of_round_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job(), survey()];
    let proxy = Proxy::new("py-py");
    let report = python_client(&calls(&expected), &proxy.argv(&[], &noisy(python_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected);
    assert_server_stderr_logged(&proxy, &report);
}

#[test]
fn the_python_sdk_client_completes_the_typescript_servers_rounds_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job()];
    let proxy = Proxy::new("py-ts");
    let report = python_client(&calls(&expected), &proxy.argv(&[], &noisy(ts_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected);
}

#[test]
fn the_typescript_sdk_client_completes_every_kind_of_round_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job()];
    let proxy = Proxy::new("ts-ts");
    let report = ts_client(&calls(&expected), &proxy.argv(&[], &noisy(ts_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected);
    assert_server_stderr_logged(&proxy, &report);
}

#[test]
fn the_typescript_sdk_client_completes_the_python_servers_rounds_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job(), survey()];
    let proxy = Proxy::new("ts-py");
    let report = ts_client(&calls(&expected), &proxy.argv(&[], &noisy(python_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected);
}
