//! `mrtr-gate-testkit bench-proxy`: what `mrtr-gate proxy` adds to a real round trip over
//! loopback HTTP, against a real server (the Python SDK's, tests/peers/python_sdk/server.py).
//! One run measures, side by side: the client straight to the server; through the proxy with
//! the gate off (the engine over [`GateOff`], in-process: a relay's own cost); the gate on
//! (the component, a file trail in each folder given: tmpfs and disk); the gate on over
//! Redis. Each client is one sequential loop over one keep-alive connection, running form
//! rounds (two requests each); 1, 8 and 32 clients at once give the calls per second. Last,
//! the process's RSS while the gate-on proxy serves many rounds. Prints ratios, never a
//! verdict: budgets are in docs/performance.md.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::bench_client::GateOff;
use mrtr_gate_cli::keys::KeyOptions;
use mrtr_gate_cli::services::{RedisChoice, ServiceOptions, Wired};
use mrtr_gate_client::transport::{Outgoing, Transport, TransportError, Waiting};
use mrtr_gate_client::{AnswersFile, Client, ClientConfig, HttpTransport};
use mrtr_gate_host::core::{
    ClientRetry, FinishRequest, Policy, Registered, Registration, ResponseVerdict, Retry,
    RetryRequest, ServerIdentity, TerminalOutcome,
};
use mrtr_gate_host::reference_hosts::{MemoryStorage, SystemClock};
use mrtr_gate_host::{ComponentGate, GateApi, GateDenial, GateRuntime};
use mrtr_gate_proxy::consent::{ConsentMode, consent_for};
use mrtr_gate_proxy::http::{HttpOptions, serve_until};
use mrtr_gate_proxy::rounds::RoundIndex;
use mrtr_gate_proxy::{Engine, EngineConfig, IdMinter, Principal};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

/// How long an entry of the index of open rounds outlives the round's lifetime (as the CLI).
const ROUND_INDEX_GRACE_MS: u64 = 60_000;
/// Untimed rounds per client before timing (connection, server, instance warm).
const WARM_ROUNDS: usize = 10;

/// What to run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The server's streamable HTTP endpoint.
    pub upstream: String,
    /// The tool (one form round per call), its arguments and the answers file's text.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
    /// The answers to its one round.
    pub answers: String,
    /// Timed rounds per client per row.
    pub rounds: usize,
    /// Concurrent clients per throughput column.
    pub clients: Vec<usize>,
    /// Folders for the gate's file trail, each its own row (say which is tmpfs).
    pub audit_dirs: Vec<PathBuf>,
    /// A Redis for the Redis row.
    pub redis: Option<String>,
    /// Rounds of the RSS run (0: none).
    pub rss_rounds: usize,
}

/// A gate that counts the time spent inside it (on the proxy's engine thread).
struct Clocked<G> {
    gate: G,
    nanos: Arc<AtomicU64>,
}

impl<G: GateApi> Clocked<G> {
    fn time<T>(&mut self, f: impl FnOnce(&mut G) -> T) -> T {
        let started = Instant::now();
        let out = f(&mut self.gate);
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(spent, Ordering::Relaxed);
        out
    }
}

impl<G: GateApi> GateApi for Clocked<G> {
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial> {
        self.time(|g| g.register(r))
    }
    fn accept_response(
        &mut self,
        s: &ServerIdentity,
        t: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        self.time(|g| g.accept_response(s, t))
    }
    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        self.time(|g| g.build_retry(r))
    }
    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial> {
        self.time(|g| g.retry_from_client(r))
    }
    fn refuse_server_request(
        &mut self,
        s: &ServerIdentity,
        u: &str,
        t: &str,
        m: &str,
    ) -> GateDenial {
        self.time(|g| g.refuse_server_request(s, u, t, m))
    }
    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        self.time(|g| g.finish(r))
    }
    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        self.time(|g| g.expire_stale())
    }
}

/// A transport that records each request's time (microseconds).
struct Recording {
    inner: HttpTransport,
    times: Arc<Mutex<Vec<f64>>>,
}

impl Transport for Recording {
    fn server(&self) -> &ServerIdentity {
        self.inner.server()
    }
    fn request(
        &mut self,
        request: Outgoing<'_>,
        waiting: &mut dyn Waiting,
    ) -> Result<String, TransportError> {
        let started = Instant::now();
        let out = self.inner.request(request, waiting);
        if let Ok(mut times) = self.times.lock() {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        out
    }
    fn notify(&mut self, method: &str, json: &str) -> Result<(), TransportError> {
        self.inner.notify(method, json)
    }
}

/// A proxy served in this process on a loopback port, stopped when dropped.
struct Proxy {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
    gate_nanos: Arc<AtomicU64>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Which gate the proxy runs.
#[derive(Clone, Debug)]
enum Gating {
    Off,
    On(ServiceOptions),
}

fn start_proxy(runtime: &GateRuntime, upstream: &str, gating: &Gating) -> Result<Proxy, String> {
    let policy = Policy::default();
    let ttl = policy.round_trip_lifetime_ms + ROUND_INDEX_GRACE_MS;
    let principal = Principal {
        user: "alice".into(),
        tenant: "acme".into(),
    };
    let ids = IdMinter::random()?;
    let gate_nanos = Arc::new(AtomicU64::new(0));
    let nanos = Arc::clone(&gate_nanos);
    let make: Box<dyn FnOnce(ServerIdentity) -> Engine<Box<dyn GateApi>> + Send> = match gating {
        Gating::Off => {
            let storage = Arc::new(MemoryStorage::new(Arc::new(SystemClock)));
            Box::new(move |server| {
                let config = EngineConfig {
                    server,
                    principal,
                    rounds: RoundIndex::new(storage, ttl),
                    policy,
                    allow_legacy_server_requests: false,
                };
                let gate: Box<dyn GateApi> = Box::new(Clocked {
                    gate: GateOff::default(),
                    nanos,
                });
                Engine::new(gate, config, ids)
            })
        }
        Gating::On(options) => {
            let wired = Wired::open(options, Arc::new(SystemClock))?;
            let services = wired.services(consent_for(&ConsentMode::Client));
            let (user, tenant) = wired.principal(&principal.user, &principal.tenant);
            let runtime = runtime.clone();
            Box::new(move |server| {
                let config = EngineConfig {
                    server,
                    principal: Principal { user, tenant },
                    rounds: RoundIndex::new(services.storage.clone(), ttl),
                    policy,
                    allow_legacy_server_requests: false,
                };
                let gate: Box<dyn GateApi> = Box::new(Clocked {
                    gate: ComponentGate::new(&runtime, services),
                    nanos,
                });
                Engine::new(gate, config, ids)
            })
        }
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = HttpOptions::new(upstream);
    // As `mrtr_gate_proxy::run_http`: two worker threads.
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let listener =
                tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
            serve_until(options, listener, make, async move {
                let _ = stopped.await;
            })
            .await
        })
    });
    Ok(Proxy {
        url: format!("http://127.0.0.1:{port}/mcp"),
        stop: Some(stop),
        thread: Some(thread),
        gate_nanos,
    })
}

/// What one row's clients measured.
struct Measured {
    requests: Vec<f64>,
    rounds: Vec<f64>,
    wall_s: f64,
}

/// `clients` sequential loops at once, `rounds` timed form rounds each, against `url`.
fn drive(w: &Workload, url: &str, clients: usize, rounds: usize) -> Result<Measured, String> {
    let answers = AnswersFile::parse(&w.answers).map_err(|e| e.0)?;
    let params = json!({"name": w.tool, "arguments": w.arguments});
    let start = Arc::new(Barrier::new(clients + 1));
    let mut threads = Vec::new();
    for _ in 0..clients {
        let (answers, params, url, start) = (
            answers.clone(),
            params.clone(),
            url.to_owned(),
            Arc::clone(&start),
        );
        threads.push(std::thread::spawn(
            move || -> Result<(Vec<f64>, Vec<f64>), String> {
                let times = Arc::new(Mutex::new(Vec::with_capacity(2 * rounds)));
                let inner = match HttpTransport::connect(&url) {
                    Ok(inner) => inner,
                    Err(e) => {
                        // Every client meets the barrier, even one that failed to connect.
                        start.wait();
                        return Err(e.to_string());
                    }
                };
                let transport = Recording {
                    inner,
                    times: Arc::clone(&times),
                };
                let mut client = Client::new(
                    GateOff::default(),
                    Box::new(transport),
                    ClientConfig::new("alice", "acme"),
                    Box::new(answers),
                );
                let mut one = || -> Result<f64, String> {
                    let started = Instant::now();
                    let done = client
                        .call("tools/call", params.clone())
                        .map_err(|e| e.to_string())?;
                    if done.rounds != 1 {
                        return Err(format!("the call took {} rounds, not one", done.rounds));
                    }
                    Ok(started.elapsed().as_secs_f64() * 1e6)
                };
                let warm = (0..WARM_ROUNDS).try_for_each(|_| one().map(|_| ()));
                start.wait();
                warm?;
                if let Ok(mut t) = times.lock() {
                    t.clear();
                }
                let per_round = (0..rounds).map(|_| one()).collect::<Result<Vec<_>, _>>()?;
                let per_request = times.lock().map(|t| t.clone()).unwrap_or_default();
                Ok((per_request, per_round))
            },
        ));
    }
    start.wait();
    let started = Instant::now();
    let mut measured = Measured {
        requests: Vec::new(),
        rounds: Vec::new(),
        wall_s: 0.0,
    };
    for thread in threads {
        let (requests, rounds) = thread
            .join()
            .map_err(|_| "a client thread panicked".to_owned())??;
        measured.requests.extend(requests);
        measured.rounds.extend(rounds);
    }
    measured.wall_s = started.elapsed().as_secs_f64();
    Ok(measured)
}

fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let last = xs.len().saturating_sub(1);
    // Nearest rank; the cast is of a fraction of a length.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let at = ((last as f64) * p).round() as usize;
    xs.get(at).copied().unwrap_or(f64::NAN)
}

/// One row: latencies with one client, then requests/s at each concurrency.
struct Row {
    name: String,
    req_p50: f64,
    req_p99: f64,
    round_p50: f64,
    round_p99: f64,
    gate_us_per_request: Option<f64>,
    per_second: Vec<f64>,
}

fn measure(
    w: &Workload,
    name: String,
    url: &str,
    gate_nanos: Option<&AtomicU64>,
) -> Result<Row, String> {
    let before = gate_nanos.map(|n| n.load(Ordering::Relaxed));
    let mut one = drive(w, url, 1, w.rounds)?;
    let gate_us_per_request = gate_nanos.zip(before).map(|(n, b)| {
        // Warm rounds included: (warm + timed) rounds of two requests each.
        #[allow(clippy::cast_precision_loss)]
        let requests = (2 * (w.rounds + WARM_ROUNDS)) as f64;
        #[allow(clippy::cast_precision_loss)]
        let spent = n.load(Ordering::Relaxed).saturating_sub(b) as f64;
        spent / 1e3 / requests
    });
    let mut per_second = Vec::new();
    for &clients in &w.clients {
        let m = drive(w, url, clients, w.rounds)?;
        #[allow(clippy::cast_precision_loss)]
        per_second.push(m.requests.len() as f64 / m.wall_s);
    }
    Ok(Row {
        name,
        req_p50: percentile(&mut one.requests, 0.5),
        req_p99: percentile(&mut one.requests, 0.99),
        round_p50: percentile(&mut one.rounds, 0.5),
        round_p99: percentile(&mut one.rounds, 0.99),
        gate_us_per_request,
        per_second,
    })
}

fn gate_on(audit: Option<PathBuf>, redis: Option<RedisChoice>) -> Gating {
    Gating::On(ServiceOptions {
        audit,
        redis,
        keys: KeyOptions {
            key_file: Some(key_file()),
            insecure_no_host_keys: false,
            anchor: None,
        },
    })
}

/// This run's folder for its host key and the trails' anchors (removed at the end).
fn key_dir() -> PathBuf {
    std::env::temp_dir().join(format!("mrtr-gate-bench-proxy-{}", std::process::id()))
}

/// This run's host key (made on first use).
fn key_file() -> PathBuf {
    key_dir().join("host-keys.json")
}

/// The process's resident set (kB), from /proc (Linux only; `None` elsewhere).
fn rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Run every row and the RSS run; the report (markdown).
pub fn run(runtime: &GateRuntime, w: &Workload) -> Result<String, String> {
    let mut rows = vec![measure(w, "direct (no proxy)".into(), &w.upstream, None)?];
    {
        let proxy = start_proxy(runtime, &w.upstream, &Gating::Off)?;
        rows.push(measure(
            w,
            "proxy, gate off (pass-through)".into(),
            &proxy.url,
            Some(&proxy.gate_nanos),
        )?);
    }
    let mut trails = Vec::new();
    for dir in &w.audit_dirs {
        let trail = dir.join(format!(
            "mrtr-gate-bench-proxy-{}.jsonl",
            std::process::id()
        ));
        let proxy = start_proxy(runtime, &w.upstream, &gate_on(Some(trail.clone()), None))?;
        rows.push(measure(
            w,
            format!("proxy, gate on, trail in {}", dir.display()),
            &proxy.url,
            Some(&proxy.gate_nanos),
        )?);
        trails.push(trail);
    }
    if let Some(url) = &w.redis {
        let redis = RedisChoice {
            url: url.clone(),
            namespace: format!("bench-proxy-{}", std::process::id()),
            trail: "bench-proxy".into(),
        };
        let proxy = start_proxy(runtime, &w.upstream, &gate_on(None, Some(redis)))?;
        rows.push(measure(
            w,
            "proxy, gate on, Redis".into(),
            &proxy.url,
            Some(&proxy.gate_nanos),
        )?);
    }
    let mut out = report(w, &rows);
    if w.rss_rounds > 0 {
        let dir = w
            .audit_dirs
            .first()
            .cloned()
            .unwrap_or_else(std::env::temp_dir);
        let trail = dir.join(format!(
            "mrtr-gate-bench-proxy-rss-{}.jsonl",
            std::process::id()
        ));
        let proxy = start_proxy(runtime, &w.upstream, &gate_on(Some(trail.clone()), None))?;
        out.push_str(&rss_run(w, &proxy.url)?);
        trails.push(trail);
    }
    for trail in trails {
        let _ = std::fs::remove_file(&trail);
        let _ = std::fs::remove_file(trail.with_extension("jsonl.links"));
    }
    // The host key and the anchors beside it.
    let _ = std::fs::remove_dir_all(key_dir());
    Ok(out)
}

fn report(w: &Workload, rows: &[Row]) -> String {
    let mut out = format!(
        "| over loopback HTTP, {} timed form rounds per client | per request p50 | p99 | per round p50 | p99 | added per request p50 | p99 | gate time per request (engine thread) |",
        w.rounds
    );
    for c in &w.clients {
        let _ = write!(out, " {c} clients req/s |");
    }
    out.push_str("\n|---|---|---|---|---|---|---|---|");
    out.push_str(&"---|".repeat(w.clients.len()));
    out.push('\n');
    let (base50, base99) = rows.first().map_or((0.0, 0.0), |r| (r.req_p50, r.req_p99));
    for r in rows {
        let gate = r
            .gate_us_per_request
            .map_or_else(String::new, |g| format!("{g:.0} us"));
        let _ = write!(
            out,
            "| {} | {:.0} us | {:.0} us | {:.0} us | {:.0} us | {:+.0} us | {:+.0} us | {gate} |",
            r.name,
            r.req_p50,
            r.req_p99,
            r.round_p50,
            r.round_p99,
            r.req_p50 - base50,
            r.req_p99 - base99
        );
        for s in &r.per_second {
            let _ = write!(out, " {s:.0} |");
        }
        out.push('\n');
    }
    // Scaling: the widest column against the one before it (budget: 32 >= 90% of 8).
    let n = w.clients.len();
    if n >= 2 {
        let (a, b) = (
            w.clients.get(n - 2).copied().unwrap_or(0),
            w.clients.get(n - 1).copied().unwrap_or(0),
        );
        out.push('\n');
        for r in rows {
            if let (Some(x), Some(y)) = (r.per_second.get(n - 2), r.per_second.get(n - 1)) {
                let _ = writeln!(
                    out,
                    "- {}: {b} clients / {a} clients requests/s = {:.2}",
                    r.name,
                    y / x
                );
            }
        }
    }
    out
}

/// Rounds through the gate-on proxy from 8 clients, the RSS sampled every tenth.
fn rss_run(w: &Workload, url: &str) -> Result<String, String> {
    const CLIENTS: usize = 8;
    let step = (w.rss_rounds / 10).max(CLIENTS);
    let mut samples = Vec::new();
    let mut done = 0;
    while done < w.rss_rounds {
        drive(w, url, CLIENTS, step / CLIENTS)?;
        done += step / CLIENTS * CLIENTS + CLIENTS * WARM_ROUNDS;
        samples.push((done, rss_kb().unwrap_or(0)));
    }
    let mut out = format!(
        "\nRSS of this process (the proxy, gate on, trail in the first folder, and {CLIENTS} clients), every ~{step} rounds:\n\n| rounds | RSS |\n|---|---|\n"
    );
    for (rounds, kb) in &samples {
        let _ = writeln!(out, "| {rounds} | {kb} kB |");
    }
    if let (Some((_, first)), Some((_, last))) = (samples.first(), samples.last()) {
        #[allow(clippy::cast_precision_loss)]
        let growth = (*last as f64 - *first as f64) / (*first as f64).max(1.0) * 100.0;
        let _ = writeln!(out, "\nfinal vs first sample: {growth:+.1}%");
    }
    Ok(out)
}
