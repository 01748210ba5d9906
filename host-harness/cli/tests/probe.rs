//! `mrtr-gate probe` end to end: `mrtr-gate call` (tests/probe/clients/cli-call.sh) passes
//! every check of every scenario but those tests/probe/expected-skips.json lists for it, which
//! are SKIPPED (it takes no MRTR fields, cannot cancel a call in flight, and declares both elicitation modes); the naive client fails and the run exits 1; unknown
//! scenarios and hostile scenario files are usage errors (exit 2) before any client runs.

#![cfg(test)]
#![cfg(unix)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

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
