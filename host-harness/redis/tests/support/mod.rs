//! A redis-server of the test's own, on a free loopback port, so that stopping, pausing or
//! blocking it disturbs no other test; the shared deployments the test command starts; and
//! the audit entries the trail's suites append.

#![allow(dead_code, reason = "each test binary uses a part")]

use mrtr_gate_host::core::digest::sha256_hex;
use mrtr_gate_host::core::host::{AuditEntry, ChainHead};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How many ports (or restarts on the same port) are tried.
const ATTEMPTS: usize = 20;

pub struct OwnRedis {
    pub port: u16,
    child: Option<Child>,
}

impl OwnRedis {
    pub fn start() -> Option<Self> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-server is not installed (scripts/redis start)"
            );
            eprintln!("redis-server is not installed: the fault tests are skipped");
            return None;
        }
        // A port is picked, freed, then given to redis-server, so another process can take it
        // in between: the server then exits before it says it is ready, and another port is
        // tried. A retry on that event, never on a timer.
        for _ in 0..ATTEMPTS {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            // A directory of its own for a snapshot a test asks for (`SAVE`), loaded again
            // when the server restarts; none is written otherwise (`--save ""`).
            let _ = std::fs::remove_dir_all(dir(port));
            std::fs::create_dir_all(dir(port)).unwrap();
            let mut r = Self { port, child: None };
            if r.try_up() {
                return Some(r);
            }
        }
        panic!("redis-server could not listen on any of {ATTEMPTS} free ports");
    }

    /// Starts the server again on its port (after [`Self::down`]).
    #[allow(dead_code, reason = "not every test binary restarts its server")]
    pub fn up(&mut self) {
        // The port was this server's until `down`; another process taking it in between is
        // the rare event retried here.
        for _ in 0..ATTEMPTS {
            if self.try_up() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server could not listen on port {} again", self.port);
    }

    /// Starts redis-server on the port; true once its log says it accepts connections (it
    /// listens by then, so no poll is needed, and a poll could connect to itself), false when
    /// it exits first (the port was taken). No deadline: the server either gets ready or
    /// exits.
    fn try_up(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(dir(self.port))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines.by_ref().map_while(Result::ok).any(|l| {
            l.to_ascii_lowercase()
                .contains("ready to accept connections")
        });
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        // Its later log is drained, never left to fill the pipe.
        std::thread::spawn(move || for _ in lines {});
        self.child = Some(child);
        true
    }

    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.down();
        let _ = std::fs::remove_dir_all(dir(self.port));
    }
}

fn dir(port: u16) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mrtr-gate-own-redis-{port}"))
}

/// The shared Redis deployments the test command starts, each named: one server
/// (MRTR_GATE_REDIS_URL) and a Cluster (MRTR_GATE_REDIS_CLUSTER_URL). A missing one fails on
/// CI and is skipped, said so, elsewhere.
pub fn deployments() -> Vec<(&'static str, String)> {
    [
        ("redis", "MRTR_GATE_REDIS_URL", "scripts/redis start"),
        (
            "redis-cluster",
            "MRTR_GATE_REDIS_CLUSTER_URL",
            "scripts/redis cluster start",
        ),
    ]
    .into_iter()
    .filter_map(|(name, var, script)| match std::env::var(var) {
        Ok(url) => Some((name, url)),
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{var} is not set ({script})"
            );
            eprintln!("{var} is not set: the {name} half is skipped");
            None
        }
    })
    .collect()
}

/// An entry of `shard` that extends `head`, its line carrying `body`.
pub fn entry_in(shard: &str, head: &ChainHead, body: &str) -> AuditEntry {
    let seq = head.seq + 1;
    let line = format!(
        "{{\"body\":\"{body}\",\"prev_sha256\":\"{}\",\"seq\":{seq},\"shard\":\"{shard}\"}}",
        head.event_sha256
    );
    AuditEntry {
        shard: shard.to_owned(),
        seq,
        prev_sha256: head.event_sha256.clone(),
        event_sha256: sha256_hex(line.as_bytes()),
        line,
    }
}
