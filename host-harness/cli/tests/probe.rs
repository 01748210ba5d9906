//! `mrtr-gate probe` end to end: `mrtr-gate call` (tests/probe/clients/cli-call.sh) passes
//! every check of every scenario but those tests/probe/expected-skips.json lists for it, which
//! are SKIPPED (it takes no MRTR fields, cannot cancel a call in flight, and declares both elicitation modes); the naive client fails and the run exits 1; unknown
//! scenarios and hostile scenario files are usage errors (exit 2) before any client runs.
//! Over stdio (the client spawns `mrtr-gate probe --relay`): the naive client fails every check
//! but the control, a client that does nothing fails every check, and the relay copies both
//! ways byte for byte and exits when either side ends.

#![cfg(test)]
#![cfg(unix)]

use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn probe(args: &[&str], config: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
        .arg("probe")
        .args(args)
        .env("MRTR_GATE_BIN", env!("CARGO_BIN_EXE_mrtr-gate"))
        .env("XDG_CONFIG_HOME", config)
        .output()
        .unwrap()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mrtr-probe-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn mrtr_gate_call_passes_every_check_it_can_be_made_to_reach() {
    let config = temp("call");
    let client = repo().join("tests/probe/clients/cli-call.sh");
    let command = format!("bash '{}'", client.display());
    let record = config.join("out");
    let out = probe(
        &[
            "--json",
            "--command",
            &command,
            "-o",
            record.to_str().unwrap(),
        ],
        &config,
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/probe/expected-skips.json")).unwrap(),
    )
    .unwrap();
    let mut expected_skips: Vec<&str> = expected["cli-call"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    expected_skips.sort_unstable();
    let mut not_passed = Vec::new();
    let mut skipped = Vec::new();
    let mut total = 0;
    for scenario in report["scenarios"].as_array().unwrap() {
        for check in scenario["checks"].as_array().unwrap() {
            total += 1;
            if check["status"] == "SKIPPED" {
                skipped.push(check["id"].as_str().unwrap());
            } else if check["status"] != "SUCCESS" {
                not_passed.push(format!(
                    "{} {}: {}",
                    check["id"], check["status"], check["errorMessage"]
                ));
            }
        }
    }
    assert!(not_passed.is_empty(), "{}\n{stderr}", not_passed.join("\n"));
    skipped.sort_unstable();
    assert_eq!(skipped, expected_skips, "{stderr}");
    let embedded = std::fs::read_dir(repo().join("tests/probe/scenarios"))
        .unwrap()
        .count();
    assert_eq!(report["scenarios"].as_array().unwrap().len(), embedded);
    assert_eq!(report["summary"]["passed"], total - expected_skips.len());
    assert_eq!(report["summary"]["skipped"], expected_skips.len());
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let checks: Value = serde_json::from_str(
        &std::fs::read_to_string(record.join("mrtr-control-form-round/checks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(checks[0]["status"], "SUCCESS");
    let lines =
        std::fs::read_to_string(record.join("mrtr-control-form-round/record.jsonl")).unwrap();
    assert!(lines.contains("\"leg\":1"), "{lines}");
    std::fs::remove_dir_all(&config).unwrap();
}

#[test]
fn a_failing_client_ends_the_run_with_exit_1_and_says_what_it_did() {
    let config = temp("naive");
    let client = repo().join("tests/probe/clients/naive.py");
    let command = format!("python3 '{}'", client.display());
    let out = probe(
        &[
            "--scenario",
            "mrtr-duplicate-result-type",
            "--command",
            &command,
        ],
        &config,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAILURE"), "{stdout}");
    assert!(stdout.contains("requestState \"S-dup-rt\""), "{stdout}");
    assert!(
        stdout.contains("probe: 0 passed, 1 failed, 0 skipped (1 scenarios"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&config).unwrap();
}

#[test]
fn unknown_scenarios_and_hostile_files_are_usage_errors() {
    let config = temp("usage");
    let out = probe(
        &["--command", "true", "--scenario", "mrtr-no-such"],
        &config,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown_scenario"));
    assert!(out.stdout.is_empty());

    let dir = config.join("scenarios");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = std::fs::read_to_string(
        repo().join("tests/probe/scenarios/mrtr-duplicate-result-type.json"),
    )
    .unwrap();
    text = text.replacen("\"safe\"", "\"delay_ms\": 10, \"safe\"", 1);
    std::fs::write(dir.join("mrtr-duplicate-result-type.json"), text).unwrap();
    let out = probe(
        &["--command", "true", "--scenarios", dir.to_str().unwrap()],
        &config,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown_field"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = probe(&["--timeout", "0", "--command", "true"], &config);
    assert_eq!(out.status.code(), Some(2));
    let out = probe(&["--scenario", "mrtr-url-unsafe"], &config);
    assert_eq!(out.status.code(), Some(2), "--command is required");

    let out = probe(&["--list"], &config);
    assert_eq!(out.status.code(), Some(0));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("mrtr-control-form-round\n"), "{listed}");
    assert!(
        listed.contains("check mrtr-url-unsafe-not-fetched"),
        "{listed}"
    );
    std::fs::remove_dir_all(&config).unwrap();
}

/// Every check's (scenario, id, status, message) of a `--json` report.
fn checks(report: &Value) -> Vec<(String, String, String, String)> {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["checks"].as_array().unwrap().iter().map(|c| {
                (
                    s["name"].as_str().unwrap().to_owned(),
                    c["id"].as_str().unwrap().to_owned(),
                    c["status"].as_str().unwrap().to_owned(),
                    c["errorMessage"].as_str().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

#[test]
fn over_stdio_the_naive_client_fails_every_check_but_the_control() {
    let config = temp("naive-stdio");
    let client = repo().join("tests/probe/clients/naive.py");
    let command = format!("python3 '{}'", client.display());
    let out = probe(
        &["--transport", "stdio", "--json", "--command", &command],
        &config,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["transport"], "stdio");
    let all = checks(&report);
    let vacuous: Vec<String> = all
        .iter()
        .filter(|(_, id, status, _)| {
            let expected = if id == "mrtr-control-completes" {
                "SUCCESS"
            } else {
                "FAILURE"
            };
            status != expected
        })
        .map(|c| format!("{c:?}"))
        .collect();
    assert!(
        vacuous.is_empty(),
        "checks the naive client did not get as expected over stdio:\n{}\n{stderr}",
        vacuous.join("\n")
    );
    let embedded = std::fs::read_dir(repo().join("tests/probe/scenarios"))
        .unwrap()
        .count();
    assert_eq!(report["scenarios"].as_array().unwrap().len(), embedded);
    assert_eq!(report["summary"]["passed"], 1);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The foreign round arrived as a line of its own, and the naive client took it.
    let foreign = all
        .iter()
        .find(|(_, id, _, _)| id == "mrtr-foreign-id-round-ignored")
        .unwrap();
    assert!(foreign.3.contains("S-ghost"), "{foreign:?}");
    std::fs::remove_dir_all(&config).unwrap();
}

#[test]
fn over_stdio_a_client_that_does_nothing_fails_every_check() {
    let config = temp("nothing-stdio");
    let out = probe(
        &[
            "--transport",
            "stdio",
            "--command",
            "true",
            "--scenario",
            "mrtr-control-form-round",
            "--scenario",
            "mrtr-retry-after-transport-error",
        ],
        &config,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("probe: 0 passed, 2 failed, 0 skipped (2 scenarios, transport stdio"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the client never called `book`"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&config).unwrap();
}

fn relay(address: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
        .args(["probe", "--relay", address])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn hostile_bytes() -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..=255u8).collect();
    bytes.extend_from_slice(b"\n{\"a\":1,\"a\":2}\r\n\xff\xfe not json\n");
    bytes.extend(std::iter::repeat_n(b'y', 3 << 20));
    bytes
}

#[test]
fn the_relay_copies_stdin_to_the_probe_byte_for_byte_and_ends_with_stdin() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut child = relay(&address);
    let (mut socket, _) = listener.accept().unwrap();
    let sent = hostile_bytes();
    let mut stdin = child.stdin.take().unwrap();
    let writing = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            stdin.write_all(&sent).unwrap();
            // Dropped: the client's end of its messages.
        })
    };
    let mut received = Vec::new();
    socket.read_to_end(&mut received).unwrap();
    writing.join().unwrap();
    assert_eq!(received.len(), sent.len());
    assert!(received == sent, "the bytes differ");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_relay_copies_the_probe_to_stdout_byte_for_byte_and_ends_with_the_connection() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut child = relay(&address);
    // stdin stays open: only the connection's end may end the relay.
    let _stdin = child.stdin.take().unwrap();
    let (mut socket, _) = listener.accept().unwrap();
    let sent = hostile_bytes();
    let mut stdout = child.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut received = Vec::new();
        stdout.read_to_end(&mut received).unwrap();
        received
    });
    socket.write_all(&sent).unwrap();
    drop(socket);
    let received = reading.join().unwrap();
    assert_eq!(received.len(), sent.len());
    assert!(received == sent, "the bytes differ");
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let gone = listener.local_addr().unwrap().to_string();
    drop(listener);
    let out = Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
        .args(["probe", "--relay", &gone])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the probe"));
    let out = Command::new(env!("CARGO_BIN_EXE_mrtr-gate"))
        .args(["probe", "--relay", &gone, "--command", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--relay takes no other flag");
}

#[test]
fn progress_is_shown_per_scenario_and_a_client_that_cannot_start_shows_its_stderr() {
    let config = temp("no-start");
    let client = config.join("client.sh");
    std::fs::write(
        &client,
        "echo 'cannot find the SDK' >&2\nprintf '\\033[2Jerased\\n' >&2\nexit 3\n",
    )
    .unwrap();
    let command = format!("sh '{}'", client.display());
    let out = probe(
        &[
            "--command",
            &command,
            "--scenario",
            "mrtr-duplicate-input-key",
        ],
        &config,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("mrtr-gate probe: [1/1] mrtr-duplicate-input-key…"),
        "{stderr}"
    );
    assert!(
        stderr.contains("mrtr-gate probe: [1/1] mrtr-duplicate-input-key: "),
        "{stderr}"
    );
    assert!(
        stderr.contains("the client made no request and exited (status 3)"),
        "{stderr}"
    );
    assert!(stderr.contains("    cannot find the SDK"), "{stderr}");
    // What the client said is escaped: no escape sequence of its reaches the terminal.
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    let _ = std::fs::remove_dir_all(&config);
}
