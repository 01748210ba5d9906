//! `mrtr-gate proxy` told to stop (SIGTERM) with rounds open, on both transports: it takes no
//! new connection, lets the call in flight finish (its answer reaches its client), ends every
//! round left `cancelled` in the trail, anchors the trail's root, and exits 0; the trail then
//! verifies with its links and anchor, and `reconcile` finds no binding open. A proxy killed
//! outright leaves its round open, and `reconcile` says so (exit 3: consistent, not clean).
//!
//! Raw JSON-RPC written by the test against servers that write down what they receive
//! (tests/peers/recording_server.py over stdio, tests/peers/recording_http_server.py over
//! HTTP, which holds a retry until the test lets go). Hang guards only: nothing here depends
//! on how fast the machine is.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::raw::{HANG_GUARD, call, exited as wait, recording_upstream, retry, terminate};
use support::{bin, post, proxy_listening, root, scratch};

/// A drain timeout no test waits out: the call in flight is released by the test.
const DRAIN: &str = "300";

fn events(trail: &Path) -> Vec<Value> {
    std::fs::read_to_string(trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `terminal` outcome of each binding, by the id the proxy minted (the trail's
/// `request_id`), in the order they ended.
fn ends(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "terminal")
        .map(|e| e["outcome"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The trail verifies with its links and anchor, its last line is a root line anchoring the
/// shard's last line, and `reconcile` finds it clean with nothing open.
fn assert_closed(dir: &Path, trail: &Path) {
    let keys = dir.join("host-keys.json");
    let verify = Command::new(bin())
        .arg("verify-audit")
        .arg(trail)
        .arg("--host-keys")
        .arg(&keys)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let all = events(trail);
    let last = all.last().unwrap();
    assert_eq!(
        last["shard"], "root",
        "the trail ends with its root: {last}"
    );
    let gated = all.iter().rfind(|e| e["shard"] != "root").unwrap();
    let shard = gated["shard"].as_str().unwrap();
    assert_eq!(last["heads"][shard]["seq"], gated["seq"], "{last}");
    let reconcile = Command::new(bin())
        .arg("reconcile")
        .arg(trail)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&reconcile.stdout).unwrap();
    assert_eq!(report["clean"], true, "{report}");
    assert_eq!(report["open"], json!([]), "{report}");
}

/// `mrtr-gate proxy` with its trail and host keys in `gate`, and a drain timeout no test waits
/// out.
fn proxy_command(gate: &Path) -> Command {
    let mut command = Command::new(bin());
    command
        .arg("proxy")
        .args([
            "--user",
            "alice",
            "--tenant",
            "acme",
            "--drain-timeout",
            DRAIN,
        ])
        .arg("--audit")
        .arg(gate.join("audit.jsonl"))
        .arg("--host-keys")
        .arg(gate.join("host-keys.json"));
    command
}

/// `mrtr-gate proxy` over stdio in front of the recording server, its files in `dir/gate`,
/// with a round open: the proxy, and the trail's path.
fn stdio_proxy_with_a_round_open(dir: &Path) -> (Child, std::process::ChildStdin, PathBuf) {
    // The gate's files in one folder, what the server writes in another: the gate's folders
    // are read-only to the server it spawns.
    std::fs::create_dir_all(dir.join("server")).unwrap();
    std::fs::create_dir_all(dir.join("gate")).unwrap();
    let trail = dir.join("gate/audit.jsonl");
    let mut proxy = proxy_command(&dir.join("gate"))
        .arg("--server-log")
        .arg(dir.join("gate/server.log"))
        .arg("--")
        .arg("python3")
        .arg(root().join("tests/peers/recording_server.py"))
        .arg(dir.join("server/received.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = proxy.stdin.take().unwrap();
    let mut output = BufReader::new(proxy.stdout.take().unwrap());
    writeln!(input, "{}", call(1, "book")).unwrap();
    input.flush().unwrap();
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    let round: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    (proxy, input, trail)
}

#[test]
fn a_proxy_killed_outright_leaves_its_round_open_and_reconcile_says_so() {
    let dir = scratch("drain-killed");
    let (mut proxy, _input, trail) = stdio_proxy_with_a_round_open(&dir);
    proxy.kill().unwrap();
    let _ = proxy.wait();
    let out = Command::new(bin())
        .arg("reconcile")
        .arg(&trail)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{report}");
    assert_eq!(report["consistent"], true, "{report}");
    assert_eq!(report["clean"], false, "{report}");
    assert_eq!(report["open"].as_array().map(Vec::len), Some(1), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn over_stdio_a_stopped_proxy_ends_the_open_round_cancelled_and_anchors_the_trail() {
    let dir = scratch("drain-stdio");
    let (mut proxy, _input, trail) = stdio_proxy_with_a_round_open(&dir);
    // The client holds the round, and the proxy is told to stop.
    terminate(&proxy);
    let status = wait(&mut proxy);
    assert_eq!(status.code(), Some(0), "{status:?}");
    let all = events(&trail);
    assert_eq!(ends(&all), ["cancelled"], "{all:?}");
    assert_closed(&dir.join("gate"), &trail);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn over_http_a_stopped_proxy_takes_no_connection_lets_the_call_in_flight_finish_and_ends_the_rest()
{
    let dir = scratch("drain-http");
    let hold = dir.join("release");
    let (_server, upstream) = recording_upstream(&dir);
    let trail = dir.join("audit.jsonl");
    let (mut proxy, url) = proxy_listening(proxy_command(&dir), &upstream);
    // A round the client holds, and one whose retry the upstream holds.
    let open = post(&url, &call(1, "book")).unwrap();
    assert_eq!(open["result"]["resultType"], "input_required", "{open}");
    let held_call = call(2, "hold");
    let held = post(&url, &held_call).unwrap();
    assert_eq!(held["result"]["resultType"], "input_required", "{held}");
    let in_flight = {
        let (url, message) = (url.clone(), retry(&held_call, &held, 3));
        std::thread::spawn(move || post(&url, &message))
    };
    let received = || std::fs::read_to_string(dir.join("received.jsonl")).unwrap_or_default();
    let started = Instant::now();
    while !received().contains("inputResponses") {
        assert!(
            started.elapsed() < HANG_GUARD,
            "the retry never reached the upstream"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    terminate(&proxy.0);
    // Once the signal is taken, a new connection is refused; the call in flight goes on.
    let started = Instant::now();
    loop {
        match post(&url, &call(4, "book")) {
            Err(ureq::Error::Io(_) | ureq::Error::ConnectionFailed) => break,
            Err(e) => panic!("a new call while stopping: {e}"),
            Ok(_) => {
                assert!(
                    started.elapsed() < HANG_GUARD,
                    "the proxy never stopped taking calls"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    assert!(
        proxy.0.try_wait().unwrap().is_none(),
        "the proxy left its call in flight"
    );
    std::fs::write(&hold, "").unwrap();
    let answered = in_flight.join().unwrap().unwrap();
    assert_eq!(answered["id"], 3, "{answered}");
    assert!(answered["result"]["content"].is_array(), "{answered}");
    let status = wait(&mut proxy.0);
    assert_eq!(status.code(), Some(0), "{status:?}");
    // The held round completed; the round the client held, and every one a call made while
    // the signal was on its way opened, ended `cancelled`.
    let all = events(&trail);
    let outcomes = ends(&all);
    assert_eq!(
        outcomes.iter().filter(|o| *o == "complete").count(),
        1,
        "{all:?}"
    );
    assert!(
        outcomes.iter().filter(|o| *o == "cancelled").count() >= 1,
        "{all:?}"
    );
    assert_eq!(
        outcomes.len(),
        outcomes
            .iter()
            .filter(|o| *o == "complete" || *o == "cancelled")
            .count(),
        "{all:?}"
    );
    assert_closed(&dir, &trail);
    let _ = std::fs::remove_dir_all(&dir);
}
