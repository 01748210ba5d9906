//! `mrtr-gate proxy --config FILE` and `--print-config`: a file's keys are the flags, checked
//! before anything starts with the file, the line and the key named; the command line wins;
//! the printed configuration reads back as the same configuration; and what a run will write
//! (the links file, the anchor folder) is checked at its start, each with one message.

#![cfg(test)]
#![cfg(unix)]

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::{bin, root, scratch};

fn proxy(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("proxy")
        .args(args)
        .output()
        .unwrap()
}

fn config(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_files_keys_are_the_flags_and_the_command_line_wins() {
    let dir = scratch("config-keys");
    let file = config(
        &dir,
        "proxy.toml",
        r#"# a proxy
listen = "127.0.0.1:0"
upstream = "http://127.0.0.1:9/mcp"
redis = "redis://:s3cret@127.0.0.1:6379/0"
allow-origin = ["https://a.example", "https://b.example"]
consent = ["command", "approve --strict"]
drain-timeout = 30
admin = 9464
allow-legacy-server-requests = false
"#,
    );
    let out = proxy(&["--config", &file, "--drain-timeout", "5", "--print-config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    for line in [
        "listen = \"127.0.0.1:0\"",
        "upstream = \"http://127.0.0.1:9/mcp\"",
        "redis = \"redis://:***@127.0.0.1:6379/0\"",
        "allow-origin = [\"https://a.example\", \"https://b.example\"]",
        "consent = [\"command\", \"approve --strict\"]",
        "drain-timeout = 5",
        "admin = 9464",
        "allow-legacy-server-requests = false",
        "tenant = \"default\"",
    ] {
        assert!(printed.lines().any(|l| l == line), "{line} in\n{printed}");
    }
    assert!(!printed.contains("s3cret"), "{printed}");
    // What it prints is a config file: read back, it is the same configuration (the masked
    // password aside).
    let again = config(&dir, "again.toml", &printed.replace(":***@", ":s3cret@"));
    let out = proxy(&["--config", &again, "--print-config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), printed);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_mistake_in_the_file_names_its_line_and_key() {
    let dir = scratch("config-mistakes");
    for (text, line, says) in [
        (
            "audit = \"t.jsonl\"\n\ncolour = \"red\"\n",
            3,
            "unknown key `colour`",
        ),
        (
            "audit = \"t\"\ndrain-timeout = \"ten\"\n",
            2,
            "`drain-timeout`",
        ),
        ("audit = \"t\"\nengines = 100\n", 2, "`engines`"),
        (
            "audit = \"t\"\ninsecure-no-server-isolation = \"yes\"\n",
            2,
            "true or false",
        ),
        ("audit = [\"a\", \"b\"]\n", 1, "one value, not an array"),
        (
            "audit = \"t\"\nconfig = \"other.toml\"\n",
            2,
            "unknown key `config`",
        ),
        ("audit = \"t\"\n[listen]\nx = 1\n", 2, "`listen`"),
        ("audit = \"t\"\ncommand = []\n", 2, "`command` is empty"),
        ("audit = \"t\"\nthis is not toml\n", 2, "not TOML"),
    ] {
        let file = config(&dir, "bad.toml", text);
        let out = proxy(&["--config", &file, "--print-config"]);
        assert_eq!(out.status.code(), Some(2), "{text}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains(&format!("{file}:{line}: ")) && said.contains(says),
            "{text}\n{said}"
        );
    }
    let out = proxy(&["--config", &dir.join("none.toml").display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("none.toml"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_from_a_config_file_gates_as_the_same_flags_would() {
    let dir = scratch("config-run");
    std::fs::create_dir_all(dir.join("gate")).unwrap();
    std::fs::create_dir_all(dir.join("server")).unwrap();
    let file = config(
        &dir,
        "proxy.toml",
        &format!(
            "audit = {:?}\nhost-keys = {:?}\nserver-log = {:?}\nuser = \"alice\"\ncommand = [\"python3\", {:?}, {:?}]\n",
            dir.join("gate/audit.jsonl"),
            dir.join("gate/host-keys.json"),
            dir.join("gate/server.log"),
            root().join("tests/peers/recording_server.py"),
            dir.join("server/received.jsonl"),
        ),
    );
    let mut child = Command::new(bin())
        .args(["proxy", "--config", &file])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::{BufRead, Write};
    let mut input = child.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "book", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}});
    writeln!(input, "{call}").unwrap();
    input.flush().unwrap();
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    let round: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    drop(input);
    let _ = child.wait();
    let trail = std::fs::read_to_string(dir.join("gate/audit.jsonl")).unwrap();
    assert!(trail.contains("\"event\":\"received\""), "{trail}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_a_run_will_write_is_checked_at_its_start() {
    let dir = scratch("config-start");
    let keys = dir.join("host-keys.json").display().to_string();
    // The links file cannot be opened (a folder is in its place).
    let trail = dir.join("a.jsonl");
    std::fs::create_dir_all(dir.join("a.jsonl.links")).unwrap();
    let out = proxy(&[
        "--audit",
        &trail.display().to_string(),
        "--host-keys",
        &keys,
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the audit links file") && stderr(&out).contains("a.jsonl.links"),
        "{}",
        stderr(&out)
    );
    // The anchor's folder cannot be made (a file is in the way).
    std::fs::write(dir.join("blocked"), "").unwrap();
    let out = proxy(&[
        "--audit",
        &dir.join("b.jsonl").display().to_string(),
        "--host-keys",
        &keys,
        "--audit-anchor",
        &dir.join("blocked/anchor").display().to_string(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the anchor folder") && stderr(&out).contains("blocked"),
        "{}",
        stderr(&out)
    );
    // An admin address already taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = proxy(&[
        "--audit",
        &dir.join("c.jsonl").display().to_string(),
        "--host-keys",
        &keys,
        "--admin",
        &addr,
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("--admin {addr}")),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
