//! `mrtr-gate`: call an MCP server through the gate, run the demo, or inspect the component.
//!
//! ```text
//! mrtr-gate call (--stdio CMD | --http URL) METHOD NAME [ARGS]
//!                                 one request through the gate, every round answered at
//!                                 the terminal or from --answers FILE (docs/cli.md)
//! mrtr-gate list (--stdio CMD | --http URL) tools|prompts|resources
//!                                 what the server offers (never a gate round)
//! mrtr-gate proxy [OPTIONS] -- COMMAND [ARGS...]
//!                                 gate any MCP client's calls to a server it spawns (or,
//!                                 with --listen ADDR --upstream URL, over HTTP; docs/proxy.md)
//! mrtr-gate probe --command CMD [--scenario NAME ...] [--json] [--list]
//!                                 grade any MCP client's MRTR handling against a hostile
//!                                 server (docs/probe.md)
//! mrtr-gate conformance [FLAGS] URL
//!                                 the client of the official conformance suite
//! mrtr-gate demo [--audit FILE]   realistic rounds end to end through the component
//! mrtr-gate info                  the component's imports, exports and size
//! mrtr-gate export-component FILE write the component (for jco, wasmtime-py, wasm-tools)
//! mrtr-gate verify-audit FILE     verify a JSON-lines audit log's hash chain, and its keyed
//!                                 links and anchor (docs/host-keys.md)
//! mrtr-gate reconcile TRAIL       reconcile an audit trail (G002)
//! ```
//!
//! The benchmarks, the profilers' rounds and the race worker are `mrtr-gate-testkit`
//! (host-harness/testkit), which this command does not depend on.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use mrtr_gate_cli::call::{CallOptions, Target};
use mrtr_gate_cli::error_chain;
use mrtr_gate_cli::keys::{KeyFlags, KeyOptions};
use mrtr_gate_client::ServerStderr;
use mrtr_gate_client::transport::isolation::RunAs;
use mrtr_gate_host::principal::default_user;
use mrtr_gate_host::shown::json_for_terminal;
use mrtr_gate_wasmtime::GateRuntime;
use mrtr_gate_wasmtime::runtime::{EMBEDDED_COMPONENT, EMBEDDED_COMPONENT_SHA256};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mrtr-gate",
    version,
    about = "The mrtr-gate MCP client gate: calls, demo, audit and component tools"
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
    /// Gate any MCP client's calls to a server: `mrtr-gate proxy [OPTIONS] -- COMMAND
    /// [ARGS...]` spawns the server (no shell) and relays its stdio, every input_required
    /// round judged, bound and audited (docs/proxy.md).
    Proxy {
        #[command(flatten)]
        flags: Box<mrtr_gate_cli::proxy::ProxyFlags>,
    },
    /// Grade any MCP client against a hostile server: run CMD once per scenario with the
    /// endpoint's URL as its last word, and judge what it sends (docs/probe.md).
    Probe {
        #[command(flatten)]
        flags: mrtr_gate_cli::probe::ProbeFlags,
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
    /// The component's imports, exports and size.
    Info,
    /// Write the component (for jco, wasmtime-py, wasm-tools).
    ExportComponent {
        /// Where.
        file: PathBuf,
    },
    /// Reconcile an audit trail (G002): its chain, bindings still open, expired ones, rounds
    /// used twice, retries without consent, and every refused attempt by kind. Exits 0 when
    /// the trail is clean (no violation, every binding ended), 1 when it shows a violation, 3
    /// when it shows none but bindings are open (live, or left by a host that crashed or was
    /// killed), 2 when it cannot be read.
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
    /// Policies that decide rounds (Cedar, docs/policy.md).
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Export an audit trail for a SIEM, verified first (as verify-audit does; a trail that
    /// does not verify exports nothing): OCSF API Activity events or OpenTelemetry log records,
    /// one JSON line per event on stdout, digests only (docs/audit.md, "Export").
    ExportAudit {
        /// A JSON-lines trail, or `redis:<trail>` with --redis and --namespace (its chain is
        /// verified; a Redis trail is not keyed).
        trail: String,
        /// `ocsf` (OCSF 1.3 API Activity, class 6003) or `otel` (OTLP/JSON log records, one
        /// request per line).
        #[arg(long, value_enum)]
        format: mrtr_gate_cli::export::Format,
        #[command(flatten)]
        keys: KeyFlags,
        /// The trail's links (default: TRAIL.links).
        #[arg(long, value_name = "FILE")]
        links: Option<PathBuf>,
        /// The trail's anchor (default: the one kept beside the key file).
        #[arg(long, value_name = "FILE")]
        audit_anchor: Option<PathBuf>,
        /// The Redis URL of a `redis:` trail.
        #[arg(long)]
        redis: Option<String>,
        /// The namespace of a `redis:` trail.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Validate a policy file against the round schema: its policies' ids on stdout, or every
    /// problem on stderr as FILE:LINE:COLUMN: code: message.
    Check {
        /// The policy file (Cedar).
        file: PathBuf,
    },
    /// Show which policy decides each round of a call a proxy captured (--capture CAPTURE
    /// --request-id ID), or a consent view (--view VIEW): the round's facts, the policies that
    /// hold, the decision.
    Explain {
        /// The policy file (Cedar).
        file: PathBuf,
        /// A `mrtr-gate proxy --capture` file.
        #[arg(
            long,
            value_name = "CAPTURE",
            requires = "request_id",
            conflicts_with = "view"
        )]
        capture: Option<PathBuf>,
        /// The call's id in the capture (the trail's `request_id`).
        #[arg(long, value_name = "ID", requires = "capture")]
        request_id: Option<String>,
        /// The server (its URL, or `endpoint:<id>`), for a capture whose lines do not name it.
        #[arg(long, value_name = "SERVER", requires = "capture")]
        server: Option<String>,
        /// A consent view (`mrtr-gate/consent-view/v2`) as a host or a consent hook got it.
        #[arg(long, value_name = "VIEW", required_unless_present = "capture")]
        view: Option<PathBuf>,
        /// The user the policies judge the call of (the name the policies are written with).
        #[arg(long)]
        user: String,
        /// The user's tenant.
        #[arg(long)]
        tenant: String,
        /// Print one JSON object on stdout instead of text.
        #[arg(long)]
        json: bool,
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
    /// INSECURE: run a --stdio server without its sandbox (docs/cli.md, "The server
    /// process"): it can then rewrite the trail, read the host key and open this user's
    /// terminals (the consent form's among them). Warned on stderr every run.
    #[arg(long)]
    insecure_no_server_isolation: bool,
    /// Run a --stdio server as another user (`NAME`, `UID` or `UID:GID`; not root, not this
    /// user), which cannot reach this user's terminal, trail or key (docs/cli.md, "The server
    /// process"). Takes the privilege to (root).
    #[arg(long, value_name = "USER")]
    server_user: Option<String>,
}

impl StderrFlags {
    fn run_as(&self) -> Result<Option<RunAs>, mrtr_gate_client::ClientError> {
        self.server_user
            .as_deref()
            .map(RunAs::parse)
            .transpose()
            .map_err(|e| mrtr_gate_client::ClientError::Usage(e.to_string()))
    }

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
    /// Cedar policies that judge every round before anyone sees it (a forbid refuses it, a
    /// permit grants its consent, the rest go to the terminal or --yes; docs/policy.md).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    #[command(flatten)]
    keys: KeyFlags,
}

impl CallFlags {
    fn options(
        &self,
        target: Target,
        server_stderr: ServerStderr,
        no_isolation: bool,
        server_user: Option<RunAs>,
    ) -> CallOptions {
        CallOptions {
            target,
            user: default_user(self.user.as_deref()),
            tenant: self.tenant.clone(),
            audit: self.audit.clone(),
            answers: self.answers.clone(),
            yes: self.yes,
            open: self.open,
            max_rounds: self.max_rounds,
            server_stderr,
            insecure_no_server_isolation: no_isolation,
            server_user,
            keys: self.keys.options(self.audit_anchor.as_ref()),
            policy: self.policy.clone(),
        }
    }
}

fn main() -> ExitCode {
    // Each subcommand's --help ends with its exit statuses (declared once, docs/cli.md).
    let command = mrtr_gate_cli::exits::with_exit_help(Cli::command());
    let proxy = command
        .find_subcommand("proxy")
        .cloned()
        .unwrap_or_else(|| clap::Command::new("proxy"));
    // `proxy --config FILE`: the file's keys become the flags they name.
    let args = match mrtr_gate_cli::config::splice(std::env::args_os().collect(), &proxy) {
        Ok(args) => args,
        Err(e) => {
            mrtr_gate_host::say!("mrtr-gate proxy: {e}");
            return ExitCode::from(mrtr_gate_cli::proxy::EXIT_USAGE);
        }
    };
    let matches = command.get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
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
                &stderr,
                &method,
                &name,
                arguments.as_deref(),
            );
        }
        Command::Conformance { flags, url } => return conformance(&flags, &url),
        Command::Proxy { flags } if flags.print_config => {
            return match (flags.check(), matches.subcommand_matches("proxy")) {
                (Ok(_), Some(given)) => {
                    mrtr_gate_cli::out!(
                        "{}",
                        mrtr_gate_cli::config::render(&proxy, given).trim_end()
                    );
                    ExitCode::SUCCESS
                }
                (Err(e), _) => {
                    mrtr_gate_host::say!("mrtr-gate proxy: {e}");
                    ExitCode::from(mrtr_gate_cli::proxy::EXIT_USAGE)
                }
                (Ok(_), None) => ExitCode::from(mrtr_gate_cli::proxy::EXIT_USAGE),
            };
        }
        Command::Proxy { flags } => return ExitCode::from(mrtr_gate_cli::proxy::run(&flags)),
        Command::Probe { flags } => return ExitCode::from(mrtr_gate_cli::probe::run(&flags)),
        Command::List {
            server,
            stderr,
            keys,
            json,
            what,
        } => {
            return list(server.target(), &stderr, &keys.options(None), &what, json);
        }
        Command::Demo { audit } => demo(audit),
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
        Command::Policy {
            command: PolicyCommand::Check { file },
        } => return ExitCode::from(mrtr_gate_cli::policy::check(&file)),
        Command::Policy {
            command:
                PolicyCommand::Explain {
                    file,
                    capture,
                    request_id,
                    server,
                    view,
                    user,
                    tenant,
                    json,
                },
        } => {
            use mrtr_gate_cli::policy::{ExplainOptions, Source, explain};
            let source = match (capture, request_id, view) {
                (Some(path), Some(request_id), None) => Source::Capture {
                    path,
                    request_id,
                    server,
                },
                (None, None, Some(view)) => Source::View(view),
                _ => {
                    mrtr_gate_host::say!(
                        "mrtr-gate: explain --capture CAPTURE --request-id ID, or --view VIEW"
                    );
                    return ExitCode::from(2);
                }
            };
            return ExitCode::from(explain(&ExplainOptions {
                policy: file,
                source,
                user,
                tenant,
                json,
            }));
        }
        Command::ExportAudit {
            trail,
            format,
            keys,
            links,
            audit_anchor,
            redis,
            namespace,
        } => {
            return export_audit(
                &trail,
                format,
                &keys.options(audit_anchor.as_ref()),
                links.as_deref(),
                redis.as_deref(),
                &namespace,
            );
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            mrtr_gate_host::say!("mrtr-gate: {e}");
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
    stderr: &StderrFlags,
    method: &str,
    name: &str,
    arguments: Option<&str>,
) -> ExitCode {
    use mrtr_gate_cli::call as c;
    watch_ctrl_c();
    let mut root_failed = None;
    let outcome = GateRuntime::embedded()
        .map_err(|e| {
            mrtr_gate_client::ClientError::Usage(format!("loading the gate: {}", error_chain(&e)))
        })
        .and_then(|runtime| {
            let params = c::params(method, name, arguments)?;
            let options = flags.options(
                target,
                stderr.server_stderr(),
                stderr.insecure_no_server_isolation,
                stderr.run_as()?,
            );
            let (mut client, root) = c::connect(&options, &runtime)?;
            Ok((client.call(method, params), root))
        })
        .and_then(|(outcome, root)| {
            // The call's end anchored: a trail whose end is not is an audit failure, said
            // and in the exit status (the result, if any, is still printed).
            if let Some(Err(e)) = root.map(mrtr_gate_host::trail_root::RootSchedule::finish) {
                root_failed = Some(e);
            }
            outcome
        });
    if let Some(e) = &root_failed {
        mrtr_gate_host::say!("mrtr-gate: the trail's root could not be anchored: {e}");
    }
    if flags.json {
        mrtr_gate_cli::out!("{}", json_for_terminal(&c::json_report(&outcome)));
    } else {
        match &outcome {
            Ok(done) => mrtr_gate_cli::out!("{}", c::human_report(done)),
            Err(e) => mrtr_gate_host::say!("mrtr-gate: {}", c::refusal_line(e)),
        }
    }
    match (c::exit_code(&outcome), &root_failed) {
        (0 | 6, Some(_)) => ExitCode::from(1),
        (code, _) => ExitCode::from(code),
    }
}

fn list(
    target: Target,
    stderr: &StderrFlags,
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
                server_stderr: stderr.server_stderr(),
                insecure_no_server_isolation: stderr.insecure_no_server_isolation,
                server_user: stderr.run_as()?,
                keys: keys.clone(),
                policy: None,
            };
            let (mut client, _root) = c::connect(&options, &runtime)?;
            c::list(&mut client, what)
        });
    match outcome {
        Ok(result) => {
            if json {
                mrtr_gate_cli::out!("{}", json_for_terminal(&result));
            } else {
                mrtr_gate_cli::out!("{}", c::list_lines(&result, what));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json {
                mrtr_gate_cli::out!("{}", json_for_terminal(&c::error_json(&e)));
            } else {
                mrtr_gate_host::say!("mrtr-gate: {}", c::refusal_line(&e));
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
            let (mut client, _root) = c::connect(
                &flags.options(
                    Target::Http(url.to_owned()),
                    ServerStderr::Discard,
                    false,
                    None,
                ),
                &runtime,
            )?;
            mrtr_gate_cli::conformance::run(&scenario, &mut client)
        });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            mrtr_gate_host::say!("mrtr-gate conformance {scenario}: {}", c::refusal_line(&e));
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
    mrtr_gate_cli::out!("{out}");
    mrtr_gate_cli::out!(
        "(component {} bytes, loaded in {:.1} ms from the precompiled cache or compiled afresh)",
        EMBEDDED_COMPONENT.len(),
        loaded.as_secs_f64() * 1e3
    );
    Ok(())
}

fn info() -> Result<(), String> {
    let runtime = GateRuntime::embedded().map_err(|e| error_chain(&e))?;
    mrtr_gate_cli::out!("version: {}", env!("CARGO_PKG_VERSION"));
    mrtr_gate_cli::out!("component size: {} bytes", EMBEDDED_COMPONENT.len());
    // What a host pins (docs/releasing.md): the SHA-256 of the component's bytes.
    mrtr_gate_cli::out!("component sha256: {EMBEDDED_COMPONENT_SHA256}");
    mrtr_gate_cli::out!("imports: {}", runtime.imports().join(", "));
    mrtr_gate_cli::out!("exports: {}", runtime.exports().join(", "));
    Ok(())
}

fn export(path: &std::path::Path) -> Result<(), String> {
    std::fs::write(path, EMBEDDED_COMPONENT)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    mrtr_gate_cli::out!("{}: {} bytes", path.display(), EMBEDDED_COMPONENT.len());
    Ok(())
}

fn reconcile(trail: &str, redis: Option<&str>, namespace: &str) -> ExitCode {
    let lines = match (trail.strip_prefix("redis:"), redis) {
        (Some(name), Some(url)) => mrtr_gate_redis::RedisAudit::connect(url, namespace, name)
            .and_then(|a| a.lines())
            .map_err(|e| e.to_string()),
        (Some(_), None) => Err("a redis: trail needs --redis URL".into()),
        (None, _) => mrtr_gate_cli::trail::read_trail(std::path::Path::new(trail), None, None)
            .map(|read| read.trail.lines().map(str::to_owned).collect()),
    };
    match lines {
        Ok(lines) => {
            let report =
                mrtr_gate_host::core::reconcile::reconcile(lines.iter().map(String::as_str));
            mrtr_gate_cli::out!("{}", report.to_json());
            if report.clean() {
                ExitCode::SUCCESS
            } else if report.consistent() {
                ExitCode::from(3)
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            mrtr_gate_host::say!("mrtr-gate: {e}");
            ExitCode::from(2)
        }
    }
}

/// `export-audit`: the trail verified, then each line exported; nothing is written when it
/// does not verify.
fn export_audit(
    trail: &str,
    format: mrtr_gate_cli::export::Format,
    keys: &KeyOptions,
    links: Option<&std::path::Path>,
    redis: Option<&str>,
    namespace: &str,
) -> ExitCode {
    let verified: Result<(String, Vec<String>), (u8, String)> =
        match (trail.strip_prefix("redis:"), redis) {
            (Some(name), Some(url)) => mrtr_gate_redis::RedisAudit::connect(url, namespace, name)
                .and_then(|a| a.lines())
                .map_err(|e| (2, e.to_string()))
                .and_then(|lines| {
                    mrtr_gate_core::audit::verify_chain(lines.iter().map(String::as_str))
                        .map_err(|b| (1, format!("the chain is broken: {b:?}")))?;
                    Ok((name.to_owned(), lines))
                }),
            (Some(_), None) => Err((2, "a redis: trail needs --redis URL".into())),
            (None, _) => {
                let path = std::path::Path::new(trail);
                let text = if keys.insecure_no_host_keys {
                    mrtr_gate_cli::trail::read_trail(path, None, None)
                        .map_err(|e| (2, e))
                        .and_then(|read| {
                            mrtr_gate_core::audit::verify_chain(read.trail.lines())
                                .map_err(|b| (1, format!("the chain is broken: {b:?}")))?;
                            Ok(read.trail)
                        })
                } else {
                    mrtr_gate_cli::keys::verified_trail(path, keys, links)
                        .map(|(_, text)| text)
                        .map_err(|e| (1, e))
                };
                text.map(|text| {
                    let name = path
                        .file_name()
                        .map_or_else(|| trail.to_owned(), |n| n.to_string_lossy().into_owned());
                    (name, text.lines().map(str::to_owned).collect())
                })
            }
        };
    let (name, lines) = match verified {
        Ok(v) => v,
        Err((code, e)) => {
            mrtr_gate_host::say!("mrtr-gate export-audit: {e}; nothing was exported");
            return ExitCode::from(code);
        }
    };
    for line in &lines {
        match mrtr_gate_cli::export::export_line(line, format, &name) {
            Ok(out) => mrtr_gate_cli::out!("{out}"),
            Err(e) => {
                mrtr_gate_host::say!("mrtr-gate export-audit: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn verify(
    path: &std::path::Path,
    keys: &KeyOptions,
    links: Option<&std::path::Path>,
) -> Result<(), String> {
    if keys.insecure_no_host_keys {
        let read = mrtr_gate_cli::trail::read_trail(path, None, None)?;
        let n = mrtr_gate_core::audit::verify_chain(read.trail.lines())
            .map_err(|b| format!("the chain is broken: {b:?}"))?;
        mrtr_gate_host::say!(
            "mrtr-gate: WARNING: {}",
            mrtr_gate_cli::keys::INSECURE_WARNING
        );
        mrtr_gate_cli::out!(
            "{}: {n} events, chain intact (links and anchor not checked)",
            path.display()
        );
        return Ok(());
    }
    mrtr_gate_cli::out!("{}", mrtr_gate_cli::keys::verify_keyed(path, keys, links)?);
    Ok(())
}
