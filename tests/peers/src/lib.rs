//! The repository's test peers (the servers beside this crate in `tests/peers/`), started for
//! a Rust test and stopped when dropped: one builder the crates' tests share, so no crate's
//! tests carry their own copy of how a peer is started.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A file of `tests/peers/`.
pub fn peer_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A peer server listening on a loopback port, until dropped (its stdin closed, then killed).
#[derive(Debug)]
pub struct Peer {
    child: Child,
    /// Its MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl Peer {
    /// The differential server (`python_sdk/differential_server.py`): answers different
    /// readers read differently, a harmless result where one looks and `REAL-UNJUDGED` where
    /// another looks; the tool name picks the answer (`<first|retry>:<case>`, the cases in
    /// its docstring).
    ///
    /// # Panics
    /// When `python3` cannot start it or it prints no port: a test's setup failed.
    #[allow(clippy::expect_used)]
    pub fn differential() -> Self {
        let mut child = Command::new("python3")
            .arg(peer_file("python_sdk/differential_server.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts the differential server");
        let mut port = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out)
                .read_line(&mut port)
                .expect("the differential server prints its port");
        }
        let url = format!("http://127.0.0.1:{}/mcp", port.trim());
        Self { child, url }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
