//! Numbers reach the server as the client wrote them (issue 38, part 1): integers of 16, 22
//! and 40 digits, `-0`, `1.0`, `1e2`, a decimal of 30 significant digits and `0.1`, in a tool
//! call's arguments, through the proxy over stdio and over streamable HTTP and through
//! `mrtr-gate call` over both, to the `numbers` tool of the Python and of the TypeScript SDK
//! server (tests/peers). The tool answers with a state-only round, then reports what it got on
//! the call and on the retry: each value's type and value as the tool got it, and the number
//! as written in the request the server read (each server keeps the text of every request it
//! reads: a JavaScript tool gets doubles, which cannot tell `1e2` from `100` nor a 22-digit
//! integer from its nearest double, and a Python tool cannot tell `-0` from `0` nor the
//! 30-digit decimal from its nearest double).
//!
//! For every route and server: the tool's report through the gate is the report of a direct
//! call (the same messages written to the same kind of server with no gate), and both the call
//! and the retry the gate built carry each number's digits as the client wrote them (only an
//! exponent's sign written out, see [`WRITTEN`]).

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::Value;
use std::process::{Command, Stdio};
use support::{
    Proxy, bin, post_text, python_server, python_server_http, ts_server, ts_server_http,
};

/// Numbers as a client may write them, and as each must reach the server: digit for digit,
/// only an exponent's sign written out (`1e2` as `1e+2`, one number to every JSON reader;
/// docs/audit.md), never in the canonical layout the gate compares them in (which writes
/// `1.0` as `1`, `-0` as `0`, `1e2` as `100` and an integer past 21 digits with an exponent).
const WRITTEN: [(&str, &str); 8] = [
    ("1234567890123456", "1234567890123456"),
    ("1234567890123456789012", "1234567890123456789012"),
    (
        "1234567890123456789012345678901234567890",
        "1234567890123456789012345678901234567890",
    ),
    ("-0", "-0"),
    ("1.0", "1.0"),
    ("1e2", "1e+2"),
    (
        "3.14159265358979323846264338327",
        "3.14159265358979323846264338327",
    ),
    ("0.1", "0.1"),
];

/// The tool's arguments, every number of [`WRITTEN`] as written: `{"values":{"v0":…,…}}`.
fn arguments() -> String {
    let values: Vec<String> = WRITTEN
        .iter()
        .enumerate()
        .map(|(i, (n, _))| format!(r#""v{i}":{n}"#))
        .collect();
    format!(r#"{{"values":{{{}}}}}"#, values.join(","))
}

/// The call of the `numbers` tool under `id`, or its retry with the round's `state`.
fn message(id: u32, state: Option<&Value>) -> String {
    let state = state.map_or(String::new(), |s| format!(r#","requestState":{s}"#));
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"numbers","arguments":{}{state},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}}}}}}}}"#,
        arguments()
    )
}

/// The tool's report in its final answer.
fn reported(answer: &Value) -> Value {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no report: {answer}"));
    serde_json::from_str(text).unwrap()
}

/// The call sent with `send` (a message's text, the answer to it), then its retry with the
/// round's state, as a client without a gate writes them; the tool's report.
fn call_and_retry(mut send: impl FnMut(&str) -> Value) -> Value {
    let round = send(&message(1, None));
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let answer = send(&message(2, Some(&round["result"]["requestState"])));
    reported(&answer)
}

/// [`call_and_retry`] over stdio with `server` (a server, or the proxy in front of one)
/// spawned for it.
fn over_stdio(server: &[String]) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(&server[0])
        .args(&server[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let report = call_and_retry(|text| {
        input.write_all(format!("{text}\n").as_bytes()).unwrap();
        loop {
            let mut back = String::new();
            assert_ne!(output.read_line(&mut back).unwrap(), 0, "the server ended");
            let v: Value = serde_json::from_str(&back).unwrap();
            if v.get("id").is_some() {
                break v;
            }
        }
    });
    drop(input);
    let _ = child.wait();
    report
}

/// [`call_and_retry`] posted to `url` (a server, or the proxy in front of one).
fn over_http(url: &str) -> Value {
    call_and_retry(|text| post_text(url, text).unwrap())
}

/// `mrtr-gate call` of the `numbers` tool with these server flags (`--stdio COMMAND` or
/// `--http URL`): the client's arguments are [`WRITTEN`], the retry is the one the gate built
/// for the state-only round; the tool's report.
fn through_call(name: &str, server: &[&str]) -> Value {
    let run = Proxy::new(name);
    let out = Command::new(bin())
        .arg("call")
        .args(server)
        .args(["--user", "alice", "--tenant", "acme", "--audit"])
        .arg(&run.trail)
        .arg("--host-keys")
        .arg(&run.keys)
        .arg("--server-log")
        .arg(&run.log)
        .args(["--json", "tools/call", "numbers", &arguments()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mrtr-gate call failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["rounds"], 1, "{answer}");
    reported(&answer)
}

/// A `--stdio` command line for `server` (each word quoted for the split `call` makes).
fn command_line(server: &[String]) -> String {
    let quoted: Vec<String> = server
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    quoted.join(" ")
}

/// What the tool got of each value on the call or the retry (`part`) of `report`: its type
/// and its value, without the text the server read.
fn tool_got(report: &Value, part: &str) -> Vec<Value> {
    (0..WRITTEN.len())
        .map(|i| {
            let got = &report[part][format!("v{i}")];
            Value::Array(vec![got[0].clone(), got[1].clone()])
        })
        .collect()
}

/// The tool got on the gated call and on the retry the gate built what it got on the direct
/// call; the server read every number of the direct messages as the client wrote it, and of
/// the gated ones as [`WRITTEN`] says it must reach it.
fn assert_as_written(direct: &Value, gated: &Value) {
    for part in ["call", "retry"] {
        for (i, (written, sent)) in WRITTEN.iter().enumerate() {
            let key = format!("v{i}");
            assert_eq!(
                direct[part][&key][2], *written,
                "direct {part}, {key}: {direct}"
            );
            assert_eq!(gated[part][&key][2], *sent, "gated {part}, {key}: {gated}");
        }
    }
    assert_eq!(direct["retry"], direct["call"], "{direct}");
    let expected = tool_got(direct, "call");
    assert_eq!(tool_got(gated, "call"), expected, "the call: {gated}");
    assert_eq!(
        tool_got(gated, "retry"),
        expected,
        "the retry the gate built: {gated}"
    );
}

/// What a Python tool gets: the 22- and 40-digit integers as the integers written.
fn assert_python_integers(direct: &Value) {
    for i in [1, 2] {
        let (written, _) = WRITTEN[i];
        assert_eq!(
            direct["call"][format!("v{i}")],
            serde_json::json!(["int", written, written]),
            "{direct}"
        );
    }
}

/// What a JavaScript tool gets: `-0` as negative zero.
fn assert_javascript_negative_zero(direct: &Value) {
    assert_eq!(
        direct["call"]["v3"],
        serde_json::json!(["number", "-0", "-0"]),
        "{direct}"
    );
}

#[test]
fn numbers_reach_the_python_sdk_servers_tool_through_the_stdio_proxy_as_written() {
    let direct = over_stdio(&python_server());
    assert_python_integers(&direct);
    let proxy = Proxy::new("numbers-stdio-py");
    let gated = over_stdio(&proxy.argv(&[], &python_server()));
    assert_as_written(&direct, &gated);
}

#[test]
fn numbers_reach_the_typescript_sdk_servers_tool_through_the_stdio_proxy_as_written() {
    let direct = over_stdio(&ts_server());
    assert_javascript_negative_zero(&direct);
    let proxy = Proxy::new("numbers-stdio-ts");
    let gated = over_stdio(&proxy.argv(&[], &ts_server()));
    assert_as_written(&direct, &gated);
}

#[test]
fn numbers_reach_the_python_sdk_servers_tool_through_the_http_proxy_as_written() {
    let (_server, upstream) = python_server_http();
    let direct = over_http(&upstream);
    assert_python_integers(&direct);
    let proxy = Proxy::new("numbers-http-py");
    let (_proxy, url) = proxy.http(&upstream);
    assert_as_written(&direct, &over_http(&url));
}

#[test]
fn numbers_reach_the_typescript_sdk_servers_tool_through_the_http_proxy_as_written() {
    let (_server, upstream) = ts_server_http();
    let direct = over_http(&upstream);
    assert_javascript_negative_zero(&direct);
    let proxy = Proxy::new("numbers-http-ts");
    let (_proxy, url) = proxy.http(&upstream);
    assert_as_written(&direct, &over_http(&url));
}

#[test]
fn numbers_reach_the_python_sdk_servers_tool_through_call_as_written() {
    let direct = over_stdio(&python_server());
    assert_python_integers(&direct);
    let stdio = through_call(
        "numbers-call-stdio-py",
        &["--stdio", &command_line(&python_server())],
    );
    assert_as_written(&direct, &stdio);
    let (_server, url) = python_server_http();
    let direct = over_http(&url);
    assert_python_integers(&direct);
    assert_as_written(
        &direct,
        &through_call("numbers-call-http-py", &["--http", &url]),
    );
}

#[test]
fn numbers_reach_the_typescript_sdk_servers_tool_through_call_as_written() {
    let direct = over_stdio(&ts_server());
    assert_javascript_negative_zero(&direct);
    let stdio = through_call(
        "numbers-call-stdio-ts",
        &["--stdio", &command_line(&ts_server())],
    );
    assert_as_written(&direct, &stdio);
    let (_server, url) = ts_server_http();
    let direct = over_http(&url);
    assert_javascript_negative_zero(&direct);
    assert_as_written(
        &direct,
        &through_call("numbers-call-http-ts", &["--http", &url]),
    );
}
