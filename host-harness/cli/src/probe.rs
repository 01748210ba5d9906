//! `mrtr-gate probe`: grade any MCP client against a hostile server (docs/probe.md). This
//! module is the command's flags and the glue to the probe crate ([`mrtr_gate_probe`]), which
//! depends on no gate crate: it is the adversary and the judge. A wrong flag, an unknown
//! scenario or an invalid scenario file is a usage error (exit 2) before any client runs.
//! The hidden `--relay ADDR` is the stdio server a client spawns under `--transport stdio`
//! ([`mrtr_gate_probe::relay`]).

use mrtr_gate_host::shown::shown_text;
use mrtr_gate_probe::judge::Status;
use mrtr_gate_probe::report::{EXIT_CANNOT_RUN, EXIT_USAGE};
use mrtr_gate_probe::scenario::{self, Scenario};
use mrtr_gate_probe::{DEFAULT_TIMEOUT, ProbeOptions, Progress, Transport, embedded, select};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// How the probe serves the client.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransportFlag {
    /// Streamable HTTP: the client's last word is the endpoint's URL.
    #[default]
    Http,
    /// stdio: the client's last word is a server command line to spawn (split it like a
    /// shell); MCP_PROBE_TRANSPORT=stdio.
    Stdio,
}

/// The flags of `mrtr-gate probe`.
#[derive(clap::Args, Clone, Debug)]
pub struct ProbeFlags {
    /// The client's command, a shell line: it is run once per scenario as
    /// `/bin/sh -c "CMD LAST"`, LAST being the endpoint's URL (HTTP) or the server command
    /// line to spawn, quoted as one word (stdio).
    #[arg(long, value_name = "CMD", required_unless_present_any = ["list", "relay"])]
    pub command: Option<String>,
    /// How the client is served: `http` (default) or `stdio`.
    #[arg(long, value_enum, default_value_t)]
    pub transport: TransportFlag,
    /// The stdio server the probe gives a client: relay stdin and stdout to the probe at
    /// ADDR, byte for byte, until either ends.
    #[arg(long, value_name = "ADDR", hide = true, exclusive = true)]
    pub relay: Option<String>,
    /// Run only this scenario (repeatable; default: every scenario).
    #[arg(long, value_name = "NAME")]
    pub scenario: Vec<String>,
    /// Read the scenarios from the `*.json` files of DIR instead of the built-in set.
    #[arg(long, value_name = "DIR")]
    pub scenarios: Option<PathBuf>,
    /// Print the report as one JSON object (checks in the conformance suite's shape).
    #[arg(long)]
    pub json: bool,
    /// Also write each scenario's checks, the client's stdout and stderr and the recording
    /// under DIR/<scenario>/ (and the whole report as DIR/report.json).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the scenarios, the clauses each checks and what a safe client does, then exit.
    #[arg(long)]
    pub list: bool,
    /// The hang guard, per scenario, in seconds (default 120): a client still running then
    /// fails every check of the scenario.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
}

fn usage(message: &str) -> u8 {
    mrtr_gate_host::say!("mrtr-gate probe: {message}");
    EXIT_USAGE
}

/// Runs the command; returns the exit status (docs/probe.md "Exit status").
pub fn run(flags: &ProbeFlags) -> u8 {
    if let Some(address) = &flags.relay {
        return match mrtr_gate_probe::relay::relay(address) {
            Ok(()) => 0,
            Err(e) => {
                mrtr_gate_host::say!(
                    "mrtr-gate probe --relay: cannot reach the probe at {address}: {e}"
                );
                EXIT_CANNOT_RUN
            }
        };
    }
    let loaded = match &flags.scenarios {
        Some(dir) => scenario::load_dir(dir),
        None => embedded::scenarios(),
    };
    let selected = match loaded.and_then(|all| select(all, &flags.scenario)) {
        Ok(selected) => selected,
        Err(e) => return usage(&e.to_string()),
    };
    if flags.list {
        list(&selected, flags.json);
        return 0;
    }
    let timeout = match flags.timeout {
        None => DEFAULT_TIMEOUT,
        Some(0) => return usage("--timeout must be at least 1 second"),
        Some(secs) => Duration::from_secs(secs),
    };
    let Some(command) = flags.command.clone().filter(|c| !c.trim().is_empty()) else {
        return usage("--command is empty");
    };
    let transport = match flags.transport {
        TransportFlag::Http => Transport::Http,
        TransportFlag::Stdio => match std::env::current_exe() {
            Ok(exe) => Transport::Stdio {
                relay: vec![
                    exe.to_string_lossy().into_owned(),
                    "probe".into(),
                    "--relay".into(),
                ],
            },
            Err(e) => {
                mrtr_gate_host::say!("mrtr-gate probe: could not run: this program's path: {e}");
                return EXIT_CANNOT_RUN;
            }
        },
    };
    let options = ProbeOptions {
        command,
        transport,
        scenarios: selected,
        timeout,
        linger: timeout,
    };
    let report = match mrtr_gate_probe::run_with_progress(options, progress) {
        Ok(report) => report,
        Err(e) => {
            mrtr_gate_host::say!("mrtr-gate probe: could not run: {e}");
            return EXIT_CANNOT_RUN;
        }
    };
    if let Some(dir) = &flags.output
        && let Err(e) = report.write_dir(dir)
    {
        mrtr_gate_host::say!("mrtr-gate probe: could not write {}: {e}", dir.display());
        return EXIT_CANNOT_RUN;
    }
    if flags.json {
        crate::out!("{}", report.json());
    } else {
        let human = report.human();
        crate::out!("{}", human.strip_suffix('\n').unwrap_or(&human));
    }
    report.exit_code()
}

/// One stderr line as each scenario starts and as it is judged; a client that made no request
/// and failed shows what it said on its stderr (its last lines, escaped).
fn progress(step: Progress<'_>) {
    match step {
        Progress::Started {
            index,
            total,
            scenario,
        } => mrtr_gate_host::say!(
            "mrtr-gate probe: [{index}/{total}] {}…",
            shown_text(&scenario.name)
        ),
        Progress::Judged { index, total, run } => {
            let (mut passed, mut failed, mut skipped) = (0, 0, 0);
            for v in &run.verdicts {
                match v.status {
                    Status::Success => passed += 1,
                    Status::Failure => failed += 1,
                    Status::Skipped => skipped += 1,
                }
            }
            let r = &run.recording;
            mrtr_gate_host::say!(
                "mrtr-gate probe: [{index}/{total}] {}: {passed} passed, {failed} failed, \
                 {skipped} skipped ({:.1} s{})",
                shown_text(&run.scenario.name),
                r.duration_ms as f64 / 1000.0,
                if r.timed_out {
                    ", ended by the hang guard"
                } else {
                    ""
                }
            );
            let no_start = r.requests.is_empty() && !r.timed_out && r.exit_code != Some(0);
            if no_start {
                let exit = r
                    .exit_code
                    .map_or_else(|| "a signal".to_owned(), |c| format!("status {c}"));
                let said: Vec<&str> = r.stderr.lines().rev().take(STDERR_LINES).collect();
                mrtr_gate_host::say!(
                    "mrtr-gate probe: the client made no request and exited ({exit}); the last \
                     lines of its stderr:"
                );
                for line in said.iter().rev() {
                    mrtr_gate_host::say!("    {}", shown_text(line));
                }
            }
        }
        _ => {}
    }
}

/// How many of its last stderr lines a client that did not start shows.
const STDERR_LINES: usize = 12;

fn list(scenarios: &[Scenario], as_json: bool) {
    if as_json {
        let all: Vec<_> = scenarios
            .iter()
            .map(|s| {
                json!({
                    "name": s.name, "description": s.description, "safe": s.safe,
                    "clauses": s.clauses.iter().map(|c| json!({"id": c.id, "source": c.source, "text": c.text})).collect::<Vec<_>>(),
                    "checks": s.checks.iter().map(|c| json!({"id": c.id, "description": c.description})).collect::<Vec<_>>(),
                })
            })
            .collect();
        crate::out!("{}", serde_json::Value::Array(all));
        return;
    }
    for s in scenarios {
        crate::out!(
            "{}\n    {}\n    a safe client {}",
            s.name,
            s.description,
            s.safe
        );
        for c in &s.clauses {
            crate::out!("    clause {} ({}): {}", c.id, c.source, c.text);
        }
        for c in &s.checks {
            crate::out!("    check {}: {}", c.id, c.description);
        }
    }
}
