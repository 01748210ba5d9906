//! `bench-proxy --peer-bin PATH` (issue 41, part 8): `mrtr-gate proxy` side by side with
//! another MCP proxy, the Rust `mcp-proxy` (0.6.0, tower; installed by scripts/bench), relaying
//! the same server to the same client in one run.
//!
//! The workload is what both proxies relay: a session (`initialize`, `notifications/initialized`,
//! 2025-11-25) and then `tools/call` of the server's `echo` (no round: one request, one
//! answer), from a plain HTTP/1.1 client over one kept-alive connection
//! ([`crate::reference::Connection`]). Latency comes from one client holding a session with every
//! row's endpoint and calling them in turn, call by call, so that whatever the machine does
//! meanwhile falls on every row alike; requests/s from passes over the rows, each pass in another
//! order, each figure the median of its passes. Rows: the server direct; `mcp-proxy` (its own process,
//! its config naming the server as its one HTTP backend, its tools namespaced `py/`); `mrtr-gate
//! proxy` with the gate off (the relay alone, served in this process as in the form-round rows);
//! `mrtr-gate proxy` gated (the binary, its own process, the trail on the first audit folder);
//! and the same with `--admin` scraped every second and `--otlp` exporting every span to a sink
//! in this process (what metrics and traces cost). Latencies with one client; requests/s at each
//! concurrency. Prints figures and ratios, never a verdict: the goals are in docs/proxy.md.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::bench_proxy::ProxyProcess;
use crate::reference::Connection;
use crate::timed::percentile;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Untimed calls per client before timing.
const WARM_CALLS: usize = 20;
/// The session's protocol: one both proxies and the server speak.
const PROTOCOL: &str = "2025-11-25";
/// What `echo` is given, and says back.
const TEXT: &str = "side by side";
/// How long a proxy may take to take its first session: a backstop, never a pace.
const READY_GUARD: Duration = Duration::from_secs(120);

/// What the side by side runs.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The server's streamable HTTP endpoint (tests/peers/python_sdk/server.py).
    pub upstream: String,
    /// The peer's binary (`mcp-proxy`).
    pub peer_bin: PathBuf,
    /// The `mrtr-gate` binary, run as its own process.
    pub gate_bin: PathBuf,
    /// The folder for the gated rows' trails.
    pub audit_dir: PathBuf,
    /// The run's host key file (the gated rows'); the peer's config goes beside it.
    pub key_file: PathBuf,
    /// Timed calls per client.
    pub calls: usize,
    /// Clients at once, per throughput column.
    pub clients: Vec<usize>,
    /// Passes over every row, each in another order; each figure is the median of its passes.
    pub passes: usize,
}

/// A child process, killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One client's session with an MCP endpoint, over one connection.
struct Session {
    connection: Connection,
    session: Option<String>,
    tool: String,
    next_id: u64,
}

impl Session {
    /// `initialize` and `notifications/initialized` at `url`; calls go to `tool`.
    fn open(url: &str, tool: &str) -> Result<Self, String> {
        let mut s = Self {
            connection: Connection::new(url)?,
            session: None,
            tool: tool.to_owned(),
            next_id: 0,
        };
        let init = s.send(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "mrtr-gate-testkit side-by-side", "version": "0"},
            }),
            true,
        )?;
        if init.get("result").is_none() {
            return Err(format!("initialize failed at {url}: {init}"));
        }
        s.notify("notifications/initialized")?;
        Ok(s)
    }

    fn head(&self, method: &str, length: usize) -> String {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\nMcp-Method: {method}\r\n",
            self.connection.path(),
            self.connection.host()
        );
        if let Some(session) = &self.session {
            let _ = write!(head, "Mcp-Session-Id: {session}\r\n");
        }
        let _ = write!(head, "Content-Length: {length}\r\n\r\n");
        head
    }

    fn send(&mut self, method: &str, params: Value, first: bool) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let body =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let answer = self
            .connection
            .exchange(&(self.head(method, body.len()) + &body))?;
        if first {
            self.session = answer.session.clone();
        }
        answer.message(id)
    }

    fn notify(&mut self, method: &str) -> Result<(), String> {
        let body = json!({"jsonrpc": "2.0", "method": method}).to_string();
        self.connection
            .exchange(&(self.head(method, body.len()) + &body))
            .map(|_| ())
    }

    /// End the session (`DELETE`, as a client that is done does): a server keeps what an open
    /// one holds, and thousands left open would slow every later row.
    fn close(mut self) {
        if let Some(session) = self.session.take() {
            let request = format!(
                "DELETE {} HTTP/1.1\r\nHost: {}\r\nMCP-Protocol-Version: {PROTOCOL}\r\nMcp-Session-Id: {session}\r\nContent-Length: 0\r\n\r\n",
                self.connection.path(),
                self.connection.host()
            );
            let _ = self.connection.exchange(&request);
        }
    }

    /// One `tools/call` of `echo`, its answer checked.
    fn call(&mut self) -> Result<(), String> {
        let tool = self.tool.clone();
        let answer = self.send(
            "tools/call",
            json!({"name": tool, "arguments": {"text": TEXT}}),
            false,
        )?;
        if answer["result"]["content"][0]["text"] != TEXT {
            return Err(format!("the call did not come back: {answer}"));
        }
        Ok(())
    }
}

/// A row: its latencies with one client, and the median of its passes' requests/s per
/// concurrency.
struct Row {
    name: String,
    p50: f64,
    p99: f64,
    per_second: Vec<f64>,
}

/// `clients` sessions at once, `calls` timed calls each after their warm ones: each call's
/// time (microseconds), and the wall time of the timed part.
fn drive(url: &str, tool: &str, clients: usize, calls: usize) -> Result<(Vec<f64>, f64), String> {
    let start = Arc::new(Barrier::new(clients + 1));
    let mut threads = Vec::new();
    for _ in 0..clients {
        let (url, tool, start) = (url.to_owned(), tool.to_owned(), Arc::clone(&start));
        threads.push(std::thread::spawn(move || -> Result<Vec<f64>, String> {
            let warm = Session::open(&url, &tool).and_then(|mut s| {
                (0..WARM_CALLS).try_for_each(|_| s.call())?;
                Ok(s)
            });
            // Every client meets the barrier, even one that failed.
            start.wait();
            let mut session = warm?;
            let times = (0..calls)
                .map(|_| {
                    let t = Instant::now();
                    session.call()?;
                    Ok(t.elapsed().as_secs_f64() * 1e6)
                })
                .collect();
            session.close();
            times
        }));
    }
    start.wait();
    let started = Instant::now();
    let mut times = Vec::new();
    for t in threads {
        times.extend(t.join().map_err(|_| "a client panicked".to_owned())??);
    }
    Ok((times, started.elapsed().as_secs_f64()))
}

/// One client, a session with each target, `calls` rounds of one call to each in turn (after
/// the warm ones; each round starts at the next target): each target's call times.
fn latencies(targets: &[Target], calls: usize) -> Result<Vec<Vec<f64>>, String> {
    let mut sessions = targets
        .iter()
        .map(|t| {
            let mut session =
                Session::open(&t.url, t.tool).map_err(|e| format!("{}: {e}", t.name))?;
            (0..WARM_CALLS).try_for_each(|_| session.call())?;
            Ok(session)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut times: Vec<Vec<f64>> = targets.iter().map(|_| Vec::with_capacity(calls)).collect();
    for round in 0..calls {
        for k in 0..sessions.len() {
            let i = (k + round) % sessions.len();
            if let (Some(session), Some(into)) = (sessions.get_mut(i), times.get_mut(i)) {
                let t = Instant::now();
                session.call()?;
                into.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    for session in sessions {
        session.close();
    }
    Ok(times)
}

/// `target`'s requests/s at each of `s.clients`.
fn throughput(s: &Setup, target: &Target) -> Result<Vec<f64>, String> {
    s.clients
        .iter()
        .map(|&clients| {
            let (times, wall) = drive(&target.url, target.tool, clients, s.calls)
                .map_err(|e| format!("{}: {e}", target.name))?;
            #[allow(clippy::cast_precision_loss)]
            Ok(times.len() as f64 / wall)
        })
        .collect()
}

/// What a row measures.
struct Target {
    name: &'static str,
    url: String,
    tool: &'static str,
}

/// The median of each column over `passes` (each pass's requests/s per concurrency).
fn medians(passes: &[Vec<f64>]) -> Vec<f64> {
    let columns = passes.first().map_or(0, Vec::len);
    (0..columns)
        .map(|i| {
            let mut xs: Vec<f64> = passes
                .iter()
                .map(|p| p.get(i).copied().unwrap_or(f64::NAN))
                .collect();
            percentile(&mut xs, 0.5)
        })
        .collect()
}

/// A free loopback port (for a program that takes its port from a config file; another
/// process could take it before it binds, which fails the run loudly).
fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Wait until `url` takes a session (the proxy is up and has its backend).
fn until_ready(url: &str, tool: &str, child: &mut std::process::Child) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let last = match Session::open(url, tool).and_then(|mut s| s.call().map(|()| s)) {
            Ok(session) => {
                session.close();
                return Ok(());
            }
            Err(e) => e,
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("it exited ({status}): {last}"));
        }
        if started.elapsed() > READY_GUARD {
            return Err(format!("not ready within {READY_GUARD:?}: {last}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `mcp-proxy` in front of `upstream`, its one HTTP backend `py` (so the tool is `py/echo`),
/// its defaults otherwise.
fn start_peer(s: &Setup, dir: &Path) -> Result<(Child, String), String> {
    let port = free_port()?;
    let config = dir.join("mcp-proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nname = \"bench\"\nseparator = \"/\"\n\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n[[backends]]\nname = \"py\"\ntransport = \"http\"\nurl = \"{}\"\n",
            s.upstream
        ),
    )
    .map_err(|e| e.to_string())?;
    let child = std::process::Command::new(&s.peer_bin)
        .arg("--config")
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", s.peer_bin.display()))?;
    let mut child = Child(child);
    let url = format!("http://127.0.0.1:{port}/");
    until_ready(&url, "py/echo", &mut child.0).map_err(|e| format!("mcp-proxy: {e}"))?;
    Ok((child, url))
}

/// An OTLP/HTTP endpoint that takes every export and throws it away (a collector's cost is
/// the collector's): it counts the bytes it was sent.
struct Sink {
    url: String,
    bytes: Arc<AtomicU64>,
}

impl Sink {
    fn start() -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let bytes = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&bytes);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || {
                    let _ = take_exports(stream, &counted);
                });
            }
        });
        Ok(Self {
            url: format!("http://127.0.0.1:{port}"),
            bytes,
        })
    }
}

/// Each request on `stream` read whole and answered 200 with an empty export response.
fn take_exports(stream: TcpStream, counted: &AtomicU64) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((_, value)) = header
                .split_once(':')
                .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        counted.fetch_add(u64::try_from(length).unwrap_or(0), Ordering::Relaxed);
        writer.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
        )?;
    }
}

/// Reads `url` (an admin listener's `/metrics`) every second until dropped, as Prometheus
/// would (at a shorter interval than its default).
struct Scraper {
    stop: Arc<AtomicBool>,
    scrapes: Arc<AtomicU64>,
}

impl Scraper {
    fn start(admin: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let scrapes = Arc::new(AtomicU64::new(0));
        let (stopped, counted) = (Arc::clone(&stop), Arc::clone(&scrapes));
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                if let Ok(mut c) = Connection::new(&format!("{admin}/metrics")) {
                    let request =
                        format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", c.path(), c.host());
                    if c.exchange(&request).is_ok() {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        Self { stop, scrapes }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Every row, `s.passes` times over, each pass in another order (every proxy is up for the
/// whole run, so a drift of the machine's is spread over the rows); the report (markdown).
pub fn run(s: &Setup, gate_off_url: &str) -> Result<String, String> {
    let dir = s
        .key_file
        .parent()
        .map_or_else(std::env::temp_dir, Path::to_path_buf);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let trail = |name: &str| {
        s.audit_dir.join(format!(
            "mrtr-gate-side-by-side-{name}-{}.jsonl",
            std::process::id()
        ))
    };
    let trails = [trail("gated"), trail("observed")];
    let outcome = (|| {
        let (_peer, peer) = start_peer(s, &dir)?;
        let gated_proxy = ProxyProcess::spawn(&s.gate_bin, &s.upstream, &trails[0], &[])?;
        let sink = Sink::start()?;
        let admin_port = free_port()?;
        let extra = [
            "--admin".to_owned(),
            format!("127.0.0.1:{admin_port}"),
            "--otlp".to_owned(),
            sink.url.clone(),
        ];
        let observed_proxy = ProxyProcess::spawn(&s.gate_bin, &s.upstream, &trails[1], &extra)?;
        let scraper = Scraper::start(format!("http://127.0.0.1:{admin_port}"));
        let targets = [
            Target {
                name: "direct (no proxy)",
                url: s.upstream.clone(),
                tool: "echo",
            },
            Target {
                name: "mcp-proxy 0.6.0 (pass-through)",
                url: peer,
                tool: "py/echo",
            },
            Target {
                name: "mrtr-gate proxy, gate off (pass-through)",
                url: gate_off_url.to_owned(),
                tool: "echo",
            },
            Target {
                name: "mrtr-gate proxy, gated",
                url: gated_proxy.url.clone(),
                tool: "echo",
            },
            Target {
                name: "mrtr-gate proxy, gated, metrics scraped and traces exported",
                url: observed_proxy.url.clone(),
                tool: "echo",
            },
        ];
        let passes = s.passes.max(1);
        let mut times = latencies(&targets, s.calls.saturating_mul(passes))?;
        let mut per_second: Vec<Vec<Vec<f64>>> = targets.iter().map(|_| Vec::new()).collect();
        for pass in 0..passes {
            for k in 0..targets.len() {
                let i = (k + pass) % targets.len();
                if let (Some(target), Some(into)) = (targets.get(i), per_second.get_mut(i)) {
                    into.push(throughput(s, target)?);
                }
            }
        }
        let rows: Vec<Row> = targets
            .iter()
            .zip(times.iter_mut())
            .zip(&per_second)
            .map(|((t, times), passes)| Row {
                name: t.name.to_owned(),
                p50: percentile(times, 0.5),
                p99: percentile(times, 0.99),
                per_second: medians(passes),
            })
            .collect();
        let scraped = scraper.scrapes.load(Ordering::Relaxed);
        drop(scraper);
        observed_proxy.stop();
        let mut out = report(s, &rows);
        let _ = writeln!(
            out,
            "\n- latency: {} calls to each row, one client, the rows in turn; requests/s: the median of {} passes; metrics scraped {scraped} times; {} bytes of spans exported (OTLP, protobuf) to a sink in this process",
            s.calls.saturating_mul(passes),
            passes,
            sink.bytes.load(Ordering::Relaxed)
        );
        Ok(out)
    })();
    for t in &trails {
        let _ = std::fs::remove_file(t);
        let _ = std::fs::remove_file(t.with_extension("jsonl.links"));
    }
    outcome
}

fn report(s: &Setup, rows: &[Row]) -> String {
    let mut out = String::from(
        "\n| `tools/call` of `echo` over loopback HTTP | p50 | p99 | added p50 | added p99 |",
    );
    for c in &s.clients {
        let _ = write!(out, " {c} clients req/s |");
    }
    out.push_str("\n|---|---|---|---|---|");
    out.push_str(&"---|".repeat(s.clients.len()));
    out.push('\n');
    let (b50, b99) = rows.first().map_or((0.0, 0.0), |r| (r.p50, r.p99));
    for r in rows {
        let _ = write!(
            out,
            "| {} | {:.0} us | {:.0} us | {:+.0} us | {:+.0} us |",
            r.name,
            r.p50,
            r.p99,
            r.p50 - b50,
            r.p99 - b99
        );
        for x in &r.per_second {
            let _ = write!(out, " {x:.0} |");
        }
        out.push('\n');
    }
    // The goals' ratios: each row's added p50 over the peer's.
    let added = |i: usize| rows.get(i).map(|r| r.p50 - b50);
    if let (Some(peer), Some(off), Some(gated), Some(observed)) =
        (added(1), added(2), added(3), added(4))
    {
        let _ = writeln!(
            out,
            "\n- added p50 over the peer's: pass-through {:.2}, gated {:.2}",
            off / peer,
            gated / peer
        );
        let _ = write!(
            out,
            "- metrics and traces on: p50 {:+.1}% over gated",
            (observed + b50) / (gated + b50) * 100.0 - 100.0
        );
        if let (Some(g), Some(o)) = (rows.get(3), rows.get(4)) {
            for (i, c) in s.clients.iter().enumerate() {
                if let (Some(a), Some(b)) = (g.per_second.get(i), o.per_second.get(i)) {
                    let _ = write!(out, "; {c} clients req/s {:+.1}%", b / a * 100.0 - 100.0);
                }
            }
        }
        out.push('\n');
    }
    out
}
