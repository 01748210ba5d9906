//! `mrtr-gate proxy -- SERVER` as the stdio server entry of the official SDK clients, each
//! unchanged and in its automatic MRTR mode with an elicitation handler (the Python SDK's
//! `mcp.Client`, the TypeScript SDK's `Client` 2.4.0), in front of the Python and TypeScript
//! SDK servers of tests/peers: form, URL, state-only and multi-round tools complete through
//! the gate; the trail verifies and shows every round received, consented (delegated to the
//! client) and submitted; the server's stderr is in the log, never on the client's stream.

#![cfg(test)]
#![cfg(unix)]

mod support;
use support::sdk_rounds;

use sdk_rounds::{assert_completed, assert_trail, book_flight, calls, continue_job, pay, survey};
use support::{Proxy, Report, python_client, python_server, ts_client, ts_server};

/// How the trail names the stdio server: the command the proxy spawned (`sh -c …` here).
const STDIO_SERVER: &str = "endpoint:stdio:sh/-c/";

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
    assert_trail(&proxy, &expected, STDIO_SERVER);
    assert_server_stderr_logged(&proxy, &report);
}

#[test]
fn the_python_sdk_client_completes_the_typescript_servers_rounds_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job()];
    let proxy = Proxy::new("py-ts");
    let report = python_client(&calls(&expected), &proxy.argv(&[], &noisy(ts_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected, STDIO_SERVER);
}

#[test]
fn the_typescript_sdk_client_completes_every_kind_of_round_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job()];
    let proxy = Proxy::new("ts-ts");
    let report = ts_client(&calls(&expected), &proxy.argv(&[], &noisy(ts_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected, STDIO_SERVER);
    assert_server_stderr_logged(&proxy, &report);
}

#[test]
fn the_typescript_sdk_client_completes_the_python_servers_rounds_through_the_proxy() {
    let expected = [book_flight(), pay(), continue_job(), survey()];
    let proxy = Proxy::new("ts-py");
    let report = ts_client(&calls(&expected), &proxy.argv(&[], &noisy(python_server())));
    assert_completed(&report, &expected);
    assert_trail(&proxy, &expected, STDIO_SERVER);
}
