//! `mrtr-gate export-audit`: a keyed trail the proxy wrote, exported as OCSF API Activity
//! events and as OpenTelemetry log records, each line held to its format's own definitions
//! (tests/siem/validate.py in the venv scripts/siem makes: OCSF's classes as models, the OTLP
//! protocol's messages under protobuf's strict JSON parser), one event per trail line and no
//! value of a call's; a trail that does not verify (one line edited, the wrong key) exports
//! nothing and says what to do. The opt-in capture (`proxy --capture FILE`) keeps the values
//! apart from the trail, redacted as asked, the owner's alone and hidden from the server.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{bin, root, scratch};

fn call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "book", "arguments": {"passenger": "Ada Lovelace"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}})
}

/// A proxy run over the recording server: a round answered, a retry of no round refused; the
/// gate's folder (trail, key, anchor).
fn a_keyed_trail(dir: &Path) -> PathBuf {
    a_keyed_trail_with(dir, &[])
}

/// [`a_keyed_trail`] with more proxy flags.
fn a_keyed_trail_with(dir: &Path, extra: &[&str]) -> PathBuf {
    let gate = dir.join("gate");
    std::fs::create_dir_all(&gate).unwrap();
    std::fs::create_dir_all(dir.join("server")).unwrap();
    let mut proxy = Command::new(bin())
        .args(["proxy", "--user", "alice"])
        .args(extra)
        .arg("--audit")
        .arg(gate.join("audit.jsonl"))
        .arg("--host-keys")
        .arg(gate.join("host-keys.json"))
        .arg("--server-log")
        .arg(gate.join("server.log"))
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
    let mut exchange = |message: &Value| -> Value {
        writeln!(input, "{message}").unwrap();
        input.flush().unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let first = call(1);
    let round = exchange(&first);
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let mut retry = first.clone();
    retry["id"] = json!(2);
    retry["params"]["inputResponses"] =
        json!({"seat": {"action": "accept", "content": {"seat": "12A"}}});
    if let Some(state) = round["result"].get("requestState") {
        retry["params"]["requestState"] = state.clone();
    }
    let done = exchange(&retry);
    assert!(done.get("result").is_some(), "{done}");
    let mut orphan = call(3);
    orphan["params"]["requestState"] = json!("no-such-round");
    let refused = exchange(&orphan);
    assert!(refused.get("error").is_some(), "{refused}");
    drop(input);
    let _ = proxy.wait();
    gate
}

fn export(gate: &Path, format: &str, extra: &[&str]) -> Output {
    Command::new(bin())
        .arg("export-audit")
        .arg(gate.join("audit.jsonl"))
        .args(["--format", format])
        .arg("--host-keys")
        .arg(gate.join("host-keys.json"))
        .args(extra)
        .output()
        .unwrap()
}

/// `tests/siem/validate.py FORMAT` over `lines`: how many it found valid.
fn validated(format: &str, lines: &[u8]) -> usize {
    let python = root().join("target/siem-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: ./scripts/siem makes it (./scripts/test runs it)",
        python.display()
    );
    let mut child = Command::new(python)
        .arg(root().join("tests/siem/validate.py"))
        .arg(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(lines).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .strip_prefix("valid ")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_verified_trail_exports_as_valid_ocsf_and_otlp_one_event_per_line() {
    let dir = scratch("export-audit");
    let gate = a_keyed_trail(&dir);
    let trail = std::fs::read_to_string(gate.join("audit.jsonl")).unwrap();
    let lines: Vec<&str> = trail.lines().collect();
    assert!(lines.len() >= 4, "{trail}");
    for format in ["ocsf", "otel"] {
        let out = export(&gate, format, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(validated(format, &out.stdout), lines.len(), "{format}");
        let text = String::from_utf8(out.stdout).unwrap();
        for secret in ["Ada Lovelace", "12A", "alice"] {
            assert!(!text.contains(secret), "{secret} in the {format} export");
        }
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let line: Value = serde_json::from_str(lines[0]).unwrap();
        if format == "ocsf" {
            assert_eq!(first["time"], line["at_ms"]);
            assert_eq!(
                first["metadata"]["uid"],
                mrtr_gate_host::core::digest::sha256_hex(lines[0].as_bytes())
            );
            assert_eq!(first["unmapped"]["seq"], line["seq"]);
            // The refused retry is a failure with its code.
            let refused: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|e| e["activity_name"] == "rejected")
                .collect();
            assert_eq!(refused.len(), 1, "{text}");
            assert_eq!(refused[0]["status_id"], 2);
            assert!(refused[0]["status_code"].is_string(), "{}", refused[0]);
        } else {
            let record = &first["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
            assert_eq!(
                record["timeUnixNano"],
                format!("{}000000", line["at_ms"].as_u64().unwrap())
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trail_that_does_not_verify_exports_nothing_and_says_what_to_do() {
    let dir = scratch("export-audit-broken");
    let gate = a_keyed_trail(&dir);
    // The wrong key: nothing, and the next step.
    let other = dir.join("other-keys.json");
    let out = Command::new(bin())
        .arg("export-audit")
        .arg(gate.join("audit.jsonl"))
        .args(["--format", "ocsf"])
        .arg("--host-keys")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Next:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One line edited: the chain is broken, nothing exported.
    let path = gate.join("audit.jsonl");
    let trail = std::fs::read_to_string(&path).unwrap();
    let edited = trail.replacen("\"round\":1", "\"round\":2", 1);
    assert_ne!(edited, trail);
    std::fs::write(&path, edited).unwrap();
    for extra in [&[][..], &["--insecure-no-host-keys"]] {
        let out = export(&gate, "otel", extra);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{extra:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("nothing was exported"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_capture_keeps_the_values_apart_from_the_trail_redacted_and_hidden_from_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("capture");
    std::fs::create_dir_all(dir.join("private")).unwrap();
    let capture = dir.join("private/capture.jsonl");
    let shown = capture.display().to_string();
    let gate = a_keyed_trail_with(
        &dir,
        &["--capture", &shown, "--capture-redact", "PASSENGER"],
    );
    let text = std::fs::read_to_string(&capture).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["request", "answer", "retry", "answer"], "{text}");
    assert_eq!(lines[0]["params"]["arguments"]["passenger"], "[redacted]");
    assert!(!text.contains("Ada Lovelace"), "{text}");
    assert_eq!(
        lines[2]["params"]["inputResponses"]["seat"]["content"]["seat"], "12A",
        "{text}"
    );
    assert_eq!(lines[1]["answer"]["result"]["resultType"], "input_required");
    // Each line is found from the trail by its binding's id, and the trail holds no value.
    let trail = std::fs::read_to_string(gate.join("audit.jsonl")).unwrap();
    let ids: Vec<Value> = trail
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["request_id"].clone())
        .collect();
    assert!(ids.contains(&lines[0]["request_id"]), "{trail}");
    assert!(!trail.contains("12A") && !trail.contains("Ada"));
    let mode = std::fs::metadata(&capture).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // A server that tries to read the capture is refused by its sandbox.
    let out = Command::new(bin())
        .args(["proxy", "--user", "alice", "--capture", &shown])
        .arg("--audit")
        .arg(gate.join("audit.jsonl"))
        .arg("--host-keys")
        .arg(gate.join("host-keys.json"))
        .arg("--server-log")
        .arg(dir.join("snoop.log"))
        .args([
            "--",
            "sh",
            "-c",
            &format!("cat '{shown}' >&2 && echo READ >&2"),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("WARNING: --capture"), "{said}");
    let snooped = std::fs::read_to_string(dir.join("snoop.log")).unwrap();
    assert!(
        !snooped.contains("READ") && !snooped.contains("12A"),
        "{snooped}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
