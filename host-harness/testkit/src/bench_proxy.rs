//! `mrtr-gate-testkit bench-proxy`: what `mrtr-gate proxy` adds to a real round trip over
//! loopback HTTP, against a real server (the Python SDK's, tests/peers/python_sdk/server.py).
//! One run measures, side by side: the client straight to the server; through the proxy with
//! the gate off (the engine over [`GateOff`], in-process: a relay's own cost); the gate on
//! (the component, a file trail in each folder given: tmpfs and disk); the gate on over
//! Redis; and the reference, the direct rounds' requests from a plain HTTP/1.1 client
//! (crate::reference), so a slow transport shows as one. Each client is one sequential loop over one keep-alive connection, running form
//! rounds (two requests each); 1, 8 and 32 clients at once give the calls per second. Last,
//! the RSS of `mrtr-gate proxy` run as its own process (gate on, a short round lifetime, so
//! the run outlasts many lifetimes) while it serves many rounds. Prints ratios, never a
//! verdict: budgets are in docs/performance.md.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::bench_client::GateOff;
use crate::reference::{FastUpstream, RawClient, Recorded, record_round};
use crate::timed::{Stopwatch, TimedGate, TimedTransport, percentile};
use mrtr_gate_cli::keys::KeyOptions;
use mrtr_gate_cli::services::{RedisChoice, ServiceOptions, Wired};
use mrtr_gate_client::{AnswersFile, Client, ClientConfig, HttpTransport};
use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{Policy, ServerIdentity};
use mrtr_gate_host::reference_hosts::{MemoryStorage, SystemClock};
use mrtr_gate_proxy::consent::{ConsentMode, consent_for};
use mrtr_gate_proxy::http::{HttpOptions, serve_pool_until};
use mrtr_gate_proxy::rounds::RoundIndex;
use mrtr_gate_proxy::{Engine, EngineConfig, IdMinter, Principal};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
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
    /// The RSS run's round-trip lifetime (seconds).
    pub rss_lifetime_s: u64,
    /// The `mrtr-gate` binary the RSS run serves the proxy with, as its own process.
    pub proxy_bin: PathBuf,
    /// Another proxy's binary (`mcp-proxy`) for the side by side ([`crate::side_by_side`]).
    pub peer_bin: Option<PathBuf>,
    /// Only the side by side: no form-round rows, no RSS run.
    pub side_by_side_only: bool,
    /// The side by side's passes.
    pub passes: usize,
}

/// A proxy served in this process on a loopback port, stopped when dropped.
struct Proxy {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
    /// The gate's time on the proxy's engine thread.
    gate_time: Stopwatch,
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
    start_proxy_on(runtime, upstream, gating, 1)
}

/// [`start_proxy`] gating on `engines` engines (as `mrtr-gate proxy --engines`).
fn start_proxy_on(
    runtime: &GateRuntime,
    upstream: &str,
    gating: &Gating,
    engines: usize,
) -> Result<Proxy, String> {
    let policy = Policy::default();
    let ttl = policy.round_trip_lifetime_ms + ROUND_INDEX_GRACE_MS;
    let principal = Principal {
        user: "alice".into(),
        tenant: "acme".into(),
    };
    let ids = IdMinter::random()?;
    let gate_time = Stopwatch::default();
    let watch = gate_time.clone();
    type Make = dyn Fn(ServerIdentity, usize) -> Engine<Box<dyn GateApi>> + Send + Sync;
    let make: Arc<Make> = match gating {
        Gating::Off => {
            let storage = Arc::new(MemoryStorage::new(Arc::new(SystemClock)));
            Arc::new(move |server, _| {
                let config = EngineConfig {
                    server,
                    principal: principal.clone(),
                    rounds: RoundIndex::new(storage.clone(), ttl),
                    policy: policy.clone(),
                    allow_legacy_server_requests: false,
                    allow_ungated_input: false,
                    deferred_consent: None,
                    policies: None,
                };
                let gate: Box<dyn GateApi> = Box::new(TimedGate {
                    gate: GateOff::default(),
                    watch: watch.clone(),
                });
                Engine::new(gate, config, ids.shared())
            })
        }
        Gating::On(options) => {
            let wired = Wired::open(options, Arc::new(SystemClock))?;
            let services = wired.services(consent_for(&ConsentMode::Client));
            // As the CLI: engine 0 over `services`, every other over its own connection.
            let mut per_engine = vec![services.clone()];
            for _ in 1..engines {
                per_engine.push(wired.services_for_another_gate(services.consent.clone())?);
            }
            let bound = wired.principal(&principal.user, &principal.tenant);
            let runtime = runtime.clone();
            Arc::new(move |server, i| {
                let services = per_engine.get(i).unwrap_or(&services).clone();
                let config = EngineConfig {
                    server,
                    principal: bound.clone(),
                    rounds: RoundIndex::new(services.storage.clone(), ttl),
                    policy: policy.clone(),
                    allow_legacy_server_requests: false,
                    allow_ungated_input: false,
                    deferred_consent: None,
                    policies: None,
                };
                let gate: Box<dyn GateApi> = Box::new(TimedGate {
                    gate: ComponentGate::new(&runtime, services),
                    watch: watch.clone(),
                });
                Engine::new(gate, config, ids.shared())
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
            serve_pool_until(
                options,
                listener,
                engines,
                move |server, i| make(server, i),
                async move {
                    let _ = stopped.await;
                },
            )
            .await
        })
    });
    Ok(Proxy {
        url: format!("http://127.0.0.1:{port}/mcp"),
        stop: Some(stop),
        thread: Some(thread),
        gate_time,
    })
}

/// What one row's clients measured.
struct Measured {
    requests: Vec<f64>,
    rounds: Vec<f64>,
    wall_s: f64,
}

/// `clients` sequential loops at once, `rounds` timed form rounds each, against `url`.
/// `clients` clients at once, each `rounds` timed form rounds after its warm ones: the MCP
/// client (gate off), or with `reference` the same round's requests from a plain HTTP/1.1
/// client (crate::reference).
fn drive(
    w: &Workload,
    url: &str,
    clients: usize,
    rounds: usize,
    reference: Option<&[Recorded; 2]>,
) -> Result<Measured, String> {
    let answers = AnswersFile::parse(&w.answers).map_err(|e| e.0)?;
    let params = json!({"name": w.tool, "arguments": w.arguments});
    let start = Arc::new(Barrier::new(clients + 1));
    let mut threads = Vec::new();
    for _ in 0..clients {
        let (answers, params, url, start, reference) = (
            answers.clone(),
            params.clone(),
            url.to_owned(),
            Arc::clone(&start),
            reference.cloned(),
        );
        threads.push(std::thread::spawn(
            move || -> Result<(Vec<f64>, Vec<f64>), String> {
                let watch = Stopwatch::default();
                if let Some(round) = reference {
                    let raw = RawClient::new(&url, round, watch.clone());
                    let mut raw = match raw {
                        Ok(raw) => raw,
                        Err(e) => {
                            start.wait();
                            return Err(e);
                        }
                    };
                    return timed_rounds(&start, &watch, rounds, || raw.round());
                }
                let inner = match HttpTransport::connect(&url) {
                    Ok(inner) => inner,
                    Err(e) => {
                        // Every client meets the barrier, even one that failed to connect.
                        start.wait();
                        return Err(e.to_string());
                    }
                };
                let transport = TimedTransport {
                    inner,
                    watch: watch.clone(),
                };
                let mut client = Client::new(
                    GateOff::default(),
                    Box::new(transport),
                    ClientConfig::new("alice", "acme"),
                    Box::new(answers),
                );
                timed_rounds(&start, &watch, rounds, || {
                    let done = client
                        .call("tools/call", params.clone())
                        .map_err(|e| e.to_string())?;
                    if done.rounds != 1 {
                        // What came back instead (an error answer is final to the stand-in).
                        let answer: String = done.response_json.chars().take(400).collect();
                        return Err(format!(
                            "the call took {} rounds, not one; the answer: {answer}",
                            done.rounds
                        ));
                    }
                    Ok(())
                })
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

/// One client's run: its warm rounds, then (once every client is warm) `rounds` timed ones;
/// each request's time from `watch`, each round's (microseconds).
fn timed_rounds(
    start: &Barrier,
    watch: &Stopwatch,
    rounds: usize,
    mut round: impl FnMut() -> Result<(), String>,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let mut one = || -> Result<f64, String> {
        let started = Instant::now();
        round()?;
        Ok(started.elapsed().as_secs_f64() * 1e6)
    };
    let warm = (0..WARM_ROUNDS).try_for_each(|_| one().map(|_| ()));
    start.wait();
    warm?;
    watch.reset();
    let per_round = (0..rounds).map(|_| one()).collect::<Result<Vec<_>, _>>()?;
    Ok((watch.laps_us(), per_round))
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
    /// Scripts the row's one client's rounds ran on Redis, and the microseconds Redis spent
    /// in them, per round (Redis rows).
    redis_per_round: Option<(f64, f64)>,
}

fn measure(
    w: &Workload,
    name: String,
    url: &str,
    gate_time: Option<&Stopwatch>,
) -> Result<Row, String> {
    measure_with(w, name, url, gate_time, None, None)
}

/// The scripts Redis at `url` has run (`EVAL`, `EVALSHA`, by `INFO commandstats`), and the
/// microseconds Redis spent running them: each is one round trip of the gate's store, trail or
/// index (a `WAIT` goes in the same one). The commands a script calls are counted apart, and
/// their time is in the script's.
fn redis_scripts(url: &str) -> Result<(u64, u64), String> {
    let mut c = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .map_err(|e| format!("redis: {e}"))?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .map_err(|e| format!("redis: {e}"))?;
    // `cmdstat_evalsha:calls=N,usec=N,usec_per_call=F,…`
    let field = |line: &str, name: &str| -> Option<u64> {
        let (_, fields) = line.split_once(':')?;
        fields
            .split(',')
            .find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == name))?
            .1
            .parse()
            .ok()
    };
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_eval"))
        .fold((0, 0), |(calls, usec), l| {
            (
                calls + field(l, "calls").unwrap_or(0),
                usec + field(l, "usec").unwrap_or(0),
            )
        }))
}

fn measure_with(
    w: &Workload,
    name: String,
    url: &str,
    gate_time: Option<&Stopwatch>,
    reference: Option<&[Recorded; 2]>,
    redis: Option<&str>,
) -> Result<Row, String> {
    if let Some(watch) = gate_time {
        watch.reset();
    }
    let at = |e: String| format!("{name}: {e}");
    let before = redis.map(redis_scripts).transpose().map_err(at)?;
    let mut one = drive(w, url, 1, w.rounds, reference).map_err(at)?;
    let redis_per_round = match (redis, before) {
        (Some(url), Some((calls, usec))) => {
            // Warm rounds included.
            let (calls_now, usec_now) = redis_scripts(url).map_err(at)?;
            #[allow(clippy::cast_precision_loss)]
            let per_round = |n: u64| n as f64 / (w.rounds + WARM_ROUNDS) as f64;
            Some((
                per_round(calls_now.saturating_sub(calls)),
                per_round(usec_now.saturating_sub(usec)),
            ))
        }
        _ => None,
    };
    let gate_us_per_request = gate_time.map(|watch| {
        // Warm rounds included: (warm + timed) rounds of two requests each.
        #[allow(clippy::cast_precision_loss)]
        let requests = (2 * (w.rounds + WARM_ROUNDS)) as f64;
        watch.total_us() / requests
    });
    let mut per_second = Vec::new();
    for &clients in &w.clients {
        let m = drive(w, url, clients, w.rounds, reference).map_err(at)?;
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
        redis_per_round,
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

/// Run every row and the RSS run, then the side by side with `w.peer_bin`; the report
/// (markdown).
pub fn run(runtime: &GateRuntime, w: &Workload) -> Result<String, String> {
    let mut out = if w.side_by_side_only {
        String::new()
    } else {
        form_rounds(runtime, w)?
    };
    if let Some(peer_bin) = &w.peer_bin {
        let setup = crate::side_by_side::Setup {
            upstream: w.upstream.clone(),
            peer_bin: peer_bin.clone(),
            gate_bin: w.proxy_bin.clone(),
            audit_dir: w
                .audit_dirs
                .first()
                .cloned()
                .unwrap_or_else(std::env::temp_dir),
            key_file: key_file(),
            calls: w.rounds,
            clients: w.clients.clone(),
            passes: w.passes,
        };
        let gate_off = start_proxy(runtime, &w.upstream, &Gating::Off)?;
        out.push_str(&crate::side_by_side::run(&setup, &gate_off.url)?);
    }
    // The host key and the anchors beside it.
    let _ = std::fs::remove_dir_all(key_dir());
    Ok(out)
}

/// The form-round rows and the RSS run.
fn form_rounds(runtime: &GateRuntime, w: &Workload) -> Result<String, String> {
    let mut rows = vec![measure(w, "direct (no proxy)".into(), &w.upstream, None)?];
    let recorded = record_round(&w.upstream, &w.tool, &w.arguments, &w.answers)?;
    rows.push(measure_with(
        w,
        "reference: direct, plain HTTP/1.1 client".into(),
        &w.upstream,
        None,
        Some(&recorded),
        None,
    )?);
    {
        let proxy = start_proxy(runtime, &w.upstream, &Gating::Off)?;
        rows.push(measure(
            w,
            "proxy, gate off (pass-through)".into(),
            &proxy.url,
            Some(&proxy.gate_time),
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
            Some(&proxy.gate_time),
        )?);
        trails.push(trail);
    }
    if let Some(url) = &w.redis {
        let redis = RedisChoice {
            url: url.clone(),
            replicas: None,
            namespace: format!("bench-proxy-{}", std::process::id()),
            trail: "bench-proxy".into(),
        };
        let proxy = start_proxy(runtime, &w.upstream, &gate_on(None, Some(redis)))?;
        rows.push(measure_with(
            w,
            "proxy, gate on, Redis".into(),
            &proxy.url,
            Some(&proxy.gate_time),
            None,
            Some(url),
        )?);
    }
    // One engine against a pool of one per core, in front of an upstream at no cost (the
    // real server's answers replayed), so the proxy is what is measured; gate on, the trail on
    // the first folder given, then (with --redis) rounds and trail on Redis, where an engine
    // waits on a round trip at each store call and append, and a pool overlaps the waits.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let fast = if w.audit_dirs.is_empty() && w.redis.is_none() {
        None
    } else {
        Some(FastUpstream::start(
            &w.upstream,
            &w.tool,
            &w.arguments,
            &w.answers,
        )?)
    };
    if let (Some(dir), Some(fast)) = (w.audit_dirs.first(), &fast) {
        for engines in [1, cores.max(2)] {
            let trail = dir.join(format!(
                "mrtr-gate-bench-proxy-engines-{engines}-{}.jsonl",
                std::process::id()
            ));
            let proxy = start_proxy_on(
                runtime,
                &fast.url,
                &gate_on(Some(trail.clone()), None),
                engines,
            )?;
            rows.push(measure(
                w,
                format!(
                    "fast upstream: proxy, gate on, trail in {}, {engines} engine(s)",
                    dir.display()
                ),
                &proxy.url,
                Some(&proxy.gate_time),
            )?);
            trails.push(trail);
        }
    }
    if let (Some(url), Some(fast)) = (&w.redis, &fast) {
        for engines in [1, cores.max(2)] {
            let redis = RedisChoice {
                url: url.clone(),
                replicas: None,
                namespace: format!("bench-proxy-{}-engines-{engines}", std::process::id()),
                trail: "bench-proxy".into(),
            };
            let proxy = start_proxy_on(runtime, &fast.url, &gate_on(None, Some(redis)), engines)?;
            rows.push(measure(
                w,
                format!("fast upstream: proxy, gate on, Redis, {engines} engine(s)"),
                &proxy.url,
                Some(&proxy.gate_time),
            )?);
        }
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
        trails.push(trail.clone());
        out.push_str(&rss_run(w, &trail)?);
    }
    for trail in trails {
        let _ = std::fs::remove_file(&trail);
        let _ = std::fs::remove_file(trail.with_extension("jsonl.links"));
    }
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
    for r in rows {
        if let Some((n, us)) = r.redis_per_round {
            let _ = writeln!(
                out,
                "\n- {}: {n:.1} Redis round trips (scripts) per form round, one client: the gate's and the index's; {us:.0} us of Redis's own time running them (`INFO commandstats`)",
                r.name
            );
        }
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

/// `mrtr-gate proxy` as its own process, killed when dropped.
pub(crate) struct ProxyProcess {
    child: std::process::Child,
    pub(crate) url: String,
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ProxyProcess {
    /// Serve `w.upstream` on a loopback port, gate on, the trail in `trail`, a short round
    /// lifetime (the RSS run), and wait for the ready line.
    fn start(w: &Workload, trail: &std::path::Path) -> Result<Self, String> {
        let anchor = key_dir().join("rss-anchor.json");
        let extra = [
            "--audit-anchor".to_owned(),
            anchor.display().to_string(),
            "--round-trip-lifetime".to_owned(),
            w.rss_lifetime_s.to_string(),
        ];
        Self::spawn(&w.proxy_bin, &w.upstream, trail, &extra)
    }

    /// `bin proxy` in front of `upstream` on a loopback port, gate on (`--consent client`, this
    /// run's host key), the trail in `trail`, with `extra` flags; once its ready line (which
    /// names the port) is read.
    pub(crate) fn spawn(
        bin: &std::path::Path,
        upstream: &str,
        trail: &std::path::Path,
        extra: &[String],
    ) -> Result<Self, String> {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(bin)
            .arg("proxy")
            .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(["--user", "alice", "--tenant", "acme", "--consent", "client"])
            .arg("--audit")
            .arg(trail)
            .arg("--host-keys")
            .arg(key_file())
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let stderr = child.stderr.take().ok_or("the proxy has no stderr")?;
        let mut lines = std::io::BufReader::new(stderr).lines();
        let url = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                return Err("the proxy ended before it listened".into());
            };
            if let Some(rest) = line.strip_prefix("mrtr-gate proxy: listening on ") {
                break rest.split(',').next().unwrap_or_default().to_owned();
            }
        };
        // Keep reading its stderr so the proxy never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Self { child, url })
    }

    /// SIGTERM, then wait for the exit: the proxy drains, and sends its last spans.
    pub(crate) fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }

    /// Its resident set (kB), from /proc (Linux only; `None` elsewhere).
    fn rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }
}

/// Rounds through `mrtr-gate proxy` (its own process, gate on, a short lifetime) from 8
/// clients, its RSS sampled every tenth of the run, with the time: after a lifetime plus the
/// store's grace, what the finished rounds kept should be going as fast as it comes.
fn rss_run(w: &Workload, trail: &std::path::Path) -> Result<String, String> {
    const CLIENTS: usize = 8;
    let proxy = ProxyProcess::start(w, trail)?;
    let step = (w.rss_rounds / 10).max(CLIENTS);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut done = 0;
    while done < w.rss_rounds {
        drive(w, &proxy.url, CLIENTS, step / CLIENTS, None)?;
        done += step / CLIENTS * CLIENTS + CLIENTS * WARM_ROUNDS;
        samples.push((
            done,
            started.elapsed().as_secs(),
            proxy.rss_kb().unwrap_or(0),
        ));
    }
    let mut out = format!(
        "\nRSS of `mrtr-gate proxy` (its own process; gate on, trail in the first folder, \
         --round-trip-lifetime {}; {CLIENTS} clients), every ~{step} rounds:\n\n\
         | rounds | seconds | RSS |\n|---|---|---|\n",
        w.rss_lifetime_s
    );
    for (rounds, secs, kb) in &samples {
        let _ = writeln!(out, "| {rounds} | {secs} | {kb} kB |");
    }
    // From the first sample past a lifetime and the grace of the store and the round index.
    let settled = w.rss_lifetime_s + (ROUND_INDEX_GRACE_MS / 1000);
    let steady: Vec<_> = samples.iter().filter(|s| s.1 >= settled).collect();
    if let (Some(first), Some(last)) = (steady.first(), steady.last()) {
        #[allow(clippy::cast_precision_loss)]
        let growth = (last.2 as f64 - first.2 as f64) / (first.2 as f64).max(1.0) * 100.0;
        let _ = writeln!(
            out,
            "\nfrom {} to {} rounds (past {settled} s): {growth:+.1}%",
            first.0, last.0
        );
    }
    Ok(out)
}
