//! `mrtr-gate-testkit`: the benchmarks, the profilers' rounds and the race worker, apart from
//! the `mrtr-gate` command a user runs.
//!
//! ```text
//! mrtr-gate-testkit bench [--rounds N] [--external RESULT.json]... [--scaling]
//!                                 rounds in the component vs the native core (and results
//!                                 measured elsewhere: the seed's JS gate, the jco host)
//! mrtr-gate-testkit bench-client --http URL [--calls N] [--native]
//!                                 what the gate adds to a real round trip
//! mrtr-gate-testkit bench-proxy --http URL [--rounds N] [--clients N,N,...] [--audit-dir DIR]...
//!                                 [--redis URL] [--rss-rounds N]
//!                                 what `mrtr-gate proxy` adds: direct, gate off, gate on
//! mrtr-gate-testkit bench-redis --redis URL [--processes N] [--rounds N] [--servers N]
//!                                 form rounds from several processes against one Redis
//!                                 (store, then store and trail)
//! mrtr-gate-testkit bench-expire [--redis URL] [--sizes N,N,...]
//!                                 one expire-stale sweep over many live bindings
//! mrtr-gate-testkit rounds ENGINE KIND N
//!                                 N rounds and nothing else, for profilers and
//!                                 instruction counters (scripts/instructions); ENGINE is
//!                                 `component` or `native`, KIND `form`, `form-new`, `url`
//!                                 or `state-only`
//! mrtr-gate-testkit race-worker ...
//!                                 one process of a multi-process race (tests/race.rs)
//! ```

use clap::{Parser, Subcommand};
use mrtr_gate_testkit::error_chain;
use mrtr_gate_wasmtime::GateRuntime;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mrtr-gate-testkit",
    version,
    about = "The mrtr-gate test kit: benchmarks, profiler rounds and the race worker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Rounds in the component vs the native core (and results measured elsewhere).
    Bench {
        /// Rounds per measurement.
        #[arg(long, default_value_t = 2000)]
        rounds: usize,
        /// A result measured by another engine (JSON), to print beside these.
        #[arg(long = "external", alias = "seed-js")]
        externals: Vec<PathBuf>,
        /// How the cost grows with the input.
        #[arg(long)]
        scaling: bool,
    },
    /// What the gate adds to a real round trip: form rounds against a streamable HTTP server
    /// with the gate and with it off, alternating (defaults: the Python SDK peer's
    /// `book_flight`, tests/peers/python_sdk/server.py).
    BenchClient {
        /// The server.
        #[arg(long)]
        http: String,
        /// Timed calls of each kind.
        #[arg(long, default_value_t = 300)]
        calls: usize,
        /// The tool.
        #[arg(long, default_value = "book_flight")]
        tool: String,
        /// Its arguments.
        #[arg(long, default_value = r#"{"origin":"OSL","destination":"SFO"}"#)]
        arguments: String,
        /// Run the gate compiled natively instead of the component.
        #[arg(long)]
        native: bool,
        /// The answers to its one round.
        #[arg(
            long,
            default_value = r#"{"passenger":{"action":"accept","content":{"full_name":"Ada Lovelace","seat":"window","bags":1}}}"#
        )]
        answers: String,
    },
    /// Form rounds from several processes at once against one Redis, and against the
    /// in-memory store: rounds/s, p50, p99 and Redis calls per round.
    BenchRedis {
        /// The Redis URL.
        #[arg(long)]
        redis: String,
        /// Processes at once.
        #[arg(long, default_value_t = 4)]
        processes: usize,
        /// Timed rounds per process.
        #[arg(long, default_value_t = 500)]
        rounds: i64,
        /// Run as one of the processes (internal).
        #[arg(long, hide = true)]
        worker: bool,
        /// Servers each process spreads its rounds over (each its own hash tag: one Cluster
        /// slot).
        #[arg(long, default_value_t = 1)]
        servers: usize,
        /// The worker's store and trail: `memory`, `redis-store` or `redis-store-and-trail`
        /// (internal).
        #[arg(long, hide = true, default_value = "memory")]
        keeping: String,
        /// The worker's first id (internal).
        #[arg(long, hide = true, default_value_t = 1_000_000)]
        first: i64,
        /// The shared namespace (internal).
        #[arg(long, hide = true, default_value = "bench")]
        namespace: String,
    },
    /// What `mrtr-gate proxy` adds over loopback HTTP: form rounds straight to the server,
    /// through the proxy with the gate off, with it on (a file trail per --audit-dir), and on
    /// Redis; latency with one client, requests/s with several; then the RSS over many rounds.
    BenchProxy {
        /// The server (the Python SDK peer, tests/peers/python_sdk/server.py).
        #[arg(long)]
        http: String,
        /// Timed rounds per client per row.
        #[arg(long, default_value_t = 500)]
        rounds: usize,
        /// Clients at once, comma-separated (each one sequential loop, one connection).
        #[arg(long, default_value = "1,8,32", value_delimiter = ',')]
        clients: Vec<usize>,
        /// A folder for the gate's trail file, each its own row (repeatable; default: the
        /// temporary folder).
        #[arg(long = "audit-dir")]
        audit_dirs: Vec<PathBuf>,
        /// A Redis for the Redis row.
        #[arg(long)]
        redis: Option<String>,
        /// Rounds of the RSS run (0: none).
        #[arg(long, default_value_t = 100_000)]
        rss_rounds: usize,
        /// The RSS run's proxy: this `mrtr-gate` binary, run as its own process (default: the
        /// one beside this test kit).
        #[arg(long)]
        proxy_bin: Option<PathBuf>,
        /// The RSS run's `--round-trip-lifetime` (seconds): short, so that the run outlasts
        /// many lifetimes and what a finished round keeps is seen to go.
        #[arg(long, default_value_t = 10)]
        rss_lifetime: u64,
        /// Side by side with another proxy: this `mcp-proxy` binary (0.6.0; scripts/bench
        /// installs it), relaying the server's `echo` beside `mrtr-gate proxy`.
        #[arg(long)]
        peer_bin: Option<PathBuf>,
        /// Only the side by side (with --peer-bin): no form-round rows, no RSS run.
        #[arg(long, requires = "peer_bin")]
        side_by_side_only: bool,
        /// Passes over the side by side's rows (each figure the median of its passes).
        #[arg(long, default_value_t = 5)]
        passes: usize,
        /// The tool.
        #[arg(long, default_value = "book_flight")]
        tool: String,
        /// Its arguments.
        #[arg(long, default_value = r#"{"origin":"OSL","destination":"SFO"}"#)]
        arguments: String,
        /// The answers to its one round.
        #[arg(
            long,
            default_value = r#"{"passenger":{"action":"accept","content":{"full_name":"Ada Lovelace","seat":"window","bags":1}}}"#
        )]
        answers: String,
    },
    /// What the operator's policies (`--policy`, docs/policy.md) cost per round: a form, a URL
    /// and a state-only round judged by 1 and by 100 policies; p50, p99 and the mean.
    BenchPolicy {
        /// Timed judgements of each round per policy count.
        #[arg(long, default_value_t = 20_000)]
        rounds: usize,
        /// The policy counts, comma-separated.
        #[arg(long, default_value = "1,100", value_delimiter = ',')]
        policies: Vec<usize>,
    },
    /// One `expire-stale` sweep over N live bindings that are not due and 100 that are, with
    /// the in-memory store and (given --redis) Redis: the sweep's time and storage calls.
    BenchExpire {
        /// The Redis URL (no Redis rows without it).
        #[arg(long)]
        redis: Option<String>,
        /// The numbers of live, not-due bindings, comma-separated.
        #[arg(long, default_value = "0,10000,1000000", value_delimiter = ',')]
        sizes: Vec<u64>,
    },
    /// One process of a multi-process race over a shared Redis (host-harness/testkit/tests/race.rs):
    /// attack rounds FIRST..FIRST+ROUNDS as WORKER, one JSON line per attempt.
    RaceWorker {
        /// The Redis URL.
        #[arg(long)]
        redis: String,
        /// The shared namespace.
        #[arg(long)]
        namespace: String,
        /// This process's audit file.
        #[arg(long)]
        audit: PathBuf,
        /// The first round's id.
        #[arg(long)]
        first: i64,
        /// How many rounds.
        #[arg(long)]
        rounds: i64,
        /// This worker's number.
        #[arg(long)]
        worker: i64,
        /// When to start (Unix ms), the same for every worker.
        #[arg(long, default_value_t = 0)]
        start_at_ms: u64,
        /// Hold this long inside the consent prompt (so the test can kill the process there).
        #[arg(long, default_value_t = 0)]
        hold_consent_ms: u64,
        /// Hold this long after a retry was built (so the test can kill the process there).
        #[arg(long, default_value_t = 0)]
        hold_after_win_ms: u64,
    },
    /// N rounds and nothing else, for profilers and instruction counters.
    Rounds {
        /// `component` or `native`.
        engine: String,
        /// `form`, `form-new`, `url` or `state-only`.
        kind: String,
        /// How many.
        count: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench {
            rounds,
            externals,
            scaling,
        } => bench(rounds, &externals, scaling),
        Command::Rounds {
            engine,
            kind,
            count,
        } => rounds(&engine, &kind, count),
        Command::BenchClient {
            http,
            calls,
            tool,
            arguments,
            native,
            answers,
        } => serde_json::from_str(&arguments)
            .map_err(|e| format!("--arguments: {e}"))
            .and_then(|arguments| {
                bench_client(&mrtr_gate_testkit::bench_client::Workload {
                    url: http,
                    tool,
                    arguments,
                    answers,
                    calls,
                    native,
                })
            }),
        Command::RaceWorker {
            redis,
            namespace,
            audit,
            first,
            rounds,
            worker,
            start_at_ms,
            hold_consent_ms,
            hold_after_win_ms,
        } => GateRuntime::embedded()
            .map_err(|e| error_chain(&e))
            .and_then(|runtime| {
                mrtr_gate_testkit::race::attack(
                    &runtime,
                    &redis,
                    &namespace,
                    &audit,
                    first,
                    rounds,
                    worker,
                    start_at_ms,
                    mrtr_gate_testkit::race::Holds {
                        consent_ms: hold_consent_ms,
                        after_win_ms: hold_after_win_ms,
                    },
                )
            }),
        Command::BenchRedis {
            redis,
            processes,
            rounds,
            worker,
            servers,
            keeping,
            first,
            namespace,
        } => bench_redis(
            &redis,
            processes,
            rounds,
            worker.then_some(keeping.as_str()),
            servers,
            first,
            &namespace,
        ),
        Command::BenchProxy {
            http,
            rounds,
            clients,
            audit_dirs,
            redis,
            rss_rounds,
            proxy_bin,
            rss_lifetime,
            peer_bin,
            side_by_side_only,
            passes,
            tool,
            arguments,
            answers,
        } => serde_json::from_str(&arguments)
            .map_err(|e| format!("--arguments: {e}"))
            .and_then(|arguments| {
                let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
                let audit_dirs = if audit_dirs.is_empty() {
                    vec![std::env::temp_dir()]
                } else {
                    audit_dirs
                };
                mrtr_gate_testkit::bench_proxy::run(
                    &runtime,
                    &mrtr_gate_testkit::bench_proxy::Workload {
                        upstream: http,
                        tool,
                        arguments,
                        answers,
                        rounds,
                        clients,
                        audit_dirs,
                        redis,
                        rss_rounds,
                        rss_lifetime_s: rss_lifetime,
                        proxy_bin: proxy_bin.unwrap_or_else(|| {
                            std::env::current_exe()
                                .ok()
                                .and_then(|e| e.parent().map(|d| d.join("mrtr-gate")))
                                .unwrap_or_else(|| PathBuf::from("mrtr-gate"))
                        }),
                        peer_bin,
                        side_by_side_only,
                        passes,
                    },
                )
            })
            .map(|table| print!("{table}")),
        Command::BenchPolicy { rounds, policies } => {
            mrtr_gate_testkit::bench_policy::run(rounds, &policies).map(|table| print!("{table}"))
        }
        Command::BenchExpire { redis, sizes } => GateRuntime::embedded()
            .map_err(|e| error_chain(&e))
            .and_then(|runtime| {
                mrtr_gate_testkit::bench_expire::run(&runtime, &sizes, redis.as_deref())
            })
            .map(|table| print!("{table}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrtr-gate-testkit: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench(rounds: usize, external_files: &[PathBuf], scaling: bool) -> Result<(), String> {
    let mut externals = Vec::new();
    for path in external_files {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        externals.push(mrtr_gate_testkit::bench::External::parse(&text)?);
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "mrtr-gate-testkit: a debug build; run `cargo run --release -p mrtr-gate-testkit --bin mrtr-gate-testkit -- bench` for real numbers"
        );
    }
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    if scaling {
        print!(
            "{}",
            mrtr_gate_testkit::bench::scaling(&runtime, rounds.min(500))?
        );
    } else {
        print!(
            "{}",
            mrtr_gate_testkit::bench::run_with(&runtime, rounds, &externals)?
        );
    }
    Ok(())
}

fn rounds(engine: &str, kind: &str, count: usize) -> Result<(), String> {
    use mrtr_gate_host::NativeGate;
    use mrtr_gate_testkit::bench::{RoundKind, plain_rounds};
    use mrtr_gate_testkit::fixture::ScenarioHosts;
    use mrtr_gate_wasmtime::ComponentGate;
    const USAGE: &str =
        "usage: mrtr-gate-testkit rounds component|native form|form-new|url|state-only N";
    let kind = RoundKind::parse(kind).ok_or(USAGE)?;
    let hosts = ScenarioHosts::for_bench();
    match engine {
        "component" => {
            let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
            plain_rounds(
                &mut ComponentGate::new(&runtime, hosts.services()),
                kind,
                count,
            )
        }
        "native" => plain_rounds(&mut NativeGate::new(hosts.services()), kind, count),
        _ => Err(USAGE.into()),
    }
}

fn bench_client(workload: &mrtr_gate_testkit::bench_client::Workload) -> Result<(), String> {
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    print!(
        "{}",
        mrtr_gate_testkit::bench_client::run(&runtime, workload)?
    );
    Ok(())
}

fn bench_redis(
    redis: &str,
    processes: usize,
    rounds: i64,
    worker: Option<&str>,
    servers: usize,
    first: i64,
    namespace: &str,
) -> Result<(), String> {
    use mrtr_gate_testkit::bench_redis::{self as b, Keeping};
    const KEEPINGS: [(&str, Keeping, &str); 3] = [
        (
            "memory",
            Keeping::Memory,
            "in-memory (one per process, not shared)",
        ),
        (
            "redis-store",
            Keeping::RedisStore,
            "Redis store (shared), trail in memory",
        ),
        (
            "redis-store-and-trail",
            Keeping::RedisStoreAndTrail,
            "Redis store and trail (shared: a chain per server)",
        ),
    ];
    if let Some(keeping) = worker {
        let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
        let (_, keeping, _) = KEEPINGS
            .iter()
            .find(|(name, _, _)| *name == keeping)
            .ok_or_else(|| format!("--keeping {keeping}: unknown"))?;
        let report = b::worker(
            &runtime,
            *keeping,
            (redis, namespace),
            servers,
            first,
            rounds,
        )?;
        println!("{report}");
        return Ok(());
    }
    // Load (and cache) the component once, so the processes start from the cache.
    GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut out = String::from(b::HEAD);
    for (name, _, label) in KEEPINGS {
        // A namespace per row: each row's trail starts empty.
        let namespace = format!("bench-{}-{name}", std::process::id());
        let children: Vec<_> = (0..processes)
            .map(|p| {
                std::process::Command::new(&exe)
                    .args(["bench-redis", "--worker", "--redis", redis])
                    .args(["--namespace", &namespace, "--keeping", name])
                    .args(["--servers", &servers.to_string()])
                    .args(["--rounds", &rounds.to_string()])
                    .args(["--first", &(1_000_000 * (p as i64 + 1)).to_string()])
                    .stdout(std::process::Stdio::piped())
                    .spawn()
            })
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let mut reports = Vec::new();
        for child in children {
            let o = child.wait_with_output().map_err(|e| e.to_string())?;
            if !o.status.success() {
                return Err("a bench process failed".into());
            }
            reports.push(
                serde_json::from_slice::<serde_json::Value>(&o.stdout)
                    .map_err(|e| e.to_string())?,
            );
        }
        out.push_str(&b::row(label, &reports));
    }
    print!("{out}");
    Ok(())
}
