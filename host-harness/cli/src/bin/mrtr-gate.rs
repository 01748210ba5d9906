//! `mrtr-gate`: call an MCP server through the gate, run the demo, or inspect the component.
//!
//! ```text
//! mrtr-gate call (--stdio CMD | --http URL) METHOD NAME [ARGS]
//!                                 one request through the gate, every round answered at
//!                                 the terminal or from --answers FILE (docs/cli.md)
//! mrtr-gate conformance [FLAGS] URL
//!                                 the client of the official conformance suite
//! mrtr-gate demo [--audit FILE]   realistic rounds end to end through the component
//! mrtr-gate bench [--rounds N] [--external RESULT.json]... [--scaling]
//!                                 rounds in the component vs the native core (and results
//!                                 measured elsewhere: the seed's JS gate, the jco host)
//! mrtr-gate rounds ENGINE KIND N  N rounds and nothing else, for profilers and
//!                                 instruction counters (scripts/instructions); ENGINE is
//!                                 `component` or `native`, KIND `form`, `form-new`, `url`
//!                                 or `state-only`
//! mrtr-gate info                  the component's imports, exports and size
//! mrtr-gate export-component FILE write the component (for jco, wasmtime-py, wasm-tools)
//! mrtr-gate verify-audit FILE     verify a JSON-lines audit log's hash chain, and its keyed
//!                                 links and anchor (docs/host-keys.md)
//! ```

use clap::{Args, Parser, Subcommand};
use mrtr_gate_cli::call::{CallOptions, Target};
use mrtr_gate_cli::error_chain;
use mrtr_gate_cli::keys::KeyOptions;
use mrtr_gate_client::ServerStderr;
use mrtr_gate_host::shown::json_for_terminal;
use mrtr_gate_host::{GateRuntime, runtime::EMBEDDED_COMPONENT};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mrtr-gate",
    version,
    about = "The mrtr-gate MCP client gate: calls, demo, benchmarks, component tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Call an MCP server through the gate: every input_required round is checked, shown,
    /// answered and consented to before the retry goes out.
    Call {
        #[command(flatten)]
        server: ServerFlags,
        #[command(flatten)]
        flags: CallFlags,
        #[command(flatten)]
        stderr: StderrFlags,
        /// tools/call, prompts/get or resources/read.
        method: String,
        /// The tool or prompt name, or the resource URI.
        name: String,
        /// The arguments, a JSON object (tools/call and prompts/get).
        arguments: Option<String>,
    },
    /// List what the server offers (tools/list, prompts/list or resources/list). No gate
    /// round can come of it: a server that answers input_required here is refused.
    List {
        #[command(flatten)]
        server: ServerFlags,
        #[command(flatten)]
        stderr: StderrFlags,
        #[command(flatten)]
        keys: KeyFlags,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// `tools`, `prompts` or `resources`.
        what: String,
    },
    /// Be the client of the official conformance suite: run the scenario named by
    /// MCP_CONFORMANCE_SCENARIO against URL (the runner appends it).
    Conformance {
        #[command(flatten)]
        flags: CallFlags,
        /// The scenario server's URL.
        url: String,
    },
    /// Realistic rounds end to end through the component.
    Demo {
        /// Where the audit trail goes (default: a temporary file).
        #[arg(long)]
        audit: Option<PathBuf>,
    },
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
        /// The worker's store: the in-memory one instead of Redis (internal).
        #[arg(long, hide = true)]
        memory: bool,
        /// The worker's first id (internal).
        #[arg(long, hide = true, default_value_t = 1_000_000)]
        first: i64,
        /// The shared namespace (internal).
        #[arg(long, hide = true, default_value = "bench")]
        namespace: String,
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
    /// One process of a multi-process race over a shared Redis (host-harness/cli/tests/race.rs):
    /// attack rounds FIRST..FIRST+ROUNDS as WORKER, one JSON line per attempt.
    #[command(hide = true)]
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
    /// The component's imports, exports and size.
    Info,
    /// Write the component (for jco, wasmtime-py, wasm-tools).
    ExportComponent {
        /// Where.
        file: PathBuf,
    },
    /// Reconcile an audit trail (G002): its chain, bindings still open, expired ones, rounds
    /// used twice, retries without consent, and every refused attempt by kind. Exits 1 when
    /// the trail shows a violation.
    Reconcile {
        /// A JSON-lines trail, or `redis:<trail>` with --redis and --namespace.
        trail: String,
        /// The Redis URL of a `redis:` trail.
        #[arg(long)]
        redis: Option<String>,
        /// The namespace of a `redis:` trail.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Verify a JSON-lines audit log's hash chain, then (with the host keys) that every line
    /// has a link made with the key and that the log ends at its anchor.
    VerifyAudit {
        /// The log.
        file: PathBuf,
        #[command(flatten)]
        keys: KeyFlags,
        /// The log's links (default: FILE.links).
        #[arg(long, value_name = "FILE")]
        links: Option<PathBuf>,
        /// The log's anchor (default: the one `call --audit FILE` keeps beside the key file).
        #[arg(long, value_name = "FILE")]
        audit_anchor: Option<PathBuf>,
    },
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct ServerFlags {
    /// Spawn this server command (split like a shell would, run without one) and talk
    /// newline-delimited JSON-RPC over its stdin and stdout.
    #[arg(long, value_name = "COMMAND")]
    stdio: Option<String>,
    /// Post to this streamable HTTP endpoint.
    #[arg(long, value_name = "URL")]
    http: Option<String>,
}

#[derive(Args)]
struct StderrFlags {
    /// Append a --stdio server's stderr to FILE (default: a new file in the temporary
    /// folder, named on the screen). It never reaches this terminal unfiltered.
    #[arg(long, value_name = "FILE")]
    server_log: Option<PathBuf>,
    /// INSECURE: pass a --stdio server's stderr to this terminal unfiltered, where its escape
    /// sequences can erase or repaint the consent screen. For debugging a trusted server.
    #[arg(long, conflicts_with = "server_log")]
    insecure_raw_server_stderr: bool,
}

impl StderrFlags {
    fn server_stderr(&self) -> ServerStderr {
        match (&self.server_log, self.insecure_raw_server_stderr) {
            (_, true) => ServerStderr::InheritRaw,
            (Some(path), false) => ServerStderr::Log(path.clone()),
            (None, false) => ServerStderr::TempLog,
        }
    }
}

impl ServerFlags {
    fn target(self) -> Target {
        match (self.stdio, self.http) {
            (Some(command), _) => Target::Stdio(command),
            (None, Some(url)) => Target::Http(url),
            // clap's group makes one of the two required.
            (None, None) => Target::Http(String::new()),
        }
    }
}

#[derive(Args)]
struct KeyFlags {
    /// The host key file (default: $MRTR_GATE_HOST_KEYS, else host-keys.json in
    /// $XDG_CONFIG_HOME/mrtr-gate or ~/.config/mrtr-gate; made on first use, mode 0600).
    #[arg(long, value_name = "FILE")]
    host_keys: Option<PathBuf>,
    /// Run without host keys: stored rounds unauthenticated, the user and tenant as plain
    /// digests in the trail, the trail neither keyed nor anchored. Warned on stderr every run.
    #[arg(long)]
    insecure_no_host_keys: bool,
}

impl KeyFlags {
    fn options(&self, anchor: Option<&PathBuf>) -> KeyOptions {
        KeyOptions {
            key_file: self.host_keys.clone(),
            insecure_no_host_keys: self.insecure_no_host_keys,
            anchor: anchor.cloned(),
        }
    }
}

#[derive(Args)]
struct CallFlags {
    /// The user the request is bound to (default: $USER).
    #[arg(long)]
    user: Option<String>,
    /// The tenant the request is bound to.
    #[arg(long, default_value = "default")]
    tenant: String,
    /// Append the hash-chained audit trail to this JSON-lines file.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Answers for the rounds, instead of the terminal form: an object (input key to
    /// ElicitResult, for every round) or an array of them (one per round).
    #[arg(long, value_name = "FILE")]
    answers: Option<PathBuf>,
    /// Consent to the answers of --answers without asking (the consent screen is still
    /// printed on stderr).
    #[arg(long, requires = "answers")]
    yes: bool,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Hand URLs the user accepted to the system opener (no shell); else they are printed.
    #[arg(long)]
    open: bool,
    /// At most this many input_required rounds (1 to 64).
    #[arg(long)]
    max_rounds: Option<u32>,
    /// Where the --audit trail's anchor goes (default: anchors/ beside the key file).
    #[arg(long, value_name = "FILE", requires = "audit")]
    audit_anchor: Option<PathBuf>,
    #[command(flatten)]
    keys: KeyFlags,
}

impl CallFlags {
    fn options(&self, target: Target, server_stderr: ServerStderr) -> CallOptions {
        CallOptions {
            target,
            user: self
                .user
                .clone()
                .or_else(|| std::env::var("USER").ok())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "user".into()),
            tenant: self.tenant.clone(),
            audit: self.audit.clone(),
            answers: self.answers.clone(),
            yes: self.yes,
            open: self.open,
            max_rounds: self.max_rounds,
            server_stderr,
            keys: self.keys.options(self.audit_anchor.as_ref()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Call {
            server,
            flags,
            stderr,
            method,
            name,
            arguments,
        } => {
            let target = server.target();
            return call(
                &flags,
                target,
                stderr.server_stderr(),
                &method,
                &name,
                arguments.as_deref(),
            );
        }
        Command::Conformance { flags, url } => return conformance(&flags, &url),
        Command::List {
            server,
            stderr,
            keys,
            json,
            what,
        } => {
            return list(
                server.target(),
                stderr.server_stderr(),
                &keys.options(None),
                &what,
                json,
            );
        }
        Command::Demo { audit } => demo(audit),
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
                bench_client(&mrtr_gate_cli::bench_client::Workload {
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
                mrtr_gate_cli::race::attack(
                    &runtime,
                    &redis,
                    &namespace,
                    &audit,
                    first,
                    rounds,
                    worker,
                    start_at_ms,
                    mrtr_gate_cli::race::Holds {
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
            memory,
            first,
            namespace,
        } => bench_redis(&redis, processes, rounds, worker, memory, first, &namespace),
        Command::BenchExpire { redis, sizes } => GateRuntime::embedded()
            .map_err(|e| error_chain(&e))
            .and_then(|runtime| {
                mrtr_gate_cli::bench_expire::run(&runtime, &sizes, redis.as_deref())
            })
            .map(|table| print!("{table}")),
        Command::Info => info(),
        Command::ExportComponent { file } => export(&file),
        Command::VerifyAudit {
            file,
            keys,
            links,
            audit_anchor,
        } => verify(
            &file,
            &keys.options(audit_anchor.as_ref()),
            links.as_deref(),
        ),
        Command::Reconcile {
            trail,
            redis,
            namespace,
        } => return reconcile(&trail, redis.as_deref(), &namespace),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrtr-gate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn watch_ctrl_c() {
    use mrtr_gate_cli::call::CANCELLED;
    use std::sync::atomic::Ordering;
    // The first Ctrl-C cancels: the gate ends the binding and the server is told. A second
    // one leaves at once.
    let _ = ctrlc::set_handler(|| {
        if CANCELLED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
}

fn call(
    flags: &CallFlags,
    target: Target,
    server_stderr: ServerStderr,
    method: &str,
    name: &str,
    arguments: Option<&str>,
) -> ExitCode {
    use mrtr_gate_cli::call as c;
    watch_ctrl_c();
    let outcome = GateRuntime::embedded()
        .map_err(|e| {
            mrtr_gate_client::ClientError::Usage(format!("loading the gate: {}", error_chain(&e)))
        })
        .and_then(|runtime| {
            let params = c::params(method, name, arguments)?;
            let mut client = c::connect(&flags.options(target, server_stderr), &runtime)?;
            client.call(method, params)
        });
    if flags.json {
        println!("{}", json_for_terminal(&c::json_report(&outcome)));
    } else {
        match &outcome {
            Ok(done) => println!("{}", c::human_report(done)),
            Err(e) => eprintln!("mrtr-gate: {}", c::refusal_line(e)),
        }
    }
    ExitCode::from(c::exit_code(&outcome))
}

fn list(
    target: Target,
    server_stderr: ServerStderr,
    keys: &KeyOptions,
    what: &str,
    json: bool,
) -> ExitCode {
    use mrtr_gate_cli::call as c;
    let outcome = GateRuntime::embedded()
        .map_err(|e| {
            mrtr_gate_client::ClientError::Usage(format!("loading the gate: {}", error_chain(&e)))
        })
        .and_then(|runtime| {
            let options = CallOptions {
                target,
                user: "lister".into(),
                tenant: "default".into(),
                audit: None,
                answers: None,
                yes: false,
                open: false,
                max_rounds: None,
                server_stderr,
                keys: keys.clone(),
            };
            let mut client = c::connect(&options, &runtime)?;
            c::list(&mut client, what)
        });
    match outcome {
        Ok(result) => {
            if json {
                println!("{}", json_for_terminal(&result));
            } else {
                println!("{}", c::list_lines(&result, what));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json {
                println!("{}", json_for_terminal(&c::error_json(&e)));
            } else {
                eprintln!("mrtr-gate: {}", c::refusal_line(&e));
            }
            ExitCode::from(c::error_exit_code(&e))
        }
    }
}

fn conformance(flags: &CallFlags, url: &str) -> ExitCode {
    use mrtr_gate_cli::call as c;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let outcome = GateRuntime::embedded()
        .map_err(|e| {
            mrtr_gate_client::ClientError::Usage(format!("loading the gate: {}", error_chain(&e)))
        })
        .and_then(|runtime| {
            let mut client = c::connect(
                &flags.options(Target::Http(url.to_owned()), ServerStderr::Discard),
                &runtime,
            )?;
            mrtr_gate_cli::conformance::run(&scenario, &mut client)
        });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrtr-gate conformance {scenario}: {}", c::refusal_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn demo(audit: Option<PathBuf>) -> Result<(), String> {
    let audit = audit.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mrtr-gate-demo-{}.jsonl", std::process::id()))
    });
    let started = std::time::Instant::now();
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    let loaded = started.elapsed();
    let out = mrtr_gate_cli::demo::run(&runtime, &audit)?;
    println!("{out}");
    println!(
        "(component {} bytes, loaded in {:.1} ms from the precompiled cache or compiled afresh)",
        EMBEDDED_COMPONENT.len(),
        loaded.as_secs_f64() * 1e3
    );
    Ok(())
}

fn bench(rounds: usize, external_files: &[PathBuf], scaling: bool) -> Result<(), String> {
    let mut externals = Vec::new();
    for path in external_files {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        externals.push(mrtr_gate_cli::bench::External::parse(&text)?);
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "mrtr-gate: a debug build; run `cargo run --release -p mrtr-gate-cli --bin mrtr-gate -- bench` for real numbers"
        );
    }
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    if scaling {
        print!(
            "{}",
            mrtr_gate_cli::bench::scaling(&runtime, rounds.min(500))?
        );
    } else {
        print!(
            "{}",
            mrtr_gate_cli::bench::run_with(&runtime, rounds, &externals)?
        );
    }
    Ok(())
}

fn rounds(engine: &str, kind: &str, count: usize) -> Result<(), String> {
    use mrtr_gate_cli::bench::{RoundKind, plain_rounds};
    use mrtr_gate_cli::fixture::ScenarioHosts;
    use mrtr_gate_host::{ComponentGate, NativeGate};
    const USAGE: &str = "usage: mrtr-gate rounds component|native form|form-new|url|state-only N";
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

fn bench_client(workload: &mrtr_gate_cli::bench_client::Workload) -> Result<(), String> {
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    print!("{}", mrtr_gate_cli::bench_client::run(&runtime, workload)?);
    Ok(())
}

fn bench_redis(
    redis: &str,
    processes: usize,
    rounds: i64,
    worker: bool,
    memory: bool,
    first: i64,
    namespace: &str,
) -> Result<(), String> {
    use mrtr_gate_cli::bench_redis as b;
    if worker {
        let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
        let store = (!memory).then_some((redis, namespace));
        println!("{}", b::worker(&runtime, store, first, rounds)?);
        return Ok(());
    }
    // Load (and cache) the component once, so the processes start from the cache.
    GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let namespace = format!("bench-{}", std::process::id());
    let mut out = String::from(b::HEAD);
    for memory in [true, false] {
        let children: Vec<_> = (0..processes)
            .map(|p| {
                let mut c = std::process::Command::new(&exe);
                c.args([
                    "bench-redis",
                    "--worker",
                    "--redis",
                    redis,
                    "--namespace",
                    &namespace,
                ])
                .args(["--rounds", &rounds.to_string()])
                .args(["--first", &(1_000_000 * (p as i64 + 1)).to_string()]);
                if memory {
                    c.arg("--memory");
                }
                c.stdout(std::process::Stdio::piped()).spawn()
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
        let label = if memory {
            "in-memory (one per process, not shared)"
        } else {
            "Redis (shared)"
        };
        out.push_str(&b::row(label, &reports));
    }
    print!("{out}");
    Ok(())
}

fn info() -> Result<(), String> {
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    println!("component size: {} bytes", EMBEDDED_COMPONENT.len());
    println!("imports: {}", runtime.imports().join(", "));
    println!("exports: {}", runtime.exports().join(", "));
    Ok(())
}

fn export(path: &std::path::Path) -> Result<(), String> {
    std::fs::write(path, EMBEDDED_COMPONENT)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("{}: {} bytes", path.display(), EMBEDDED_COMPONENT.len());
    Ok(())
}

fn reconcile(trail: &str, redis: Option<&str>, namespace: &str) -> ExitCode {
    let lines = match (trail.strip_prefix("redis:"), redis) {
        (Some(name), Some(url)) => mrtr_gate_redis::RedisAudit::connect(url, namespace, name)
            .and_then(|a| a.lines())
            .map_err(|e| e.to_string()),
        (Some(_), None) => Err("a redis: trail needs --redis URL".into()),
        (None, _) => std::fs::read_to_string(trail)
            .map(|t| t.lines().map(str::to_owned).collect())
            .map_err(|e| format!("{trail}: {e}")),
    };
    match lines {
        Ok(lines) => {
            let report =
                mrtr_gate_host::core::reconcile::reconcile(lines.iter().map(String::as_str));
            println!("{}", report.to_json());
            if report.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("mrtr-gate: {e}");
            ExitCode::from(2)
        }
    }
}

fn verify(
    path: &std::path::Path,
    keys: &KeyOptions,
    links: Option<&std::path::Path>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let n = mrtr_gate_core::audit::verify_chain(text.lines())
        .map_err(|b| format!("the chain is broken: {b:?}"))?;
    if keys.insecure_no_host_keys {
        eprintln!("{}", mrtr_gate_cli::keys::INSECURE_WARNING);
        println!(
            "{}: {n} events, chain intact (links and anchor not checked)",
            path.display()
        );
        return Ok(());
    }
    println!(
        "{}",
        mrtr_gate_cli::keys::verify_keyed(path, &text, n, keys, links)?
    );
    Ok(())
}
