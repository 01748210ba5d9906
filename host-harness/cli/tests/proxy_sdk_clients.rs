//! `mrtr-gate proxy -- SERVER` as the stdio server entry of the official SDK clients, each
//! unchanged and in its automatic MRTR mode with an elicitation handler (the Python SDK's
//! `mcp.Client`, the TypeScript SDK's `Client` 2.4.0), in front of the Python and TypeScript
//! SDK servers of tests/peers: form, URL, state-only and multi-round tools complete through
//! the gate; the trail verifies and shows every round received, consented (delegated to the
//! client) and submitted; the server's stderr is in the log, never on the client's stream.

#![cfg(test)]
#![cfg(unix)]

#[path = "support/sdk_rounds.rs"]
mod sdk_rounds;
#[path = "support/proxy.rs"]
mod support;

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

/// Numbers as a client may write them; each must reach the tool as it would without the gate.
const WRITTEN: [&str; 8] = [
    "1234567890123456",
    "1234567890123456789012",
    "1234567890123456789012345678901234567890",
    "-0",
    "1.0",
    "1e2",
    "3.14159265358979323846264338327",
    "0.1",
];

/// The call to `server` over stdio, then its retry built from the round's answer (the state
/// the SDK server seals is this process's); the two answers.
fn call_and_retry(
    server: &[String],
    call: &str,
    retry: impl Fn(&serde_json::Value) -> String,
) -> Vec<serde_json::Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = std::process::Command::new(&server[0])
        .args(&server[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut answers: Vec<serde_json::Value> = Vec::new();
    let mut next = call.to_owned();
    for _ in 0..2 {
        input.write_all(format!("{next}\n").as_bytes()).unwrap();
        let answer = loop {
            let mut back = String::new();
            assert_ne!(output.read_line(&mut back).unwrap(), 0, "the server ended");
            let v: serde_json::Value = serde_json::from_str(&back).unwrap();
            if v.get("id").is_some() {
                break v;
            }
        };
        next = retry(&answer);
        answers.push(answer);
    }
    drop(input);
    let _ = child.wait();
    answers
}

/// The tool's report of what it received of the [`WRITTEN`] numbers on the call and on its
/// retry.
fn numbers_received(server: &[String]) -> serde_json::Value {
    let values: Vec<String> = WRITTEN
        .iter()
        .enumerate()
        .map(|(i, n)| format!(r#""v{i}":{n}"#))
        .collect();
    let params = |id: u32, state: Option<&str>| {
        let state = state.map_or(String::new(), |s| format!(r#","requestState":{s}"#));
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"numbers","arguments":{{"values":{{{}}}}}{state},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}}}}}}}}"#,
            values.join(",")
        )
    };
    let answers = call_and_retry(server, &params(1, None), |round| {
        params(2, Some(&round["result"]["requestState"].to_string()))
    });
    let text = answers[1]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answers:?}"));
    serde_json::from_str(text).unwrap()
}

#[test]
fn numbers_reach_the_python_sdk_servers_tool_through_the_proxy_as_they_do_without_it() {
    let direct = numbers_received(&python_server());
    // The 22- and 40-digit integers are integers to the tool when sent as written.
    assert_eq!(direct["call"]["v1"][0], "int", "{direct}");
    assert_eq!(direct["call"]["v2"][0], "int", "{direct}");
    assert_eq!(direct["retry"], direct["call"], "{direct}");
    let proxy = Proxy::new("numbers");
    let gated = numbers_received(&proxy.argv(&[], &python_server()));
    assert_eq!(gated["call"], direct["call"], "the call");
    assert_eq!(gated["retry"], direct["call"], "the retry the gate built");
}
