//! What the `mrtr-gate proxy` tests share: the built command, the official SDK clients that
//! spawn it as their stdio server (tests/peers/python_sdk/proxy_client.py,
//! host-harness/node/test/proxy-stdio-client.mjs), the SDK servers behind it, and readers of
//! its audit trail.
//!
//! The clients need the Python SDK's venv (`./scripts/python --install`) and the Node
//! packages (`npm ci` in host-harness/node and tests/peers/ts_sdk); `scripts/test` installs
//! them before the Rust tests run.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The built `mrtr-gate`.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mrtr-gate"))
}

/// The Python SDK's venv interpreter (`$MRTR_GATE_VENV`, else `<target>/python-venv`).
pub fn python() -> PathBuf {
    let venv = std::env::var_os("MRTR_GATE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // target/debug/mrtr-gate → target
            bin()
                .parent()
                .and_then(Path::parent)
                .map(|t| t.join("python-venv"))
                .unwrap()
        });
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/python --install",
        python.display()
    );
    python
}

/// Node, with the TypeScript SDK client and server installed.
pub fn node() -> PathBuf {
    for package in [
        "host-harness/node/node_modules/@modelcontextprotocol/client",
        "tests/peers/ts_sdk/node_modules/@modelcontextprotocol/server",
    ] {
        assert!(
            root().join(package).exists(),
            "{package} is missing: run npm ci in its folder"
        );
    }
    PathBuf::from("node")
}

/// A fresh folder of its own for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mrtr-gate-proxy-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The Python SDK's server (tests/peers/python_sdk/server.py) over stdio.
pub fn python_server() -> Vec<String> {
    vec![
        python().display().to_string(),
        root()
            .join("tests/peers/python_sdk/server.py")
            .display()
            .to_string(),
    ]
}

/// The TypeScript SDK's server (tests/peers/ts_sdk/server.mjs) over stdio.
pub fn ts_server() -> Vec<String> {
    vec![
        node().display().to_string(),
        root()
            .join("tests/peers/ts_sdk/server.mjs")
            .display()
            .to_string(),
    ]
}

/// An SDK server (`script`, run by `program`) over streamable HTTP on a free loopback port;
/// its `/mcp` URL (see [`listening`]).
fn sdk_server_http(program: &Path, script: &str) -> (Running, String) {
    let mut server = Command::new(program);
    server.arg(root().join(script)).args(["http", "0"]);
    listening(server)
}

/// The Python SDK's server (tests/peers/python_sdk/server.py) over streamable HTTP.
pub fn python_server_http() -> (Running, String) {
    sdk_server_http(&python(), "tests/peers/python_sdk/server.py")
}

/// The TypeScript SDK's server (tests/peers/ts_sdk/server.mjs) over streamable HTTP.
pub fn ts_server_http() -> (Running, String) {
    sdk_server_http(&node(), "tests/peers/ts_sdk/server.mjs")
}

/// One run of the proxy: its folder, trail, server log and host keys.
pub struct Proxy {
    /// The test's folder.
    pub dir: PathBuf,
    /// `--audit`.
    pub trail: PathBuf,
    /// `--server-log`.
    pub log: PathBuf,
    /// `--host-keys`.
    pub keys: PathBuf,
}

impl Proxy {
    /// A proxy run in a fresh folder.
    pub fn new(name: &str) -> Self {
        let dir = scratch(name);
        Self {
            trail: dir.join("trail.jsonl"),
            log: dir.join("server.log"),
            keys: dir.join("host-keys.json"),
            dir,
        }
    }

    /// `mrtr-gate proxy --audit … --host-keys … --server-log … EXTRA -- SERVER`.
    pub fn argv(&self, extra: &[&str], server: &[String]) -> Vec<String> {
        let trail = self.trail.display().to_string();
        self.argv_on(&["--audit", &trail], extra, server)
    }

    /// The same with the trail flags given (`--redis URL …`).
    pub fn argv_on(&self, trail: &[&str], extra: &[&str], server: &[String]) -> Vec<String> {
        let mut argv = vec![bin().display().to_string(), "proxy".into()];
        argv.extend(trail.iter().map(|s| (*s).to_owned()));
        argv.extend([
            "--host-keys".into(),
            self.keys.display().to_string(),
            "--server-log".into(),
            self.log.display().to_string(),
            "--user".into(),
            "alice".into(),
        ]);
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        argv.push("--".into());
        argv.extend(server.iter().cloned());
        argv
    }

    /// `mrtr-gate proxy --audit … --host-keys … --user alice` serving HTTP in front of
    /// `upstream`; the URL it says it listens on.
    pub fn http(&self, upstream: &str) -> (Running, String) {
        let mut command = Command::new(bin());
        command
            .arg("proxy")
            .arg("--audit")
            .arg(&self.trail)
            .arg("--host-keys")
            .arg(&self.keys)
            .args(["--user", "alice"]);
        proxy_listening(command, upstream)
    }

    /// The trail's events.
    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.trail)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `mrtr-gate verify-audit` of the trail under the run's keys: the chain, every keyed
    /// link and the anchor.
    pub fn verify(&self) {
        let out = Command::new(bin())
            .arg("verify-audit")
            .arg(&self.trail)
            .arg("--host-keys")
            .arg(&self.keys)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "verify-audit: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Proxy {
    /// A passing test leaves nothing behind; a failing one leaves its folder to look at.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The client's report: one JSON object per call.
pub struct Report {
    /// Per call.
    pub calls: Vec<Value>,
    /// The client's stderr (the proxy's own lines land there too).
    pub stderr: String,
}

fn report(out: Output) -> Report {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the client failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    Report {
        calls: stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\nstderr: {stderr}"))
            })
            .collect(),
        stderr,
    }
}

/// The Python SDK client (automatic MRTR mode) with `proxy` as its stdio server.
pub fn python_client(calls: &Value, proxy: &[String]) -> Report {
    let out = Command::new(python())
        .arg(root().join("tests/peers/python_sdk/proxy_client.py"))
        .arg(calls.to_string())
        .arg("--")
        .args(proxy)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    report(out)
}

/// The TypeScript SDK client (automatic MRTR mode) with `proxy` as its stdio server.
pub fn ts_client(calls: &Value, proxy: &[String]) -> Report {
    ts_client_with(&[], calls, proxy)
}

/// The same, with the client's `flags` (`--legacy`: the 2025 handshake, the SDK's default).
pub fn ts_client_with(flags: &[&str], calls: &Value, proxy: &[String]) -> Report {
    let out = Command::new(node())
        .arg(root().join("host-harness/node/test/proxy-stdio-client.mjs"))
        .args(flags)
        .arg(calls.to_string())
        .arg("--")
        .args(proxy)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    report(out)
}

/// The events of one binding (by its `request_id`), in order.
pub fn binding<'a>(events: &'a [Value], request_id: &Value) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| &e["request_id"] == request_id)
        .collect()
}

/// Every binding's `request_id`, in the order they were first seen.
pub fn bindings(events: &[Value]) -> Vec<Value> {
    let mut ids: Vec<Value> = Vec::new();
    for e in events {
        let id = &e["request_id"];
        if !id.is_null() && !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids
}

/// A child killed when the test is done with it, pass or fail.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How long a child may take to say where it listens: a backstop against a hang (its expiry
/// fails the test), never a pace.
const READY_GUARD: Duration = Duration::from_secs(300);

/// The rest of the first line of `from` that starts with `prefix`; every later line is
/// drained on a thread of its own, so the child never blocks on a full pipe. A child that
/// ends its output first, or says nothing for [`READY_GUARD`], fails the test.
fn ready_line(
    from: impl std::io::Read + Send + 'static,
    prefix: &'static str,
    what: &str,
) -> String {
    ready_lines(from, &[prefix], what).remove(0)
}

/// The rest of the first line of `from` that starts with each of `prefixes`, in their order
/// (as [`ready_line`]).
fn ready_lines(
    from: impl std::io::Read + Send + 'static,
    prefixes: &[&'static str],
    what: &str,
) -> Vec<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let prefixes = prefixes.to_vec();
    let wanted = prefixes.len();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(from).lines();
        let mut next = prefixes.into_iter().peekable();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            let Some(prefix) = next.peek() else { break };
            if let Some(rest) = line.strip_prefix(prefix) {
                let _ = tx.send(rest.to_owned());
                next.next();
                if next.peek().is_none() {
                    break;
                }
            }
        }
        drop(tx);
        for _ in lines {}
    });
    (0..wanted)
        .map(|_| match rx.recv_timeout(READY_GUARD) {
            Ok(rest) => rest,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("{what} exited before it said where it listens")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("{what} never said where it listens")
            }
        })
        .collect()
}

/// `server` (an HTTP test server run with port 0, tests/peers/python_sdk/http_serving.py),
/// started; the `/mcp` URL of its ready line. The server binds and listens before it prints
/// the line, so the URL takes connections at once: no port is picked and freed first (another
/// process could take it in between) and nothing polls (a poll can connect to itself).
pub fn listening(mut server: Command) -> (Running, String) {
    let mut child = server
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let running = Running(child);
    let url = ready_line(stdout, "listening on ", "the server");
    (running, url)
}

/// `proxy` (`mrtr-gate proxy` and its options) in HTTP mode on a free loopback port, in front
/// of `upstream`; the URL its ready line names.
pub fn proxy_listening(mut proxy: Command, upstream: &str) -> (Running, String) {
    let mut child = proxy
        .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let running = Running(child);
    let line = ready_line(stderr, "mrtr-gate proxy: listening on ", "the proxy");
    let url = line.split(',').next().unwrap().to_owned();
    (running, url)
}

/// The same with an admin listener on a free loopback port: the proxy, its MCP URL, and its
/// admin base URL (`http://127.0.0.1:PORT`), said before the MCP one.
pub fn proxy_listening_with_admin(mut proxy: Command, upstream: &str) -> (Running, String, String) {
    let mut child = proxy
        .args(["--admin", "127.0.0.1:0"])
        .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let running = Running(child);
    let lines = ready_lines(
        stderr,
        &[
            "mrtr-gate proxy: admin on ",
            "mrtr-gate proxy: listening on ",
        ],
        "the proxy",
    );
    let admin = lines[0].split(' ').next().unwrap().to_owned();
    let url = lines[1].split(',').next().unwrap().to_owned();
    (running, url, admin)
}

/// POST `message` to an MCP endpoint (a server or the proxy), as an SDK client would (the
/// mirrored headers set); the JSON-RPC answer, or the transport's error.
pub fn post(url: &str, message: &Value) -> Result<Value, ureq::Error> {
    post_text(url, &message.to_string())
}

/// The same with the message's text, sent as it is.
pub fn post_text(url: &str, text: &str) -> Result<Value, ureq::Error> {
    let message: Value = serde_json::from_str(text).unwrap();
    let method = message["method"].as_str().unwrap_or_default();
    let name = message["params"]["name"].as_str().unwrap_or_default();
    let mut answer = ureq::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .send(text)?;
    let sse = answer
        .headers()
        .get("content-type")
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    let body = answer.body_mut().read_to_string()?;
    // A stream's answer is its last message event (the proxy ends a stream with it).
    let message = if sse {
        body.lines()
            .rev()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or_default()
            .trim_start()
    } else {
        &body
    };
    Ok(serde_json::from_str(message).unwrap_or_else(|e| panic!("{e}: {body}")))
}
