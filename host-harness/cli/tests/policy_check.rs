//! `mrtr-gate policy check FILE`: the example policies are valid (their ids on stdout, exit 0);
//! a refused file names each problem with its line and code on stderr (exit 1, nothing on
//! stdout); a file that cannot be read is exit 2.

#![cfg(test)]

mod support;

use std::process::Command;
use support::{bin, root, scratch};

fn check(file: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .args(["policy", "check"])
        .arg(file)
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
