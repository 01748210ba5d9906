//! `mrtr-gate-testkit bench-proxy --peer-bin` relays the same server to the same client through
//! the peer (the Rust `mcp-proxy` 0.6.0, which scripts/mcp-proxy installs) and through
//! `mrtr-gate proxy` (gate off, gated, and gated with metrics scraped and traces exported):
//! every call of every row comes back with what the server said (the driver checks each), and
//! the report has every row and the goals' ratios. Figures are not judged here: a test is no
//! benchmark (docs/proxy.md, "Side by side", has the measured ones).

#![cfg(test)]
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The target folder: the test kit's binary is in its `debug/`.
fn target() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mrtr-gate-testkit"))
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .to_path_buf()
}

/// A child killed when the test is done with it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_peer_and_mrtr_gate_relay_the_same_calls_and_every_row_is_reported() {
    let target = target();
    let peer = target.join("tools/mcp-proxy-0.6.0/bin/mcp-proxy");
    assert!(
        peer.exists(),
        "{} is missing: ./scripts/mcp-proxy installs it (./scripts/test runs it)",
        peer.display()
    );
    let python = std::env::var_os("MRTR_GATE_VENV")
        .map_or_else(|| target.join("python-venv"), PathBuf::from)
        .join("bin/python");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut server = Command::new(python)
        .arg(root.join("tests/peers/python_sdk/server.py"))
        .args(["http", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the Python SDK's venv (./scripts/python --install)");
    let stdout = server.stdout.take().unwrap();
    let _server = Running(server);
    let mut ready = String::new();
    BufReader::new(stdout).read_line(&mut ready).unwrap();
    let url = ready
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();

    let out = Command::new(env!("CARGO_BIN_EXE_mrtr-gate-testkit"))
        .args(["bench-proxy", "--http", &url, "--side-by-side-only"])
        .arg("--peer-bin")
        .arg(&peer)
        .arg("--proxy-bin")
        .arg(target.join("debug/mrtr-gate"))
        .args(["--rounds", "5", "--clients", "1,2", "--passes", "1"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for row in [
        "| direct (no proxy) |",
        "| mcp-proxy 0.6.0 (pass-through) |",
        "| mrtr-gate proxy, gate off (pass-through) |",
        "| mrtr-gate proxy, gated |",
        "| mrtr-gate proxy, gated, metrics scraped and traces exported |",
    ] {
        let line = report
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row} in\n{report}"));
        assert_eq!(line.matches(" us |").count(), 4, "{line}");
    }
    assert!(
        report.contains("- added p50 over the peer's: pass-through "),
        "{report}"
    );
    assert!(report.contains("- metrics and traces on: p50 "), "{report}");
    // The spans reached the sink (the proxy drained first, so its last ones too).
    let exported = report
        .split(" bytes of spans exported")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(exported > 0, "{report}");
}
