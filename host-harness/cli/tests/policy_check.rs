//! `mrtr-gate policy check FILE`: the example policies are valid (their ids on stdout, exit 0);
//! a refused file names each problem with its line and code on stderr (exit 1, nothing on
//! stdout); a file that cannot be read is exit 2. `mrtr-gate policy explain` refuses what it
//! cannot read (its rounds explained against a real capture: proxy_policy.rs).

#![cfg(test)]

mod support;

use std::process::Command;
use support::{bin, root, scratch};

/// `mrtr-gate policy ARGS`: the exit code, stdout and stderr.
fn policy(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .arg("policy")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_example_policy_is_valid_and_a_bad_file_is_refused_line_by_line() {
    for name in [
        "deny-url-outside-allowed.cedar",
        "person-for-secrets.cedar",
        "trusted-state-only.cedar",
        "no-deprecated.cedar",
    ] {
        let (code, stdout, stderr) = check(&root().join("examples/policies").join(name));
        assert_eq!(code, Some(0), "{name}: {stderr}");
        assert!(
            stdout.contains("valid against the round schema"),
            "{stdout}"
        );
    }
    let (_, stdout, _) = check(&root().join("examples/policies/person-for-secrets.cedar"));
    assert!(
        stdout
            .trim_end()
            .ends_with("secrets-need-a-person, forms-granted"),
        "{stdout}"
    );

    let dir = scratch("policy-check");
    let bad = dir.join("bad.cedar");
    std::fs::write(
        &bad,
        "permit (principal, action, resource);\n@id(\"x\")\nforbid (principal, action, resource)\n  when { context.nope == 1 };\n",
    )
    .unwrap();
    let (code, stdout, stderr) = check(&bad);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let first = stderr.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("{}:4:", bad.display())),
        "{first}"
    );
    assert!(first.contains(": policy_invalid: "), "{first}");
    assert!(first.contains("`nope`"), "{first}");

    std::fs::write(&bad, "permit (principal action);\n").unwrap();
    let (code, _, stderr) = check(&bad);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(":1:") && stderr.contains("policy_unparsable"),
        "{stderr}"
    );

    let (code, _, stderr) = check(&dir.join("missing.cedar"));
    assert_eq!(code, Some(2), "{stderr}");
}

fn check(file: &std::path::Path) -> (Option<i32>, String, String) {
    policy(&["check".as_ref(), file.as_os_str()])
}

fn explain(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let mut all = vec![std::ffi::OsStr::new("explain")];
    all.extend_from_slice(args);
    policy(&all)
}

/// `policy explain` over a hostile or mistaken input: a capture line that is no JSON, one past
/// the limit, a request the capture does not hold, a view that does not read, a refused policy
/// file. Each is its exit status and a line on stderr, never a crash and never a decision.
#[test]
fn explain_refuses_what_it_cannot_read_and_says_when_no_round_is_there() {
    let dir = scratch("policy-explain-hostile");
    let policy = root().join("examples/policies/deny-url-outside-allowed.cedar");
    let capture = dir.join("capture.jsonl");
    let view = dir.join("view.json");
    let who = ["--user", "alice", "--tenant", "acme"].map(std::ffi::OsStr::new);
    let run = |extra: &[&std::ffi::OsStr]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![policy.as_os_str()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&who);
        explain(&args)
    };
    let by_capture = [
        std::ffi::OsStr::new("--capture"),
        capture.as_os_str(),
        std::ffi::OsStr::new("--request-id"),
        std::ffi::OsStr::new("mg-1"),
    ];

    std::fs::write(&capture, "{\"kind\":\"request\"\nnot json\n").unwrap();
    let (code, stdout, stderr) = run(&by_capture);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stdout.is_empty() && stderr.contains(":1: not a capture line"),
        "{stderr}"
    );

    // A line past 64 MiB is refused as such, never read whole.
    let file = std::fs::File::create(&capture).unwrap();
    file.set_len(64 * 1024 * 1024 + 10).unwrap();
    let (code, _, stderr) = run(&by_capture);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("a line over"), "{stderr}");

    // Another call's lines only: no round to explain.
    std::fs::write(
        &capture,
        "{\"kind\":\"request\",\"request_id\":\"mg-2\",\"method\":\"tools/call\",\"params\":{}}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run(&by_capture);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty() && stderr.contains("no round"), "{stderr}");

    // A view that is no view.
    for text in ["", "{}", "[1]", "{\"view\":\"mrtr-gate/consent-view/v2\"}"] {
        std::fs::write(&view, text).unwrap();
        let (code, stdout, stderr) = run(&[std::ffi::OsStr::new("--view"), view.as_os_str()]);
        assert_eq!(code, Some(2), "{text:?}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }

    // A policy file with a mistake: its problems, nothing explained.
    let bad = dir.join("bad.cedar");
    std::fs::write(
        &bad,
        "forbid (principal, action, resource) when { context.nope };\n",
    )
    .unwrap();
    let mut args: Vec<&std::ffi::OsStr> = vec![bad.as_os_str()];
    args.extend_from_slice(&[std::ffi::OsStr::new("--view"), view.as_os_str()]);
    args.extend_from_slice(&who);
    let (code, _, stderr) = explain(&args);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("policy_invalid"), "{stderr}");
}
