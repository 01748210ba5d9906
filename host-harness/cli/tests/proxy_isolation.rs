//! The server `mrtr-gate proxy` spawns is a neighbour: in a session of its own and under
//! Landlock it cannot take the terminal (no controlling terminal, no terminal device by any
//! name, no keys pushed), cannot change the trail, its links or anchor, cannot read or replace
//! the key file, and cannot trace or signal the proxy; what a server needs (its own files,
//! `/dev/null`, `/dev/urandom`) it keeps. The hostile server (tests/peers/hostile/
//! neighbour_server.py) tries each move and reports what happened; the official SDK servers
//! running unchanged under the same isolation are proxy_sdk_clients.rs and
//! proxy_http_sdk_clients.rs.

#![cfg(test)]
#![cfg(target_os = "linux")]

mod support;

use mrtr_gate_host::reference_hosts::PseudoTerminal;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use support::{Proxy, root};

/// One run of the proxy over `server`, the client sending `lines` and leaving; what the client
/// got, line by line, and the proxy's stderr.
fn run(p: &Proxy, extra: &[&str], server: &[String], lines: &[&str]) -> (Vec<String>, String) {
    let argv = p.argv(extra, server);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut got = Vec::new();
    for line in lines {
        input.write_all(format!("{line}\n").as_bytes()).unwrap();
        // Each line is a request: read up to its answer (notifications before it are kept).
        loop {
            let mut back = String::new();
            if output.read_line(&mut back).unwrap() == 0 {
                break;
            }
            let done = back.contains("\"id\"");
            got.push(back);
            if done {
                break;
            }
        }
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (got, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_spawned_server_cannot_take_the_terminal_the_trail_the_key_or_the_proxy() {
    let p = Proxy::new("isolation");
    // A first run leaves a trail, its links and its anchor: a 2025-era elicitation refused.
    let legacy = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        r#"read line; echo '{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{}}'; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; cat >/dev/null"#
            .to_owned(),
    ];
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let (_, stderr) = run(&p, &[], &legacy, &[ping]);
    let anchors: Vec<_> = std::fs::read_dir(p.dir.join("anchors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(anchors.len(), 1, "{stderr}");
    let anchor = anchors[0].clone();
    let key_before = std::fs::read(&p.keys).unwrap();
    let trail_before = std::fs::read(&p.trail).unwrap();
    // A terminal of the user's the server could find by name.
    let terminal = PseudoTerminal::new().unwrap();
    let hostile = vec![
        "python3".to_owned(),
        root()
            .join("tests/peers/hostile/neighbour_server.py")
            .display()
            .to_string(),
        p.trail.display().to_string(),
        p.keys.display().to_string(),
        anchor.display().to_string(),
        terminal.path().display().to_string(),
    ];
    let (got, stderr) = run(&p, &[], &hostile, &[ping]);
    let report: Value = got
        .iter()
        .find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            (v["method"] == "notifications/message").then(|| v["params"]["data"].clone())
        })
        .unwrap_or_else(|| panic!("no report: {got:?} {stderr}"));
    for (name, outcome) in report.as_object().unwrap() {
        match name.as_str() {
            "write /dev/null" | "read /dev/urandom" => assert_eq!(outcome, "DONE", "{name}"),
            "session leader" => assert_eq!(outcome, true, "{name}"),
            _ => assert!(
                outcome.as_str().unwrap().starts_with("blocked"),
                "{name}: {outcome} ({report})"
            ),
        }
    }
    assert_eq!(report.as_object().unwrap().len(), 22, "{report}");
    assert!(
        !terminal.shown().contains('y'),
        "nothing typed into the terminal"
    );
    assert_eq!(std::fs::read(&p.keys).unwrap(), key_before);
    // The trail is as the first run left it, but for the root's anchor the proxy itself
    // appends as it stops (a line of its own, keyed and linked: `p.verify` checks it).
    let after = std::fs::read_to_string(&p.trail).unwrap();
    let before = String::from_utf8(trail_before).unwrap();
    let added = after
        .strip_prefix(before.as_str())
        .unwrap_or_else(|| panic!("the trail was changed: {after}"));
    for line in added.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            (&v["shard"], &v["event"]),
            (&json!("root"), &json!("anchor")),
            "{line}"
        );
    }
    p.verify();
}

#[test]
fn without_isolation_the_operator_is_warned_every_run() {
    let p = Proxy::new("no-isolation");
    let server = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        "cat >/dev/null".to_owned(),
    ];
    let (_, stderr) = run(&p, &["--insecure-no-server-isolation"], &server, &[]);
    assert!(
        stderr.contains("WARNING: --insecure-no-server-isolation"),
        "{stderr}"
    );
}

/// `--server-user`: the server runs as that user, with that group only (none of this user's),
/// or does not run at all; root and this process's own user are refused at start, as is a name
/// with no entry.
#[test]
fn a_server_user_runs_the_server_as_another_user_or_not_at_all() {
    let p = Proxy::new("server-user");
    let whoami = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        "echo uid=$(id -u) groups=$(id -G) >&2".to_owned(),
    ];
    // The owner of /proc/self is this process's effective user.
    let euid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    let own = euid.to_string();
    for refused in ["root", "0:0", own.as_str(), "no-such-user-here"] {
        let argv = p.argv(&["--server-user", refused], &whoami);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--server-user {refused}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--server-user"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let argv = p.argv(&["--server-user", "65534:65534"], &whoami);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let log = std::fs::read_to_string(&p.log).unwrap_or_default();
    if euid == 0 {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(log.trim(), "uid=65534 groups=65534", "{log}");
    } else {
        // Without the privilege to, the server never starts as this user instead.
        assert_ne!(out.status.code(), Some(0));
        assert!(!log.contains("uid="), "{log}");
    }
}
