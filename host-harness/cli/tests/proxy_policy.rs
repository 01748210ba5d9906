//! `mrtr-gate proxy --policy FILE` over HTTP: a round a `forbid` holds for is refused before
//! the client sees it (`policy_denied`, the binding ended with that reason in the trail, the
//! upstream asked nothing more); a round a `permit` holds for is granted at its retry without
//! anyone asked (here `--consent tty` with no terminal, which would refuse), the trail's
//! `consented` event naming the policy; a file with a mistake is a usage error with its line.
//!
//! Raw JSON-RPC written by the test against tests/peers/recording_http_server.py (a `book` tool
//! with a `seat` form round). Hang guards only.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::Value;
use support::raw::{call, gate, recording_upstream, retry};
use support::{post, proxy_listening, scratch};

fn events(trail: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(trail)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A proxy with `policy` (the file's text) and `extra` flags, in front of a recording server;
/// its URL, the folder, and the running children.
fn gated(
    name: &str,
    policy: &str,
    extra: &[&str],
) -> (String, std::path::PathBuf, Vec<support::Running>) {
    let dir = scratch(name);
    std::fs::write(dir.join("policy.cedar"), policy).unwrap();
    let (upstream_server, upstream) = recording_upstream(&dir);
    let mut proxy = gate(&dir);
    proxy
        .arg("--policy")
        .arg(dir.join("policy.cedar"))
        .args(extra);
    let (proxy, url) = proxy_listening(proxy, &upstream);
    (url, dir, vec![proxy, upstream_server])
}

#[test]
fn a_forbidden_round_is_refused_before_the_client_sees_it_and_ends_on_record() {
    let (url, dir, _running) = gated(
        "policy-deny",
        "@id(\"no-forms-for-book\")\nforbid (principal, action, resource == Mrtr::Tool::\"book\")\n  when { context.kinds.contains(\"form\") };\n",
        &[],
    );
    let answer = post(&url, &call(1, "book")).unwrap();
    let refused = &answer["error"]["data"]["mrtr_gate"];
    assert_eq!(refused["code"], "policy_denied", "{answer}");
    assert_eq!(refused["cause"], "peer", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-forms-for-book"),
        "{answer}"
    );
    assert!(
        answer.get("result").is_none(),
        "the round never reached the client"
    );
    // The trail: the round was received, then the binding ended with the policy's code.
    let events = events(&dir.join("audit.jsonl"));
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "policy_denied")
        .collect();
    assert_eq!(ended.len(), 1, "{events:#?}");
    // A retry of the refused round finds no round.
    let again = post(&url, &retry(&call(1, "book"), &Value::Null, 2)).unwrap();
    assert!(again.get("error").is_some(), "{again}");
    let received = std::fs::read_to_string(dir.join("received.jsonl")).unwrap();
    assert_eq!(
        received.lines().count(),
        1,
        "the upstream got the call only"
    );
}

#[test]
fn a_permitted_round_is_granted_by_its_policy_with_no_person_asked_and_the_trail_names_it() {
    // `--consent tty` with no terminal refuses every round it is asked about: only the policy
    // can grant this one.
    let (url, dir, _running) = gated(
        "policy-allow",
        "@id(\"alice-books\")\npermit (principal == Mrtr::User::\"alice\", action == Mrtr::Action::\"tools/call\", resource == Mrtr::Tool::\"book\");\n",
        &["--consent", "tty"],
    );
    let first = call(1, "book");
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let done = post(&url, &retry(&first, &round, 2)).unwrap();
    assert_eq!(done["result"]["content"][0]["text"], "booked 12A", "{done}");
    let events = events(&dir.join("audit.jsonl"));
    let consented: Vec<&Value> = events
        .iter()
        .filter(|e| e["consent_method"].is_string())
        .collect();
    assert_eq!(consented.len(), 1, "{events:#?}");
    assert_eq!(consented[0]["consent_method"], "policy_hook");
    assert_eq!(consented[0]["consent_receipt_id"], "policy:alice-books");

    // Another tool's round: no policy decides, the terminal is asked, and there is none.
    let other = call(3, "hold");
    let round = post(&url, &other).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let refused = post(&url, &retry(&other, &round, 4)).unwrap();
    assert_eq!(
        refused["error"]["data"]["mrtr_gate"]["code"], "consent_unavailable",
        "{refused}"
    );
}

#[test]
fn a_policy_file_with_a_mistake_is_a_usage_error_naming_its_line() {
    let dir = scratch("policy-usage");
    let file = dir.join("policy.cedar");
    std::fs::write(
        &file,
        "permit (principal, action, resource);\nforbid (principal, action, resource) when { context.nope };\n",
    )
    .unwrap();
    let out = gate(&dir)
        .arg("--policy")
        .arg(&file)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:2:", file.display())) && stderr.contains("policy_invalid"),
        "{stderr}"
    );
}
