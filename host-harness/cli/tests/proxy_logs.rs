//! `mrtr-gate proxy --log-format json`: every line the proxy writes on stderr is one JSON
//! object (time, level, event, message), refusals are `info` events carrying their code and
//! never a value of the call's, the upstream's loss is one `warn` event naming it, the server's
//! exit one event with its status and log; by default the server's stderr goes to its own log
//! in the state folder, the owner's alone, run after run.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{bin, listening, post, root, scratch};

const HANG_GUARD: Duration = Duration::from_secs(120);

fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": {"secret": "hunter2"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}})
}

/// Every stderr line of the child, each parsed as JSON (a line that is not fails the test), on
/// a channel as they come.
fn json_lines(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next event named `event`, the ones before it kept in `seen`.
fn next_event(rx: &std::sync::mpsc::Receiver<Value>, event: &str, seen: &mut Vec<Value>) -> Value {
    let started = Instant::now();
    loop {
        let left = HANG_GUARD.saturating_sub(started.elapsed());
        let v = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {event} event; saw {seen:?}"));
        for key in ["time", "level", "event", "message"] {
            assert!(v[key].is_string(), "{key} in {v}");
        }
        seen.push(v.clone());
        if v["event"] == event {
            return v;
        }
    }
}

#[test]
fn json_logs_name_each_event_and_no_value_of_a_call() {
    let dir = scratch("logs-json");
    let mut server = Command::new("python3");
    server
        .arg(root().join("tests/peers/recording_http_server.py"))
        .arg("0")
        .arg(dir.join("received.jsonl"))
        .arg(dir.join("never"));
    let (upstream_server, upstream) = listening(server);
    let mut child = Command::new(bin())
        .args(["proxy", "--user", "alice", "--log-format", "json"])
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .arg("--host-keys")
        .arg(dir.join("host-keys.json"))
        .args(["--listen", "127.0.0.1:0", "--upstream", &upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = json_lines(child.stderr.take().unwrap());
    let _proxy = support::Running(child);
    let mut seen = Vec::new();
    let listening = next_event(&rx, "listening", &mut seen);
    assert_eq!(listening["level"], "info", "{listening}");
    let url = format!("http://{}/mcp", listening["address"].as_str().unwrap());
    assert_eq!(listening["upstream"], upstream.as_str(), "{listening}");

    // A retry of no round: refused by the gate, one `refused` event with its code.
    let mut orphan = call(1, "book");
    orphan["params"]["inputResponses"] =
        json!({"seat": {"action": "accept", "content": {"seat": "hunter2"}}});
    orphan["params"]["requestState"] = json!("made-up-state");
    let refused = post(&url, &orphan).unwrap();
    let code = refused["error"]["data"]["mrtr_gate"]["code"]
        .as_str()
        .unwrap();
    let event = next_event(&rx, "refused", &mut seen);
    assert_eq!(
        (&event["level"], &event["code"], &event["cause"]),
        (
            &json!("info"),
            &json!(code),
            &refused["error"]["data"]["mrtr_gate"]["cause"]
        ),
        "{event}"
    );

    // The upstream goes: one `warn` event names it, however many calls fail.
    drop(upstream_server);
    for id in 2..5 {
        let failed = post(&url, &call(id, "book")).unwrap();
        assert_eq!(
            failed["error"]["data"]["mrtr_gate"]["code"], "transport_failed",
            "{failed}"
        );
    }
    let lost = next_event(&rx, "upstream_unreachable", &mut seen);
    assert_eq!(lost["level"], "warn", "{lost}");
    assert_eq!(lost["upstream"], upstream.as_str(), "{lost}");
    for _ in 0..3 {
        next_event(&rx, "refused", &mut seen);
    }
    let lost_twice = seen
        .iter()
        .filter(|e| e["event"] == "upstream_unreachable")
        .count();
    assert_eq!(lost_twice, 1, "{seen:?}");
    // No value of a call's, nor the user, in any line.
    let all = serde_json::to_string(&seen).unwrap();
    for secret in ["hunter2", "made-up-state", "book", "alice"] {
        assert!(!all.contains(secret), "{secret} in {all}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_servers_stderr_goes_to_its_own_log_in_the_state_folder_and_its_exit_is_an_event() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("logs-state");
    let state = dir.join("state");
    let server = [
        "sh",
        "-c",
        "echo 'the server speaks' >&2; read line; exit 3",
    ];
    for run in 0..2 {
        let mut child = Command::new(bin())
            .args(["proxy", "--user", "alice", "--log-format", "json"])
            .arg("--audit")
            .arg(dir.join("audit.jsonl"))
            .arg("--host-keys")
            .arg(dir.join("host-keys.json"))
            .arg("--")
            .args(server)
            .env("XDG_STATE_HOME", &state)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rx = json_lines(child.stderr.take().unwrap());
        let mut seen = Vec::new();
        let log = next_event(&rx, "server_log", &mut seen);
        let path = std::path::PathBuf::from(log["path"].as_str().unwrap());
        assert_eq!(
            path.parent().unwrap(),
            state.join("mrtr-gate/logs"),
            "{log}"
        );
        let mut input = child.stdin.take().unwrap();
        writeln!(input, "{{}}").unwrap();
        drop(input);
        let exited = next_event(&rx, "server_exited", &mut seen);
        assert_eq!(
            (&exited["level"], &exited["status"], &exited["log"]),
            (&json!("warn"), &json!("3"), &log["path"]),
            "{exited}"
        );
        assert_eq!(child.wait().unwrap().code(), Some(3));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("the server speaks").count(), run + 1, "{text}");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
