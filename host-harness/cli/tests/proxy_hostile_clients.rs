//! `mrtr-gate proxy -- COMMAND` against hostile clients: raw JSON-RPC lines written by the
//! test, a server that writes down every line it receives (tests/peers/recording_server.py).
//! A retry that matches no open round (changed arguments, an edited state, the same retry
//! twice, one after the round was used) or carries answers the schema refuses is refused with
//! the gate's code, and the server never receives it; the trail verifies and records each
//! refusal. Hang guards only: nothing here depends on how fast the machine is.

#![cfg(test)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// Far beyond any answer on a loaded machine: only a proxy that hangs runs into it.
const HANG_GUARD: Duration = Duration::from_secs(120);

struct Proxy {
    dir: PathBuf,
    child: Child,
    input: Option<ChildStdin>,
    output: Receiver<String>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Proxy {
    fn start(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "mrtr-gate-proxy-hostile-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        // The gate's files in one folder, what the server writes in another: the gate's
        // folders are read-only to the server it spawns.
        std::fs::create_dir_all(dir.join("gate")).unwrap();
        std::fs::create_dir_all(dir.join("server")).unwrap();
        let server = repo().join("tests/peers/recording_server.py");
        let mut child = Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
            .arg("proxy")
            .args(["--user", "alice", "--tenant", "acme", "--audit"])
            .arg(dir.join("gate/audit.jsonl"))
            .arg("--server-log")
            .arg(dir.join("server.log"))
            .arg("--")
            .arg("python3")
            .arg(server)
            .arg(dir.join("server/received.jsonl"))
            .env("MRTR_GATE_HOST_KEYS", dir.join("gate/host-keys.json"))
            .env("HOME", dir.join("gate"))
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (lines, output) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            dir,
            child,
            input,
            output,
        }
    }

    /// Send `message` and read the one line that comes back.
    fn ask(&mut self, message: &Value) -> Value {
        self.ask_raw(&message.to_string())
    }

    /// Send `line` as it is and read the one line that comes back.
    fn ask_raw(&mut self, line: &str) -> Value {
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{line}").unwrap();
        input.flush().unwrap();
        let line = self
            .output
            .recv_timeout(HANG_GUARD)
            .expect("the proxy answered");
        serde_json::from_str(&line).unwrap()
    }

    /// Every message the server received, in order.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("server/received.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The trail's events of `kind`.
    fn events(&self, kind: &str) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("gate/audit.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == kind)
            .collect()
    }

    /// The client leaves; the proxy ends and the trail verifies.
    fn finish(mut self) {
        drop(self.input.take());
        let status = wait(&mut self.child);
        assert!(status.success(), "{status:?}");
        let verify = Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
            .arg("verify-audit")
            .arg(self.dir.join("gate/audit.jsonl"))
            .env("MRTR_GATE_HOST_KEYS", self.dir.join("gate/host-keys.json"))
            .env("HOME", self.dir.join("gate"))
            .output()
            .unwrap();
        assert!(
            verify.status.success(),
            "{}",
            String::from_utf8_lossy(&verify.stderr)
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..(HANG_GUARD.as_millis() / 50) {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("the proxy did not exit once its client left");
}

fn call(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}})
}

fn retry(id: Value, name: &str, arguments: Value, seat: &str, state: Option<&Value>) -> Value {
    let mut r = call(id, name, arguments);
    r["params"]["inputResponses"] =
        json!({"seat": {"action": "accept", "content": {"seat": seat}}});
    if let Some(state) = state {
        r["params"]["requestState"] = state.clone();
    }
    r
}

/// The error's JSON-RPC code and the gate's code.
fn refusal(answer: &Value) -> (i64, String) {
    (
        answer["error"]["code"].as_i64().unwrap_or_default(),
        answer["error"]["data"]["mrtr_gate"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn retries_received(proxy: &Proxy) -> usize {
    proxy
        .received()
        .iter()
        .filter(|m| m["params"]["inputResponses"].is_object())
        .count()
}

#[test]
fn retries_that_match_no_open_round_are_refused_and_never_reach_the_server() {
    let mut proxy = Proxy::start("state");
    let lis = json!({"to": "LIS"});
    let round = proxy.ask(&call(json!(1), "book", lis.clone()));
    assert_eq!(round["id"], 1, "{round}");
    assert_eq!(round["result"]["resultType"], "input_required");
    let state = round["result"]["requestState"].clone();

    let changed = proxy.ask(&retry(
        json!(2),
        "book",
        json!({"to": "OPO"}),
        "12A",
        Some(&state),
    ));
    assert_eq!(
        refusal(&changed),
        (-31001, "mrtr_identity_or_argument_mismatch".into())
    );
    let edited = proxy.ask(&retry(
        json!(3),
        "book",
        lis.clone(),
        "12A",
        Some(&json!("state-9")),
    ));
    assert_eq!(refusal(&edited), (-31001, "inactive_mrtr_round".into()));
    let too_long = proxy.ask(&retry(
        json!(4),
        "book",
        lis.clone(),
        "12ABCDE",
        Some(&state),
    ));
    assert_eq!(
        refusal(&too_long),
        (-31001, "input_response_schema_mismatch".into())
    );
    assert_eq!(retries_received(&proxy), 0, "nothing refused went upstream");

    let done = proxy.ask(&retry(json!(5), "book", lis.clone(), "12A", Some(&state)));
    assert_eq!(done["id"], 5);
    assert_eq!(done["result"]["content"][0]["text"], "booked 12A");
    let again = proxy.ask(&retry(json!(6), "book", lis, "12A", Some(&state)));
    assert_eq!(refusal(&again), (-31001, "inactive_mrtr_round".into()));
    assert_eq!(retries_received(&proxy), 1, "the round went upstream once");

    // Each refusal is in the trail, and the one retry.
    assert_eq!(proxy.events("rejected").len(), 4);
    assert_eq!(proxy.events("submitted").len(), 1);
    // What went upstream is the gate's text under a minted id, never the client's id.
    let ids: Vec<Value> = proxy.received().iter().map(|m| m["id"].clone()).collect();
    assert!(
        ids.iter()
            .all(|id| id.as_str().is_some_and(|s| s.starts_with("mg:"))),
        "{ids:?}"
    );
    proxy.finish();
}

#[test]
fn a_round_without_state_is_retried_by_its_arguments_once() {
    let mut proxy = Proxy::start("stateless");
    let round = proxy.ask(&call(json!("a"), "confirm", json!({"n": 1})));
    assert_eq!(round["result"]["resultType"], "input_required");
    assert!(round["result"].get("requestState").is_none());
    let other = proxy.ask(&retry(json!("b"), "confirm", json!({"n": 2}), "1", None));
    assert_eq!(refusal(&other), (-31001, "inactive_mrtr_round".into()));
    let with_state = proxy.ask(&retry(
        json!("c"),
        "confirm",
        json!({"n": 1}),
        "1",
        Some(&json!("s")),
    ));
    assert_eq!(refusal(&with_state), (-31001, "inactive_mrtr_round".into()));
    let done = proxy.ask(&retry(json!("d"), "confirm", json!({"n": 1}), "1", None));
    assert_eq!(done["result"]["content"][0]["text"], "booked 1");
    let again = proxy.ask(&retry(json!("e"), "confirm", json!({"n": 1}), "1", None));
    assert_eq!(refusal(&again), (-31001, "inactive_mrtr_round".into()));
    assert_eq!(retries_received(&proxy), 1);
    proxy.finish();
}

#[test]
fn a_carriage_return_inside_a_line_never_smuggles_a_message_to_the_server() {
    let mut proxy = Proxy::start("cr");
    // JSON whitespace to the proxy; a line end to the server's reader (Python's universal
    // newlines): the middle "line" would be a retry the gate never saw.
    let inner = retry(
        json!(1),
        "book",
        json!({"to": "LIS"}),
        "12A",
        Some(&json!("state-1")),
    );
    let smuggled = format!("{{\"a\":\r{inner}\r}}");
    let answer = proxy.ask_raw(&smuggled);
    assert_eq!(
        refusal(&answer),
        (-31004, "invalid_message".into()),
        "{answer}"
    );
    assert!(proxy.received().is_empty(), "{:?}", proxy.received());
    proxy.finish();
}
