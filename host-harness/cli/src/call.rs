//! `mrtr-gate call`: one MCP request to a real server through the gate, from the command
//! line ([`mrtr_gate_client`] does the work; this module picks the services from the flags
//! and writes what happened for people or, with `--json`, for machines).

use crate::services::{ServiceOptions, Wired};
use mrtr_gate_client::transport::isolation::RunAs;
use mrtr_gate_client::{
    Answerer, AnswersFile, Client, ClientConfig, ClientError, Completed, HttpTransport, Observer,
    OpenRound, ServerStderr, StdioTransport, Terminal, TerminalForm, Transport,
};
use mrtr_gate_host::consent_screen::{LastView, render_answers, shown_name};
use mrtr_gate_host::core::host::{
    Consent, ConsentMethod, ConsentPrompt, ConsentReceipt, HostError,
};
use mrtr_gate_host::core::{MRTR_METHODS, Policy};
use mrtr_gate_host::reference_hosts::{ReceiptIds, SystemClock};
use mrtr_gate_host::shown::{json_text_for_terminal, shown_lines, shown_text};
use mrtr_gate_host::trail_root::RootSchedule;
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where the server is.
#[derive(Clone, Debug)]
pub enum Target {
    /// Spawn this command and talk over its stdin/stdout.
    Stdio(String),
    /// Post to this streamable HTTP endpoint.
    Http(String),
}

/// Everything `mrtr-gate call` takes.
#[derive(Clone, Debug)]
pub struct CallOptions {
    /// The server.
    pub target: Target,
    /// The user the request is bound to.
    pub user: String,
    /// The tenant.
    pub tenant: String,
    /// Append the audit trail to this JSON-lines file (else it is kept in memory).
    pub audit: Option<PathBuf>,
    /// Take answers from this file instead of the terminal form.
    pub answers: Option<PathBuf>,
    /// Consent to the answers from `answers` without asking (the consent screen is still
    /// printed on stderr).
    pub yes: bool,
    /// Hand accepted URLs to the system opener (else they are printed).
    pub open: bool,
    /// The binding's round cap.
    pub max_rounds: Option<u32>,
    /// Where a `--stdio` server's stderr goes (docs/cli.md, "The server's stderr").
    pub server_stderr: ServerStderr,
    /// Run a `--stdio` server without its sandbox (`--insecure-no-server-isolation`).
    pub insecure_no_server_isolation: bool,
    /// Run a `--stdio` server as another user (`--server-user`).
    pub server_user: Option<RunAs>,
    /// The host keys (on unless `--insecure-no-host-keys`).
    pub keys: crate::keys::KeyOptions,
    /// Cedar policies that judge each round before anyone sees it (`--policy`,
    /// docs/policy.md).
    pub policy: Option<PathBuf>,
}

/// Set by Ctrl-C; the loop checks it while it waits and between steps.
pub static CANCELLED: AtomicBool = AtomicBool::new(false);

/// Consent given in advance on the command line (`--yes`): the screen is shown on stderr as
/// it would be to a person, and the receipt names the flag.
struct FlagConsent {
    ids: ReceiptIds,
    views: LastView,
}

impl Consent for FlagConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let (screen, readable) = self.views.render(&prompt.view_json);
        mrtr_gate_host::say!(
            "{screen}\nAnswers to send:\n{}\n(consent given with --yes)",
            render_answers(&prompt.responses_json)
        );
        // The flag consents to what can be shown; a view that does not read cannot be.
        Ok(ConsentReceipt::for_prompt(
            prompt,
            self.ids.mint(),
            readable,
            ConsentMethod::PresetAnswers,
        ))
    }
}

/// Progress, URLs and Ctrl-C on the terminal.
struct CliObserver {
    views: LastView,
    open: bool,
    interactive: bool,
    terminal: Terminal,
    shown_at: Option<Instant>,
    tty: bool,
}

impl Observer for CliObserver {
    fn waiting(&mut self, method: &str, round: u32, waited: Duration) -> bool {
        let every = if self.tty {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(5)
        };
        if waited >= Duration::from_secs(1) && self.shown_at.is_none_or(|t| t.elapsed() >= every) {
            self.shown_at = Some(Instant::now());
            let round = if round == 0 {
                String::new()
            } else {
                format!(" after round {round}")
            };
            if self.tty {
                // No newline: the next one overwrites it (`say!`'s rule: never a panic).
                let _ = write!(
                    std::io::stderr().lock(),
                    "\r… waiting for the server: {method}{round}, {} s (Ctrl-C cancels) ",
                    waited.as_secs()
                );
            } else {
                mrtr_gate_host::say!(
                    "… waiting for the server: {method}{round}, {} s",
                    waited.as_secs()
                );
            }
        }
        true
    }

    fn round(&mut self, round: &OpenRound) {
        self.views
            .remember(&round.accepted.view_json, Arc::clone(&round.view));
        let view = &round.accepted;
        if self.shown_at.take().is_some() && self.tty {
            mrtr_gate_host::say!();
        }
        let what = if view.input_keys.is_empty() {
            "state only".to_owned()
        } else {
            view.input_keys
                .iter()
                .map(|k| shown_name(k))
                .collect::<Vec<_>>()
                .join(", ")
        };
        mrtr_gate_host::say!("round {} from the server ({what})", view.round);
    }

    fn open_url(&mut self, url: &str) {
        // The URL passed the gate's check (no controls, no white space); it is shown escaped
        // all the same, like every string that came from the server.
        let shown = shown_text(url);
        if self.open {
            match open_without_shell(url) {
                Ok(()) => mrtr_gate_host::say!("opened in your browser: {shown}"),
                Err(e) => mrtr_gate_host::say!(
                    "could not open a browser ({e}); open it yourself: {shown}"
                ),
            }
        } else {
            mrtr_gate_host::say!("open this URL in your browser: {shown}");
        }
        if self.interactive {
            let _ = self.terminal.ask("press Enter when you are done there ");
        }
    }

    fn cancelled(&mut self) -> bool {
        CANCELLED.load(Ordering::SeqCst)
    }
}

/// Hand `url` to the system's opener as one argument: no shell ever sees it.
fn open_without_shell(url: &str) -> std::io::Result<()> {
    let (program, args): (&str, &[&str]) = if cfg!(target_os = "macos") {
        ("open", &[])
    } else if cfg!(windows) {
        ("rundll32", &["url.dll,FileProtocolHandler"])
    } else {
        ("xdg-open", &[])
    };
    std::process::Command::new(program)
        .args(args)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|_| ())
}

/// Say on the terminal where the server's stderr goes, before anything else is shown: the
/// log's path, or a warning that the server writes to this terminal unfiltered.
fn announce_server_stderr(stderr: &ServerStderr, log: Option<&std::path::Path>) {
    match (stderr, log) {
        (ServerStderr::InheritRaw, _) => mrtr_gate_host::say!(
            "mrtr-gate: WARNING: --insecure-raw-server-stderr: the server's stderr goes to this \
             terminal unfiltered; what it writes there can erase or repaint anything shown here, \
             the consent screen included"
        ),
        (_, Some(path)) => mrtr_gate_host::say!(
            "mrtr-gate: the server's stderr is logged to {} (not shown here)",
            shown_text(&path.display().to_string())
        ),
        (_, None) => mrtr_gate_host::say!("mrtr-gate: the server's stderr is discarded"),
    }
}

/// A client with the services the options ask for, connected to the target, and its trail's
/// root (docs/audit.md, "Shards and the root"): keep it while the client runs; dropping it
/// anchors the root where the trail ended.
pub fn connect(
    options: &CallOptions,
    runtime: &GateRuntime,
) -> Result<(Client<ComponentGate>, Option<RootSchedule>), ClientError> {
    let terminal = Terminal::stdio();
    // The view the client reads for a round is the one its consent screen renders.
    let views = LastView::default();
    let clock = Arc::new(SystemClock);
    let consent: mrtr_gate_host::services::SharedConsent = if options.yes {
        if options.answers.is_none() {
            return Err(ClientError::Usage("--yes consents to the answers of --answers FILE; without a file the answers are typed, and confirmed, at the terminal".into()));
        }
        Arc::new(FlagConsent {
            ids: ReceiptIds::new("cli-yes", 1),
            views: views.clone(),
        })
    } else if options.answers.is_some() {
        // Answers written before the round was seen: the person confirms them, but did not
        // give them at this screen (docs/cli.md).
        Arc::new(
            terminal
                .consent()
                .with_method(ConsentMethod::PresetAnswers)
                .with_views(views.clone()),
        )
    } else {
        Arc::new(terminal.consent().with_views(views.clone()))
    };
    // The operator's policies judge each round first; a round they allowed is granted with
    // their receipt, every other goes to the consent above.
    let lifetime_ms = Policy::default().round_trip_lifetime_ms;
    let decider = options
        .policy
        .as_ref()
        .map(|path| crate::policy::decider(path, lifetime_ms))
        .transpose()
        .map_err(|e| ClientError::Usage(format!("--policy:\n{e}")))?;
    let consent: mrtr_gate_host::services::SharedConsent = match &decider {
        Some(decider) => Arc::new(decider.consent(consent)),
        None => consent,
    };
    let wired = Wired::open(
        &ServiceOptions {
            audit: options.audit.clone(),
            redis: None,
            keys: options.keys.clone(),
        },
        clock,
    )
    .map_err(ClientError::Usage)?;
    // Consent typed at this terminal, which a server sharing it could forge without isolation.
    let terminal_consent = !options.yes;
    let transport: Box<dyn Transport> = match &options.target {
        Target::Stdio(command) => {
            let isolation = wired
                .server_isolation(
                    options.insecure_no_server_isolation,
                    terminal_consent,
                    options.server_user,
                )
                .map_err(ClientError::Usage)?;
            let argv = mrtr_gate_client::transport::stdio::split_command(command)
                .map_err(ClientError::Transport)?;
            let transport = StdioTransport::spawn_isolated(
                &argv,
                &options.server_stderr,
                isolation.as_ref(),
                options.server_user,
            )
            .map_err(ClientError::Transport)?;
            announce_server_stderr(&options.server_stderr, transport.stderr_log());
            Box::new(transport)
        }
        Target::Http(url) => Box::new(HttpTransport::connect(url).map_err(ClientError::Transport)?),
    };
    let services = wired.services(consent);
    let answers: Box<dyn Answerer> = match &options.answers {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ClientError::Usage(format!("--answers {}: {e}", path.display())))?;
            Box::new(AnswersFile::parse(&text).map_err(|e| ClientError::Usage(e.0))?)
        }
        None => Box::new(TerminalForm::new(terminal.clone())),
    };
    // The gate binds, and the trail digests, keyed pseudonyms of the user and tenant.
    let principal = wired.principal(&options.user, &options.tenant);
    if let Some(decider) = &decider {
        decider.know(&principal, &options.user, &options.tenant);
    }
    let mut config = ClientConfig::new(principal.user, principal.tenant);
    if let Some(n) = options.max_rounds {
        config.policy = Policy {
            max_rounds: n,
            ..Policy::default()
        };
    }
    let observer = CliObserver {
        views,
        open: options.open,
        interactive: !options.yes && std::io::stdin().is_terminal(),
        terminal,
        shown_at: None,
        tty: std::io::stderr().is_terminal(),
    };
    let root = wired.root_schedule(ROOT_EVERY, |e| {
        mrtr_gate_host::say!("mrtr-gate: the trail's root could not be anchored: {e}");
    });
    let client = Client::new(
        ComponentGate::new(runtime, services),
        transport,
        config,
        answers,
    )
    .with_observer(Box::new(observer));
    let client = match decider {
        Some(decider) => client.with_rule(Box::new(crate::policy::PolicyRule(decider))),
        None => client,
    };
    Ok((client, root))
}

/// How often a call's trail root is anchored while it runs (and once more when it ends).
const ROOT_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The params of `method` for `name` (a tool or prompt name, or a resource URI) and the
/// JSON `arguments`. The methods a call may use are the core's one allow-list of gated
/// methods ([`MRTR_METHODS`]); only the shape of their params differs here: a resource is
/// named by its URI alone, a tool or a prompt by its name and arguments.
pub fn params(method: &str, name: &str, arguments: Option<&str>) -> Result<Value, ClientError> {
    let arguments: Option<Value> = arguments
        .map(|a| {
            serde_json::from_str(a)
                .map_err(|e| ClientError::Usage(format!("the arguments are not json: {e}")))
        })
        .transpose()?;
    if arguments.as_ref().is_some_and(|a| !a.is_object()) {
        return Err(ClientError::Usage(
            "the arguments must be a JSON object".into(),
        ));
    }
    if !MRTR_METHODS.contains(&method) {
        return Err(ClientError::Usage(format!(
            "`{method}` is not one of {}",
            MRTR_METHODS.join(", ")
        )));
    }
    match (method, arguments) {
        (RESOURCE_READ, None) => Ok(json!({"uri": name})),
        (RESOURCE_READ, Some(_)) => Err(ClientError::Usage(format!(
            "{RESOURCE_READ} takes a URI and no arguments"
        ))),
        (_, arguments) => {
            Ok(json!({"name": name, "arguments": arguments.unwrap_or_else(|| json!({}))}))
        }
    }
}

/// The one gated method whose params name a URI instead of a name and arguments.
const RESOURCE_READ: &str = "resources/read";

/// The process exit code for an outcome (`docs/cli.md`).
pub fn exit_code(outcome: &Result<Completed, ClientError>) -> u8 {
    match outcome {
        Ok(done) if done.result.get("isError") == Some(&Value::Bool(true)) => 6,
        Ok(_) => 0,
        Err(e) => error_exit_code(e),
    }
}

/// The process exit code for a failure (`docs/cli.md`).
pub fn error_exit_code(e: &ClientError) -> u8 {
    match e {
        ClientError::Refused(_)
        | ClientError::UnreadableView(_)
        | ClientError::Peer { .. }
        | ClientError::Policy(_) => 1,
        ClientError::Usage(_) => 2,
        ClientError::Server { .. } | ClientError::UnsupportedVersion(_) => 3,
        ClientError::Transport(_) => 4,
        ClientError::Cancelled | ClientError::NoAnswer(_) => 5,
        // A failure the client learned to name after this build: a refusal all the same.
        _ => 1,
    }
}

/// `tools/list`, `prompts/list` or `resources/list`.
pub fn list(client: &mut Client<ComponentGate>, what: &str) -> Result<Value, ClientError> {
    match what {
        "tools" | "prompts" | "resources" => client.request(&format!("{what}/list"), json!({})),
        other => Err(ClientError::Usage(format!(
            "`{other}`: list tools, prompts or resources"
        ))),
    }
}

/// One line per item of a list result: its name (or URI) and description.
pub fn list_lines(result: &Value, what: &str) -> String {
    let key = if what == "resources" { "uri" } else { "name" };
    result
        .get(what)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|item| {
            let name = shown_text(item.get(key).and_then(Value::as_str).unwrap_or("?"));
            match item.get("description").and_then(Value::as_str) {
                Some(d) => format!("{name}  {}", shown_text(d)),
                None => name,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `--json` object for a failure.
pub fn error_json(e: &ClientError) -> Value {
    match e {
        ClientError::Refused(d) => {
            json!({"ok": false, "code": d.code.as_str(), "message": d.message,
            "cause": d.cause.as_str(), "audited": d.audited})
        }
        e => json!({"ok": false, "code": e.code(), "message": e.to_string()}),
    }
}

/// What to print on stdout for `--json`: one object.
pub fn json_report(outcome: &Result<Completed, ClientError>) -> Value {
    match outcome {
        Ok(done) => json!({"ok": true, "rounds": done.rounds, "result": done.result}),
        Err(e) => error_json(e),
    }
}

/// What to print for people: the result's text (tool content), each line through
/// `shown_text` (line breaks kept), or the result as JSON with every control, bidi and
/// invisible character written as a JSON escape.
pub fn human_report(done: &Completed) -> String {
    let mut out = String::new();
    let texts: Vec<&str> = done
        .result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        out.push_str(&json_text_for_terminal(
            &serde_json::to_string_pretty(&done.result).unwrap_or_default(),
        ));
    } else {
        out.push_str(&shown_lines(&texts.join("\n")));
    }
    out
}

/// One sentence for a refusal, after the code. The messages may quote the server (its
/// JSON-RPC error, a name it sent), so they are shown through `shown_text`.
pub fn refusal_line(e: &ClientError) -> String {
    match e {
        ClientError::Refused(d) => format!(
            "refused: {}: {} (cause: {}; nothing more was sent)",
            d.code,
            shown_text(&d.message),
            d.cause.as_str()
        ),
        ClientError::Transport(t) => {
            format!("transport failed: {}: {}", t.code, shown_text(&t.message))
        }
        other => format!("{}: {}", other.code(), shown_text(&other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_takes_exactly_the_cores_gated_methods() {
        for method in MRTR_METHODS {
            assert!(params(method, "x", None).is_ok(), "{method}");
        }
        let Err(ClientError::Usage(refused)) = params("tools/list", "x", None) else {
            panic!("tools/list is not a gated method");
        };
        assert_eq!(
            refused,
            format!("`tools/list` is not one of {}", MRTR_METHODS.join(", "))
        );
    }

    #[test]
    fn a_resource_is_named_by_its_uri_and_a_tool_by_its_name_and_arguments() {
        assert_eq!(
            params("resources/read", "file:///a", None).unwrap(),
            json!({"uri": "file:///a"})
        );
        assert!(params("resources/read", "file:///a", Some("{}")).is_err());
        assert_eq!(
            params("tools/call", "t", Some(r#"{"a":1}"#)).unwrap(),
            json!({"name": "t", "arguments": {"a": 1}})
        );
        assert_eq!(
            params("prompts/get", "p", None).unwrap(),
            json!({"name": "p", "arguments": {}})
        );
    }
}
