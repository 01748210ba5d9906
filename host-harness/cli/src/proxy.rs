//! `mrtr-gate proxy`: the gate in front of any MCP server, for any client (docs/proxy.md).
//! This module is the command's flags and their checks, and the glue from them to the proxy
//! crate ([`mrtr_gate_proxy`]): the host services ([`crate::services`]), the consent mode, the
//! server's identity and stderr log, then the relay. Every mistake in the flags is a usage
//! error (exit 2) before anything starts. The proxy's own lines go to stderr, for the
//! operator; its stdout carries protocol lines only.

use crate::keys::KeyFlags;
use crate::services::{RedisChoice, ServiceOptions, Wired};
use mrtr_gate_client::transport::isolation;
use mrtr_gate_client::transport::stdio::endpoint_id;
use mrtr_gate_host::HostServices;
use mrtr_gate_host::core::{Policy, ServerIdentity};
use mrtr_gate_host::principal::default_user;
use mrtr_gate_host::reference_hosts::SystemClock;
use mrtr_gate_host::services::SharedConsent;
use mrtr_gate_host::shown::shown_text;
use mrtr_gate_proxy::capture::Capture;
use mrtr_gate_proxy::consent::{ConsentMode, DEFAULT_HOOK_TIMEOUT, DeferredConsent, consent_for};
use mrtr_gate_proxy::http::HttpOptions;
use mrtr_gate_proxy::log;
use mrtr_gate_proxy::metrics::{MeteredAudit, MeteredConsent, MeteredStorage};
use mrtr_gate_proxy::rounds::RoundIndex;
use mrtr_gate_proxy::stdio::Ended;
use mrtr_gate_proxy::{Engine, EngineConfig, IdMinter};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long an entry of the index of open rounds outlives the round's lifetime.
const ROUND_INDEX_GRACE_MS: u64 = 60_000;

/// Exit status: the flags are wrong (nothing was started).
pub const EXIT_USAGE: u8 = 2;
/// Exit status: the server could not be started, or did not exit by itself.
pub const EXIT_TRANSPORT: u8 = 4;

/// The flags of `mrtr-gate proxy`.
#[derive(clap::Args, Clone, Debug)]
pub struct ProxyFlags {
    /// Read the flags from this TOML file: one top-level key per long flag
    /// (`drain-timeout = 10`), `command = [...]` for the server; a flag given on the command
    /// line replaces the file's key (docs/proxy.md, "Config file").
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (the command line over the file, over the
    /// defaults), checked, in the file's form, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// HTTP mode: serve the MCP endpoint on this address (with --upstream).
    #[arg(
        long,
        value_name = "ADDR",
        requires = "upstream",
        conflicts_with = "command"
    )]
    pub listen: Option<String>,
    /// HTTP mode: the MCP endpoint the gate binds every call to (with --listen).
    #[arg(long, value_name = "URL", requires = "listen")]
    pub upstream: Option<String>,
    /// HTTP mode: a browser `Origin` allowed besides loopback ones (exact; repeatable).
    #[arg(long, value_name = "ORIGIN", requires = "listen")]
    pub allow_origin: Vec<String>,
    /// HTTP mode: a `Host` allowed besides IP addresses and `localhost` (a front's name,
    /// `NAME` or `NAME:PORT`, exact; repeatable). Any other name is refused (DNS rebinding).
    #[arg(long, value_name = "HOST", requires = "listen")]
    pub allow_host: Vec<String>,
    /// HTTP mode, behind an authenticating front only: bind each call to the user and tenant
    /// these two headers name (`USER_HEADER,TENANT_HEADER`) instead of --user/--tenant.
    /// Anyone who can reach the port can name any user: never expose it.
    #[arg(long, value_name = "USER_HEADER,TENANT_HEADER", requires = "listen")]
    pub trust_principal_headers: Option<String>,
    /// The user calls are bound to (default: $USER).
    #[arg(long)]
    pub user: Option<String>,
    /// The tenant calls are bound to.
    #[arg(long, default_value = "default")]
    pub tenant: String,
    /// Append the hash-chained audit trail to this JSON-lines file (this or --redis is
    /// required: a proxy runs for days, and a trail kept in memory would grow without end).
    #[arg(long, value_name = "FILE", conflicts_with = "redis")]
    pub audit: Option<PathBuf>,
    /// Where the --audit trail's anchor goes (default: anchors/ beside the key file).
    #[arg(long, value_name = "FILE", requires = "audit")]
    pub audit_anchor: Option<PathBuf>,
    /// Keep rounds and one audit trail on this Redis, shared by every replica that names the
    /// same --namespace and --trail: `redis://host:port/db`, or a Redis Cluster as
    /// `redis-cluster://host:port,host:port,…/`.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// How many replicas must hold each write to --redis before it counts (`WAIT`; fewer is a
    /// denial). Default: 1 on a Cluster, 0 on one server; 0 on a Cluster is warned on stderr.
    #[arg(long, value_name = "N", requires = "redis")]
    pub redis_replicas: Option<u32>,
    /// The Redis namespace every key lives under.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The Redis trail's name (`mrtr-gate reconcile redis:<trail>`).
    #[arg(long, value_name = "NAME", default_value = "mrtr-gate-proxy")]
    pub trail: String,
    /// `--host-keys FILE`, `--insecure-no-host-keys`.
    #[command(flatten)]
    pub keys: KeyFlags,
    /// At most this many input_required rounds per call (1 to 64).
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// With --listen: gate on this many engines, each its own gate instance over the one store
    /// and trail, so a slow round holds up only the clients its engine has in hand (1 to 64;
    /// default: one per core).
    #[arg(long, value_name = "N", requires = "listen", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub engines: Option<u16>,
    /// How long a call may take, all its rounds included, in seconds (default: the gate's
    /// policy, five minutes); a round not retried by then ends `expired`.
    #[arg(long, value_name = "SECONDS")]
    pub round_trip_lifetime: Option<u64>,
    /// Who approves the answers a retry carries: `client` (the client's own UI; the trail
    /// says delegated_to_client), `tty` (the controlling terminal), or `command CMD` (a hook,
    /// split like a shell would and run without one, that prints exactly `yes` to grant).
    #[arg(long, value_name = "MODE", num_args = 1..=2, default_value = "client")]
    pub consent: Vec<String>,
    /// How long a `--consent command` hook, or the person at `--consent tty`, has to answer
    /// before the answer is no (default 120).
    #[arg(long, value_name = "SECONDS")]
    pub consent_timeout: Option<u64>,
    /// How often the trail's root anchors every shard's head (docs/audit.md, "Shards and the
    /// root"), in seconds (default 60); it anchors once more when the proxy stops.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub root_every: u64,
    /// On SIGINT or SIGTERM: how long the calls in flight have to finish (no new client
    /// message is taken), in seconds; then every call and open round left ends `cancelled` in
    /// the trail, the root is anchored, and the proxy exits 0.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub drain_timeout: u64,
    /// Serve /metrics (Prometheus), /healthz and /readyz on this address, apart from the MCP
    /// endpoint: `PORT` (on 127.0.0.1) or `HOST:PORT`. Off unless given; an address that is
    /// not loopback is warned on stderr.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<String>,
    /// Cedar policies that judge every round the gate accepts before anyone sees it (a forbid
    /// refuses it, a permit grants its consent, the rest go to --consent; docs/policy.md).
    /// Checked at start: `mrtr-gate policy check FILE` says the same.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Export a span per gated call and per step of the gate's (register, accept, consent,
    /// retry, finish) over OTLP (http/protobuf) to URL (`http://HOST:4318` gets the path
    /// `/v1/traces`); names and outcomes only, never an argument or an answer. Off unless given.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// How the proxy's own lines on stderr are written: `text`, or `json` (one object a line:
    /// time, level, event, message and the event's fields; docs/proxy.md, "Logs").
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// The least level of the proxy's lines written: `error`, `warn` or `info` (every refusal
    /// is an `info` line, with its code).
    #[arg(long, value_name = "LEVEL", default_value = "info", value_parser = ["error", "warn", "info"])]
    pub log_level: String,
    /// INSECURE for privacy, for operators whose policy requires it: append every gated call's
    /// params, retries (the user's answers) and answers to FILE (created 0600, kept from a
    /// stdio server), apart from the digest-only trail. Warned on stderr every run.
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// With --capture: an object member name whose values are replaced by `[redacted]` (any
    /// case, any depth; repeatable).
    #[arg(long, value_name = "KEY", requires = "capture")]
    pub capture_redact: Vec<String>,
    /// Append the server's stderr to FILE (created mode 0600; default: a new private file in
    /// the temporary folder, named on stderr). It never reaches the client's stream.
    #[arg(long, value_name = "FILE", conflicts_with = "listen")]
    pub server_log: Option<PathBuf>,
    /// Pass a server's 2025-era elicitation/create, sampling/createMessage and roots/list
    /// requests to the client instead of refusing them (they reach the user around the gate).
    #[arg(long)]
    pub allow_legacy_server_requests: bool,
    /// Pass the input channels no round binds: `inputRequests` in an ungated answer or a
    /// notification (a task's), `inputResponses` in an ungated message (`tasks/update`), a
    /// 2025-11-25 -32042 URL elicitation error. They then reach the user, and the server,
    /// around the gate.
    #[arg(long)]
    pub allow_ungated_input_channels: bool,
    /// stdio mode: run the server without its sandbox (docs/proxy.md, "The server process"):
    /// it can then rewrite the trail, read the host key and open this user's terminals. It
    /// still starts in a session of its own. Warned on stderr every run.
    #[arg(long, conflicts_with = "listen")]
    pub insecure_no_server_isolation: bool,
    /// stdio mode: run the server as another user (`NAME`, `UID` or `UID:GID`; not root, not
    /// this user), which cannot reach this user's terminal, trail or key: with `--consent tty`,
    /// the protection where the kernel has no Landlock. Takes the privilege to (root).
    #[arg(long, value_name = "USER", conflicts_with = "listen")]
    pub server_user: Option<String>,
    /// stdio mode: the server to spawn (no shell), after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The flags, checked: what a run needs.
#[derive(Clone, Debug)]
pub struct Checked {
    /// stdio or HTTP.
    pub mode: Mode,
    /// The store and the trail.
    pub services: ServiceOptions,
    /// Who approves.
    pub consent: ConsentMode,
    /// Every binding's policy.
    pub policy: Policy,
    /// The user, as given.
    pub user: String,
    /// The tenant, as given.
    pub tenant: String,
    /// How many engines gate (one over stdio).
    pub engines: usize,
    /// `--admin`: where the admin listener binds.
    pub admin: Option<SocketAddr>,
}

/// Where the server is, and how clients reach the proxy.
#[derive(Clone, Debug)]
pub enum Mode {
    /// `-- COMMAND [ARGS...]`.
    Stdio {
        /// The server's argv.
        argv: Vec<String>,
        /// Bound to every call: the spawned command's endpoint id.
        server: ServerIdentity,
    },
    /// `--listen ADDR --upstream URL`.
    Http {
        /// Where clients connect.
        listen: SocketAddr,
        /// The upstream as given (the gate binds its normalised origin).
        upstream: String,
        /// `--allow-origin`.
        allowed_origins: Vec<String>,
        /// `--allow-host`.
        allowed_hosts: Vec<String>,
        /// `--trust-principal-headers`.
        principal_headers: Option<(String, String)>,
    },
}

impl ProxyFlags {
    /// One engine over stdio; over HTTP one per core unless --engines says otherwise. A person
    /// or a hook is asked off the engine's thread only by the engine that delivered the round
    /// (it keeps the view); another engine would ask inline and hold up its clients, so slow
    /// consent runs on one engine.
    fn engines(&self, mode: &Mode, consent: &ConsentMode) -> Result<usize, String> {
        let slow_consent = matches!(
            consent,
            ConsentMode::Tty { .. } | ConsentMode::Command { .. }
        );
        Ok(match (mode, self.engines, slow_consent) {
            (Mode::Stdio { .. }, _, _) | (Mode::Http { .. }, None, true) => 1,
            (Mode::Http { .. }, Some(n), true) if n > 1 => {
                return Err(format!(
                    "--engines {n} with --consent tty or command: a retry taken by another \
                     engine than the one that delivered its round would be asked inline, \
                     holding up that engine's clients; run one engine (or replicas)"
                ));
            }
            (Mode::Http { .. }, Some(n), _) => usize::from(n),
            (Mode::Http { .. }, None, false) => {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            }
        })
    }

    /// Check every flag; a usage error names what is wrong.
    pub fn check(&self) -> Result<Checked, String> {
        let mode = self.mode()?;
        if self.audit.is_none() && self.redis.is_none() {
            return Err(
                "give --audit FILE or --redis URL: a proxy runs for days, and a trail kept in \
                 memory would grow without end"
                    .into(),
            );
        }
        let mut policy = Policy::default();
        if let Some(n) = self.max_rounds {
            policy.max_rounds = n;
        }
        policy
            .validate()
            .map_err(|e| format!("--max-rounds: {e}"))?;
        if let Some(seconds) = self.round_trip_lifetime {
            policy.round_trip_lifetime_ms = seconds.saturating_mul(1000);
            policy
                .validate()
                .map_err(|e| format!("--round-trip-lifetime: {e}"))?;
        }
        let consent = self.consent_mode()?;
        let engines = self.engines(&mode, &consent)?;
        let admin = self.admin.as_deref().map(admin_address).transpose()?;
        Ok(Checked {
            mode,
            engines,
            admin,
            services: ServiceOptions {
                audit: self.audit.clone(),
                redis: self.redis.as_ref().map(|url| RedisChoice {
                    url: url.clone(),
                    replicas: self.redis_replicas,
                    namespace: self.namespace.clone(),
                    trail: self.trail.clone(),
                }),
                keys: self.keys.options(self.audit_anchor.as_ref()),
            },
            consent,
            policy,
            user: default_user(self.user.as_deref()),
            tenant: self.tenant.clone(),
        })
    }

    fn mode(&self) -> Result<Mode, String> {
        let (Some(listen), Some(upstream)) = (&self.listen, &self.upstream) else {
            if self.command.is_empty() {
                return Err(
                    "name the server: mrtr-gate proxy [OPTIONS] -- COMMAND [ARGS...] (or \
                     --listen ADDR --upstream URL)"
                        .into(),
                );
            }
            let server = ServerIdentity::endpoint(&endpoint_id(&self.command))
                .map_err(|e| format!("the server command: {e}"))?;
            return Ok(Mode::Stdio {
                argv: self.command.clone(),
                server,
            });
        };
        let listen = listen
            .parse::<SocketAddr>()
            .map_err(|e| format!("--listen {listen}: {e} (an address and a port)"))?;
        ServerIdentity::origin(upstream).map_err(|e| format!("--upstream: {e}"))?;
        let principal_headers = match &self.trust_principal_headers {
            None => None,
            Some(both) => match both.split_once(',') {
                Some((user, tenant))
                    if valid_header_name(user) && valid_header_name(tenant) && user != tenant =>
                {
                    Some((user.to_ascii_lowercase(), tenant.to_ascii_lowercase()))
                }
                _ => {
                    return Err(format!(
                        "--trust-principal-headers {}: two different header names, \
                         USER_HEADER,TENANT_HEADER",
                        shown_text(both)
                    ));
                }
            },
        };
        Ok(Mode::Http {
            listen,
            upstream: upstream.clone(),
            allowed_origins: self.allow_origin.clone(),
            allowed_hosts: self.allow_host.clone(),
            principal_headers,
        })
    }

    fn consent_mode(&self) -> Result<ConsentMode, String> {
        let words: Vec<&str> = self.consent.iter().map(String::as_str).collect();
        let timeout = self.consent_timeout.map(Duration::from_secs);
        if timeout.is_some() && words.first() == Some(&"client") {
            return Err("--consent-timeout is for --consent tty or --consent command CMD".into());
        }
        if timeout == Some(Duration::ZERO) {
            return Err("--consent-timeout: at least one second".into());
        }
        let timeout = timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT);
        match words.as_slice() {
            ["client"] => Ok(ConsentMode::Client),
            ["tty"] => Ok(ConsentMode::Tty { timeout }),
            ["command", command] => {
                let argv = shlex::split(command)
                    .filter(|argv| !argv.is_empty())
                    .ok_or(
                        "--consent command CMD: the command is empty or its quotes do not close",
                    )?;
                Ok(ConsentMode::Command { argv, timeout })
            }
            ["command"] => Err("--consent command needs the hook: --consent command CMD".into()),
            _ => Err(format!(
                "--consent {}: one of client, tty, command CMD",
                shown_text(&self.consent.join(" "))
            )),
        }
    }
}

/// `--admin PORT` (loopback) or `--admin HOST:PORT`.
fn admin_address(given: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = given.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    given.parse::<SocketAddr>().map_err(|e| {
        format!(
            "--admin {}: {e} (a port, or an address and a port)",
            shown_text(given)
        )
    })
}

/// The admin listener, bound now (a port taken is said before anything starts), with the
/// readiness checks of the run: its trail or store, and over HTTP its upstream.
fn admin_listener(
    addr: SocketAddr,
    wired: &Wired,
    upstream: Option<&str>,
) -> Result<mrtr_gate_proxy::admin::Admin, String> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| format!("--admin {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--admin {addr}: {e}"))?;
    if !bound.ip().is_loopback() {
        log::warn(
            "admin_not_loopback",
            &format!(
                "--admin {bound} is not a loopback address: every host that can reach it reads \
                 the metrics"
            ),
            &[("address", &bound.to_string())],
        );
    }
    log::info(
        "admin_listening",
        &format!("admin on http://{bound} (/metrics, /healthz, /readyz)"),
        &[("address", &bound.to_string())],
    );
    let mut checks = vec![wired.readiness()];
    if let Some(url) = upstream {
        let url = url.to_owned();
        checks.push(("upstream", Box::new(move || upstream_reachable(&url))));
    }
    Ok(mrtr_gate_proxy::admin::Admin {
        listener,
        checks,
        draining: Arc::default(),
    })
}

/// Whether the upstream at `url` takes a TCP connection (the admin listener's readiness, and
/// the warning at the start): `Err` names its `host:port` and what happened.
fn upstream_reachable(url: &str) -> Result<(), String> {
    let target = mrtr_gate_proxy::http::upstream::authority(url)?;
    let addrs = std::net::ToSocketAddrs::to_socket_addrs(&target)
        .map_err(|e| format!("{target} does not resolve: {e}"))?;
    let mut last = format!("{target} resolves to no address");
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, UPSTREAM_PROBE_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("{target} takes no connection ({a}: {e})"),
        }
    }
    Err(last)
}

/// How long `/readyz` waits for the upstream to take a connection.
const UPSTREAM_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// An HTTP header name: a token of RFC 9110 (letters, digits and `!#$%&'*+-.^_`|~`).
fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Where the server's stderr goes ([`crate::server_log`]): the file asked for, else the
/// command's own log in the state folder; bounded either way, and said on stderr.
fn server_log(
    path: Option<&PathBuf>,
    argv: &[String],
) -> Result<(std::process::Stdio, PathBuf, crate::server_log::Copier), String> {
    let path = match path {
        Some(path) => path.clone(),
        None => crate::server_log::default_path(&endpoint_id(argv))?,
    };
    let (stdio, copier) = crate::server_log::open(&path)?;
    let shown = shown_text(&path.display().to_string());
    log::info(
        "server_log",
        &format!("the server's stderr is logged to {shown}"),
        &[("path", &shown)],
    );
    Ok((stdio, path, copier))
}

/// The proxy's logging, as its flags say (before anything is said).
pub fn init_logging(flags: &ProxyFlags) {
    let format = match flags.log_format.as_str() {
        "json" => log::Format::Json,
        _ => log::Format::Text,
    };
    let level = match flags.log_level.as_str() {
        "error" => log::Level::Error,
        "warn" => log::Level::Warn,
        _ => log::Level::Info,
    };
    log::init(format, level, "mrtr-gate proxy");
}

/// Run `mrtr-gate proxy`; the process exit status.
pub fn run(flags: &ProxyFlags) -> u8 {
    init_logging(flags);
    let usage = |e: String| {
        log::error("usage", &e, &[]);
        EXIT_USAGE
    };
    let checked = match flags.check() {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let wired = match Wired::open(&checked.services, Arc::new(SystemClock)) {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let runtime = match GateRuntime::embedded() {
        Ok(r) => r,
        Err(e) => return usage(format!("loading the gate: {}", crate::error_chain(&e))),
    };
    // Each engine gets its own connection to the store (Redis serialises a connection's
    // calls; the store in memory is the same store).
    let engines = checked.engines;
    // The gate binds, and the trail digests, keyed pseudonyms of the user and tenant.
    let principal = wired.principal(&checked.user, &checked.tenant);
    // Over HTTP many clients share an engine: a person or a hook deciding on one retry is
    // asked off its thread, so it holds up that retry only.
    let slow_consent = matches!(
        checked.consent,
        ConsentMode::Tty { .. } | ConsentMode::Command { .. }
    );
    // Counted where the decision is made (the person's or the hook's wait), not where a
    // deferred decision is looked up.
    let decider: SharedConsent = Arc::new(MeteredConsent(consent_for(&checked.consent)));
    let deferred_consent = (slow_consent && matches!(checked.mode, Mode::Http { .. }))
        .then(|| Arc::new(DeferredConsent::new(decider.clone())));
    let consent: SharedConsent = match &deferred_consent {
        Some(deferred) => deferred.clone(),
        None => decider,
    };
    // The operator's policies judge each round first; a round they allowed is granted with
    // their receipt, every other goes to the consent above.
    let policies = match &flags.policy {
        Some(path) => match crate::policy::decider(path, checked.policy.round_trip_lifetime_ms) {
            Ok(decider) => {
                decider.know(&principal, &checked.user, &checked.tenant);
                log::info(
                    "policies_loaded",
                    &format!(
                        "{} policies judge every round: {}",
                        decider.policies().ids().len(),
                        shown_text(&decider.policies().ids().join(", "))
                    ),
                    &[("path", &shown_text(&path.display().to_string()))],
                );
                if let Err(e) = crate::policy::reload_on_hangup(&decider, path) {
                    return usage(format!("--policy: {e}"));
                }
                Some(decider)
            }
            Err(e) => return usage(format!("--policy:\n{e}")),
        },
        None => None,
    };
    let consent: SharedConsent = match &policies {
        Some(decider) => Arc::new(decider.consent(consent)),
        None => consent,
    };
    let policies_for_binding = policies.clone();
    let services = wired.services(consent);
    // Engine 0 runs over `services`, every other over its own connection to the same store;
    // all mint ids from the process's one minter.
    let ids = match IdMinter::random() {
        Ok(ids) => ids,
        Err(e) => return usage(e),
    };
    let mut others = Vec::with_capacity(engines.saturating_sub(1));
    for _ in 1..engines {
        match wired.services_for_another_gate(services.consent.clone()) {
            Ok(s) => others.push(s),
            Err(e) => return usage(e),
        }
    }
    let capture = match &flags.capture {
        Some(path) => match Capture::open(path, flags.capture_redact.clone()) {
            Ok(c) => {
                let shown = shown_text(&path.display().to_string());
                let redacted = if flags.capture_redact.is_empty() {
                    "nothing redacted".to_owned()
                } else {
                    format!("redacting {}", shown_text(&flags.capture_redact.join(", ")))
                };
                log::warn(
                    "capture_on",
                    &format!(
                        "--capture {shown}: every call's arguments, the user's answers and the \
                         server's answers are written there ({redacted})"
                    ),
                    &[("path", &shown)],
                );
                Some(Arc::new(c))
            }
            Err(e) => return usage(e),
        },
        None => None,
    };
    let capture_for_engines = capture.clone();
    let policy = checked.policy.clone();
    let allow_legacy_server_requests = flags.allow_legacy_server_requests;
    let allow_ungated_input = flags.allow_ungated_input_channels;
    let engine_for = move |server: ServerIdentity, i: usize| {
        // Engine i > 0 runs over others[i - 1]; engine 0 (where i - 1 wraps) over `services`.
        let services = others.get(i.wrapping_sub(1)).unwrap_or(&services).clone();
        // Every store call and audit append of the gate counted for /metrics.
        let services = HostServices {
            storage: Arc::new(MeteredStorage(services.storage)),
            audit: Arc::new(MeteredAudit(services.audit)),
            ..services
        };
        let config = EngineConfig {
            server,
            principal: principal.clone(),
            // Over the gate's own store: replicas on one Redis find each other's rounds. An
            // entry outlives the longest a round can (its lifetime and the gate's grace).
            rounds: RoundIndex::new(
                services.storage.clone(),
                policy.round_trip_lifetime_ms + ROUND_INDEX_GRACE_MS,
            ),
            policy: policy.clone(),
            allow_legacy_server_requests,
            allow_ungated_input,
            deferred_consent: deferred_consent.clone(),
            policies: policies.clone(),
        };
        Engine::new(ComponentGate::new(&runtime, services), config, ids.shared())
            .with_capture(capture_for_engines.clone())
    };
    if flags.allow_ungated_input_channels {
        log::warn(
            "insecure_flag",
            "--allow-ungated-input-channels: a task's inputRequests, tasks/update's \
             inputResponses and -32042 URL elicitation errors pass unchecked, unconsented and \
             unaudited",
            &[("flag", "--allow-ungated-input-channels")],
        );
    }
    if flags.allow_legacy_server_requests {
        log::warn(
            "insecure_flag",
            "--allow-legacy-server-requests: the server's own elicitation/create, \
             sampling/createMessage and roots/list requests reach the client unchecked",
            &[("flag", "--allow-legacy-server-requests")],
        );
    }
    if matches!(checked.consent, ConsentMode::Tty { .. })
        && std::fs::File::open("/dev/tty").is_err()
    {
        log::warn(
            "no_terminal",
            "--consent tty: this process has no terminal; every form or URL round will be \
             refused (consent_unavailable)",
            &[],
        );
    }
    let consent = consent_name(&checked.consent);
    let upstream = match &checked.mode {
        Mode::Http { upstream, .. } => Some(upstream.as_str()),
        Mode::Stdio { .. } => None,
    };
    let admin = match checked.admin {
        Some(addr) => match admin_listener(addr, &wired, upstream) {
            Ok(admin) => Some(admin),
            Err(e) => return usage(e),
        },
        None => None,
    };
    let traces = match flags
        .otlp
        .as_deref()
        .map(mrtr_gate_proxy::trace::Exporter::start)
    {
        Some(Ok(exporter)) => {
            let shown = shown_text(exporter.shown());
            log::info(
                "traces_on",
                &format!("spans are exported to {shown}"),
                &[("collector", &shown)],
            );
            Some(exporter)
        }
        Some(Err(e)) => return usage(e),
        None => None,
    };
    // Sent before the process exits: the drain's last spans too.
    let _traces = Traces(traces);
    // Held until the run ends: dropping it anchors the root where the trail ended.
    let drain_timeout = std::time::Duration::from_secs(flags.drain_timeout);
    let _root = wired.root_schedule(std::time::Duration::from_secs(flags.root_every), |e| {
        log::error(
            "root_anchor_failed",
            &format!("the trail's root could not be anchored: {e}"),
            &[],
        );
    });
    match checked.mode {
        Mode::Stdio { argv, server } => {
            let terminal_consent = matches!(checked.consent, ConsentMode::Tty { .. });
            let run_as = match flags.server_user.as_deref().map(isolation::RunAs::parse) {
                None => None,
                Some(Ok(user)) => Some(user),
                Some(Err(e)) => return usage(e.to_string()),
            };
            let isolation = match wired.server_isolation(
                flags.insecure_no_server_isolation,
                terminal_consent,
                run_as,
            ) {
                // The capture holds every call's arguments and answers: kept from the server.
                Ok(i) => i.map(|i| match &capture {
                    Some(c) => i.also_hidden(c.path()),
                    None => i,
                }),
                Err(e) => return usage(e),
            };
            let (stderr, log, copier) = match server_log(flags.server_log.as_ref(), &argv) {
                Ok(s) => s,
                Err(e) => return usage(e),
            };
            let prepare: mrtr_gate_proxy::stdio::Prepare = Box::new(move |command| {
                isolation::isolate(command, isolation.as_ref(), run_as)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            let shown = shown_text(&server.display());
            log::info(
                "gating",
                &format!("gating {shown} (consent: {consent})"),
                &[("server", &shown), ("consent", consent)],
            );
            let ended = mrtr_gate_proxy::run_stdio(
                move || engine_for(server, 0),
                &argv,
                stderr,
                prepare,
                drain_timeout,
                admin,
            );
            // The server's last lines reach its log before its end is said.
            copier.finish(std::time::Duration::from_secs(5));
            stdio_outcome(&log, ended)
        }
        Mode::Http {
            listen,
            upstream,
            allowed_origins,
            allowed_hosts,
            principal_headers,
        } => {
            if let Err(e) = upstream_reachable(&upstream) {
                let shown = shown_text(&upstream);
                log::warn(
                    "upstream_unreachable",
                    &format!(
                        "the upstream {shown} is not reachable now ({e}): each call fails \
                         `transport_failed` until it is (/readyz says so)"
                    ),
                    &[("upstream", &shown)],
                );
            }
            if !listen.ip().is_loopback() {
                log::warn(
                    "listen_not_loopback",
                    &format!(
                        "--listen {listen} is not a loopback address: every host that can \
                         reach it is a client of this proxy"
                    ),
                    &[("address", &listen.to_string())],
                );
            }
            let mut options = HttpOptions::new(upstream.clone());
            options.allowed_origins = allowed_origins;
            options.allowed_hosts = allowed_hosts;
            options.trust_principal_headers = principal_headers;
            options.bind_principal = match &policies_for_binding {
                // A front's principals are bound per request: the policies learn each one's
                // names as it is bound.
                Some(decider) => {
                    let (bind, decider) = (wired.principal_binder(), Arc::clone(decider));
                    Arc::new(move |user: &str, tenant: &str| {
                        let bound = bind(user, tenant);
                        decider.know(&bound, user, tenant);
                        bound
                    })
                }
                None => wired.principal_binder(),
            };
            options.drain_timeout = drain_timeout;
            let ready = |bound: SocketAddr| {
                let shown = shown_text(&upstream);
                log::info(
                    "listening",
                    &format!(
                        "listening on http://{bound}/mcp, gating {shown} (consent: {consent})"
                    ),
                    &[
                        ("address", &bound.to_string()),
                        ("upstream", &shown),
                        ("consent", consent),
                    ],
                );
            };
            match mrtr_gate_proxy::run_http(options, engines, listen, engine_for, ready, admin) {
                Ok(()) => {
                    stopped();
                    0
                }
                Err(e) => {
                    log::error("failed", &shown_text(&e), &[]);
                    EXIT_TRANSPORT
                }
            }
        }
    }
}

/// The trace exporter, flushed when the run ends (however it ends); a failure is said.
struct Traces(Option<mrtr_gate_proxy::trace::Exporter>);

impl Drop for Traces {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.0.take().map(mrtr_gate_proxy::trace::Exporter::finish) {
            log::warn("traces_unexported", &e, &[]);
        }
    }
}

/// The exit status of a stdio run: the server's own, when it exited by itself (128 + the
/// signal that ended it, as a shell says it). The server's end is said, with its log.
fn stdio_outcome(log: &std::path::Path, outcome: Result<Ended, String>) -> u8 {
    let log = shown_text(&log.display().to_string());
    match outcome {
        Ok(Ended::Stopped) => {
            stopped();
            0
        }
        Ok(Ended::Server(Some(status))) => {
            let code = status_code(status);
            let status_text = code.to_string();
            let fields = [("status", status_text.as_str()), ("log", log.as_str())];
            if status.success() {
                log::info("server_exited", "the server exited (status 0)", &fields);
            } else {
                log::warn(
                    "server_exited",
                    &format!("the server exited ({status}): what it said is in {log}"),
                    &fields,
                );
            }
            code
        }
        Ok(_) => {
            log::warn(
                "server_killed",
                &format!(
                    "the server did not exit by itself once its client had gone, and was killed \
                     (its stderr: {log})"
                ),
                &[("log", &log)],
            );
            EXIT_TRANSPORT
        }
        Err(e) => {
            log::error("failed", &shown_text(&e), &[]);
            EXIT_TRANSPORT
        }
    }
}

fn stopped() {
    log::info(
        "stopped",
        "stopped: the calls and rounds left ended `cancelled`",
        &[],
    );
}

/// A child's status as a shell says it: its code, else 128 + the signal that ended it.
fn status_code(status: std::process::ExitStatus) -> u8 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(EXIT_TRANSPORT);
        }
    }
    status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(EXIT_TRANSPORT)
}

fn consent_name(mode: &ConsentMode) -> &'static str {
    match mode {
        ConsentMode::Client => "client, delegated_to_client",
        ConsentMode::Tty { .. } => "tty, user_at_screen",
        ConsentMode::Command { .. } => "command, policy_hook",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: ProxyFlags,
    }

    fn parse(args: &[&str]) -> Result<ProxyFlags, String> {
        Cli::try_parse_from(std::iter::once("proxy").chain(args.iter().copied()))
            .map(|c| c.flags)
            .map_err(|e| e.to_string())
    }

    fn checked(args: &[&str]) -> Result<Checked, String> {
        parse(args)?.check()
    }

    #[test]
    fn the_stdio_server_is_bound_as_mrtr_gate_call_binds_it() {
        let c = checked(&["--audit", "t.jsonl", "--", "python3", "server.py", "--x"]).unwrap();
        let Mode::Stdio { argv, server } = &c.mode else {
            panic!("not stdio mode");
        };
        assert_eq!(argv, &["python3", "server.py", "--x"]);
        assert_eq!(
            server,
            &ServerIdentity::endpoint(&endpoint_id(argv)).unwrap()
        );
        assert_eq!(c.consent, ConsentMode::Client);
        assert_eq!(c.tenant, "default");
    }

    #[test]
    fn a_trail_is_required_and_only_one() {
        let refused = checked(&["--", "server"]).unwrap_err();
        assert!(refused.contains("--audit FILE or --redis URL"), "{refused}");
        assert!(parse(&["--audit", "t", "--redis", "redis://x/", "--", "s"]).is_err());
        let c = checked(&["--redis", "redis://127.0.0.1:6379/", "--", "s"]).unwrap();
        let redis = c.services.redis.unwrap();
        assert_eq!(
            (redis.namespace.as_str(), redis.trail.as_str()),
            ("default", "mrtr-gate-proxy")
        );
    }

    #[test]
    fn the_consent_modes_and_their_mistakes() {
        let mode = |args: &[&str]| {
            let mut all = vec!["--audit", "t"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--", "s"]);
            checked(&all).map(|c| c.consent)
        };
        assert_eq!(
            mode(&["--consent", "tty"]).unwrap(),
            ConsentMode::Tty {
                timeout: DEFAULT_HOOK_TIMEOUT
            }
        );
        assert_eq!(
            mode(&["--consent", "tty", "--consent-timeout", "30"]).unwrap(),
            ConsentMode::Tty {
                timeout: Duration::from_secs(30)
            }
        );
        assert_eq!(
            mode(&[
                "--consent",
                "command",
                "hook --strict 'a b'",
                "--consent-timeout",
                "5"
            ])
            .unwrap(),
            ConsentMode::Command {
                argv: vec!["hook".into(), "--strict".into(), "a b".into()],
                timeout: Duration::from_secs(5)
            }
        );
        for bad in [
            &["--consent", "yes"][..],
            &["--consent", "command"],
            &["--consent", "command", ""],
            &["--consent", "command", "'unclosed"],
            &["--consent", "tty", "extra"],
            &["--consent-timeout", "5"],
            &["--consent", "command", "hook", "--consent-timeout", "0"],
        ] {
            assert!(mode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_http_flags_are_checked() {
        let http = |extra: &[&str]| {
            let mut all = vec!["--audit", "t", "--listen", "127.0.0.1:1"];
            all.extend_from_slice(extra);
            checked(&all).map(|c| c.mode)
        };
        assert!(
            parse(&["--listen", "127.0.0.1:1"]).is_err(),
            "--listen needs --upstream"
        );
        let both = [
            "--listen",
            "127.0.0.1:1",
            "--upstream",
            "http://x/",
            "--",
            "s",
        ];
        assert!(parse(&both).is_err(), "a command or an upstream, not both");
        let log = [
            "--listen",
            "127.0.0.1:1",
            "--upstream",
            "http://x/",
            "--server-log",
            "l",
        ];
        assert!(parse(&log).is_err(), "no server stderr to log over HTTP");
        let bad_addr = checked(&[
            "--audit",
            "t",
            "--listen",
            "nowhere",
            "--upstream",
            "http://x/",
        ]);
        assert!(bad_addr.unwrap_err().starts_with("--listen nowhere"));
        assert!(
            http(&["--upstream", "ftp://x"])
                .unwrap_err()
                .starts_with("--upstream")
        );
        for bad in [
            "x-user",
            "x-user,",
            ",x-tenant",
            "x-user,x-user",
            "x user,x-tenant",
        ] {
            let refused = http(&["--upstream", "http://x/", "--trust-principal-headers", bad]);
            assert!(refused.is_err(), "{bad}");
        }
        let Mode::Http {
            listen,
            upstream,
            principal_headers,
            allowed_origins,
            allowed_hosts,
        } = http(&[
            "--upstream",
            "http://127.0.0.1:2/mcp",
            "--trust-principal-headers",
            "X-User,X-Tenant",
            "--allow-origin",
            "https://app.example.com",
            "--allow-host",
            "mcp-gw.internal:8443",
        ])
        .unwrap()
        else {
            panic!("not HTTP mode");
        };
        assert_eq!(listen.port(), 1);
        assert_eq!(upstream, "http://127.0.0.1:2/mcp");
        assert_eq!(
            principal_headers,
            Some(("x-user".into(), "x-tenant".into()))
        );
        assert_eq!(allowed_origins, ["https://app.example.com"]);
        assert_eq!(allowed_hosts, ["mcp-gw.internal:8443"]);
    }

    #[test]
    fn max_rounds_outside_the_gates_caps_is_a_usage_error() {
        assert!(checked(&["--audit", "t", "--max-rounds", "0", "--", "s"]).is_err());
        assert!(checked(&["--audit", "t", "--max-rounds", "65", "--", "s"]).is_err());
        let c = checked(&["--audit", "t", "--max-rounds", "3", "--", "s"]).unwrap();
        assert_eq!(c.policy.max_rounds, 3);
    }

    #[test]
    fn a_round_trip_lifetime_outside_the_gates_bounds_is_a_usage_error() {
        assert!(checked(&["--audit", "t", "--round-trip-lifetime", "0", "--", "s"]).is_err());
        assert!(
            checked(&[
                "--audit",
                "t",
                "--round-trip-lifetime",
                &u64::MAX.to_string(),
                "--",
                "s"
            ])
            .is_err()
        );
        let c = checked(&["--audit", "t", "--round-trip-lifetime", "4", "--", "s"]).unwrap();
        assert_eq!(c.policy.round_trip_lifetime_ms, 4_000);
    }

    #[test]
    fn nothing_to_run_is_a_usage_error() {
        assert!(
            checked(&["--audit", "t"])
                .unwrap_err()
                .contains("-- COMMAND")
        );
    }
}
