//! `mrtr-gate call` under the host keys by default (docs/host-keys.md, "In `mrtr-gate`"): a
//! key file made 0600 in the config folder on first use (or named by flag or environment),
//! the user bound as a keyed pseudonym, the trail's lines keyed and its head anchored, a line
//! appended without the key caught by `verify-audit`; and `--insecure-no-host-keys` loud.
//! Each run gets its own HOME and config folder under a temporary directory: never the
//! real home. The server is a small Python script (python3 is on every machine the test
//! command runs on): one form round, then the result.

#![cfg(test)]

use mrtr_gate_host::host_keys::{AnchorCheck, HostKeys, Pseudonyms, verify_anchor};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if "requestState" in m.get("params", {}):
        r = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
    else:
        r = {"resultType": "input_required", "requestState": "s1", "inputRequests": {"go": {
            "method": "elicitation/create", "params": {"message": "Go?", "requestedSchema": {
                "type": "object", "properties": {"sure": {"type": "boolean"}}}}}}}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("mrtr-gate-keys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        let server = dir.join("server.py");
        std::fs::write(&server, SERVER).unwrap();
        std::fs::write(
            dir.join("answers.json"),
            json!({"go": {"action": "accept", "content": {"sure": true}}}).to_string(),
        )
        .unwrap();
        Self(dir)
    }

    fn home(&self) -> PathBuf {
        self.0.join("home")
    }

    fn trail(&self) -> PathBuf {
        self.0.join("audit.jsonl")
    }

    /// `mrtr-gate ARGS` with HOME here, no XDG_CONFIG_HOME and no key file variable.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mrtr-gate"));
        c.args(args)
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("MRTR_GATE_HOST_KEYS")
            .stdin(std::process::Stdio::null());
        c
    }

    /// One call of the server's tool, answered from the file with `--yes`.
    fn call(&self, extra: &[&str]) -> Output {
        let server = format!("python3 {}", self.0.join("server.py").display());
        let answers = self.0.join("answers.json");
        let trail = self.trail();
        let mut args = vec![
            "call",
            "--stdio",
            &server,
            "--user",
            "alice@example.com",
            "--tenant",
            "acme",
            "--audit",
            trail.to_str().unwrap(),
            "--answers",
            answers.to_str().unwrap(),
            "--yes",
            "--json",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["tools/call", "go", "{}"]);
        self.command(&args).output().unwrap()
    }

    fn verify(&self, extra: &[&str]) -> Output {
        let trail = self.trail();
        let mut args = vec!["verify-audit", trail.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.command(&args).output().unwrap()
    }

    /// The gate's events: every line but the root's anchors (docs/audit.md, "Shards and the
    /// root"), which `call` appends when it ends.
    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.trail())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["shard"] != "root")
            .collect()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ok(out: &Output) -> &Output {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn digest_of(name: &str) -> String {
    mrtr_gate_host::core::digest::sha256_hex(format!("\"{name}\"").as_bytes())
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The only anchor `call` keeps under `dir`.
fn the_anchor(dir: &Path) -> PathBuf {
    let anchors: Vec<PathBuf> = std::fs::read_dir(dir.join("anchors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(anchors.len(), 1, "{anchors:?}");
    anchors.into_iter().next().unwrap()
}

#[test]
fn call_runs_under_host_keys_made_on_first_use_in_the_config_folder() {
    let d = Dir::new("default");
    let first = d.call(&[]);
    ok(&first);
    let config = d.home().join(".config/mrtr-gate");
    let key_file = config.join("host-keys.json");
    assert!(
        stderr(&first).contains(&format!("created a host key in {}", key_file.display())),
        "{}",
        stderr(&first)
    );
    #[cfg(unix)]
    {
        assert_eq!(mode(&key_file), 0o600, "the key file is its owner's alone");
        assert_eq!(mode(&config), 0o700);
    }
    let text = std::fs::read_to_string(&key_file).unwrap();
    let keys = HostKeys::from_key_file(&text).unwrap();
    // The user and tenant reach the gate, and the trail, as keyed pseudonyms.
    let names = Pseudonyms::new(keys.clone());
    let events = d.events();
    assert_eq!(events.len(), 4, "{events:?}");
    for e in &events {
        assert_eq!(
            e["user_sha256"],
            json!(digest_of(&names.user("alice@example.com")))
        );
        assert_eq!(e["tenant_sha256"], json!(digest_of(&names.tenant("acme"))));
        assert_ne!(e["user_sha256"], json!(digest_of("alice@example.com")));
    }
    // Every line keyed beside the trail, the head anchored beside the key file.
    let trail = std::fs::read_to_string(d.trail()).unwrap();
    let links = std::fs::read_to_string(d.0.join("audit.jsonl.links")).unwrap();
    let anchor = std::fs::read_to_string(the_anchor(&config)).unwrap();
    assert_eq!(
        verify_anchor(&trail, &links, &anchor, &keys),
        // The gate's four lines and the root's anchor the call wrote as it ended.
        AnchorCheck::Intact { events: 5 }
    );
    let verified = d.verify(&[]);
    ok(&verified);
    assert!(
        String::from_utf8_lossy(&verified.stdout).contains("every line keyed, ends at its anchor")
    );

    // The next run uses the same key (no new one), and the trail goes on verifying.
    let second = d.call(&[]);
    ok(&second);
    assert!(!stderr(&second).contains("created a host key"));
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), text);
    assert_eq!(d.events()[4]["user_sha256"], events[0]["user_sha256"]);
    ok(&d.verify(&[]));
}

#[test]
fn a_line_appended_without_the_key_fails_verification() {
    let d = Dir::new("appended");
    ok(&d.call(&[]));
    // A forged `submitted` line, chained onto the head as the core would: the chain alone
    // verifies it.
    let text = std::fs::read_to_string(d.trail()).unwrap();
    // The gate's last line (the root's anchor comes after it: `call` anchors as it ends).
    let last = text
        .lines()
        .rev()
        .find(|l| !l.contains("\"shard\":\"root\""))
        .unwrap();
    let mut forged: Value = serde_json::from_str(last).unwrap();
    assert_eq!(forged["seq"], json!(4));
    forged["event"] = json!("submitted");
    forged["seq"] = json!(5);
    forged["prev_sha256"] = json!(mrtr_gate_host::core::digest::sha256_hex(last.as_bytes()));
    let line = mrtr_gate_host::core::canonical::to_canonical(&forged);
    std::fs::write(d.trail(), format!("{text}{line}\n")).unwrap();
    let extended = std::fs::read_to_string(d.trail()).unwrap();
    assert_eq!(
        mrtr_gate_host::core::audit::verify_chain(extended.lines()),
        Ok(6)
    );
    let out = d.verify(&[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "line 5 in shard {} has no link made with the host key",
            forged["shard"].as_str().unwrap()
        )),
        "{}",
        stderr(&out)
    );
    // The same through the library; and nothing verifies under another key.
    let other = HostKeys::new("k-other", &[9; 32]).unwrap();
    let links = std::fs::read_to_string(d.0.join("audit.jsonl.links")).unwrap();
    let keys = HostKeys::from_key_file(
        &std::fs::read_to_string(d.home().join(".config/mrtr-gate/host-keys.json")).unwrap(),
    )
    .unwrap();
    let anchor = std::fs::read_to_string(the_anchor(&d.home().join(".config/mrtr-gate"))).unwrap();
    assert_eq!(
        verify_anchor(&extended, &links, &anchor, &keys),
        AnchorCheck::Unkeyed {
            shard: forged["shard"].as_str().unwrap().to_owned(),
            seq: 5
        }
    );
    assert_eq!(
        verify_anchor(&extended, &links, &anchor, &other),
        AnchorCheck::BadAnchor
    );
    // Cut back to what was anchored, it is intact again; cut further, short of its anchor.
    std::fs::write(d.trail(), &text).unwrap();
    ok(&d.verify(&[]));
    // The gate's fourth line and the root's anchor after it cut away: the chain alone cannot
    // tell, the keyed anchor can.
    let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(d.trail(), cut).unwrap();
    let out = d.verify(&[]);
    assert!(
        stderr(&out).contains(&format!(
            "cut short in shard {}: 3 events, its anchor covers 4",
            forged["shard"].as_str().unwrap()
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_key_file_can_be_named_and_one_open_to_others_is_refused() {
    let d = Dir::new("named");
    let named = d.0.join("elsewhere/keys.json");
    ok(&d.call(&["--host-keys", named.to_str().unwrap()]));
    assert!(named.exists());
    assert!(!d.home().join(".config/mrtr-gate").exists());
    ok(&d.verify(&["--host-keys", named.to_str().unwrap()]));
    // The environment variable names it too; XDG_CONFIG_HOME moves the config folder.
    let by_env = d.0.join("env-keys.json");
    let server = format!("python3 {}", d.0.join("server.py").display());
    let out = d
        .command(&["list", "--stdio", &server, "tools"])
        .env("MRTR_GATE_HOST_KEYS", &by_env)
        .output()
        .unwrap();
    assert!(by_env.exists(), "{}", stderr(&out));
    let xdg = d.0.join("xdg");
    let _ = d
        .command(&["list", "--stdio", &server, "tools"])
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    assert!(xdg.join("mrtr-gate/host-keys.json").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&named, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = d.call(&["--host-keys", named.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["code"], "usage", "{report}");
        assert!(
            report["message"].as_str().unwrap().contains("chmod 600"),
            "{report}"
        );
    }
}

#[test]
fn without_host_keys_the_call_says_so_every_run() {
    let d = Dir::new("insecure");
    for _ in 0..2 {
        let out = d.call(&["--insecure-no-host-keys"]);
        ok(&out);
        assert!(
            stderr(&out).contains("WARNING: --insecure-no-host-keys"),
            "{}",
            stderr(&out)
        );
    }
    assert!(!d.home().join(".config").exists(), "no key file made");
    assert!(!d.0.join("audit.jsonl.links").exists());
    assert_eq!(
        d.events()[0]["user_sha256"],
        json!(digest_of("alice@example.com"))
    );
    // Such a trail has no links: verified with keys it fails, without them (loudly) it passes.
    assert!(!d.verify(&[]).status.success());
    let out = d.verify(&["--insecure-no-host-keys"]);
    ok(&out);
    assert!(stderr(&out).contains("WARNING"));
}

#[cfg(unix)]
#[test]
fn a_key_file_not_the_users_alone_is_refused_by_every_command_that_reads_it() {
    use std::os::unix::fs::PermissionsExt;
    let d = Dir::new("not-ours");
    let named = d.0.join("keys/keys.json");
    let flag = ["--host-keys", named.to_str().unwrap()];
    ok(&d.call(&flag));
    let refused = |what: &str| {
        let out = d.call(&flag);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let out = d.verify(&flag);
        assert!(!out.status.success(), "verify-audit, {what}");
        (report["message"].as_str().unwrap().to_owned(), stderr(&out))
    };
    // A folder others may write: they could swap the key for theirs.
    std::fs::set_permissions(
        named.parent().unwrap(),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let (call, verify) = refused("a folder others write");
    for said in [call, verify] {
        assert!(said.contains("may be written by others"), "{said}");
    }
    std::fs::set_permissions(
        named.parent().unwrap(),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    ok(&d.call(&flag));
    // A key file another user owns (planted before the first run, or in the moment it was
    // being made): only root can make one here to test with.
    if std::os::unix::fs::chown(&named, Some(65534), Some(65534)).is_ok() {
        let (call, verify) = refused("another user's file");
        for said in [call, verify] {
            assert!(said.contains("belongs to uid 65534"), "{said}");
        }
    } else {
        eprintln!("not root: a key file of another user's cannot be made to test with");
    }
}
