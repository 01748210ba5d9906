//! # mrtr-gate-probe
//!
//! `mrtr-gate probe`: a hostile MCP server that grades a client's handling of MRTR rounds
//! (issue 28, docs/probe.md). It runs the client command once per scenario, the conformance
//! suite's way ([`launch`]), serves the scenario's answers ([`serve`], [`mcp`], [`respond`])
//! over streamable HTTP ([`http`]) or stdio (the client spawns the [`relay`] as its server,
//! [`stdio`]) with a canary listener for URLs ([`canary`]), records everything ([`record`]),
//! and once the client's process tree has exited judges the checks ([`judge`]) into a report
//! ([`report`]). Scenarios are data ([`scenario`], [`embedded`]).
//!
//! The crate depends on no gate crate: it is the adversary and the judge, so a bug in the
//! gate's strict parser cannot hide in the probe's reading of the wire ([`json_text`]).

pub mod canary;
pub mod embedded;
pub mod hold;
pub mod http;
pub mod json_text;
pub mod judge;
pub mod launch;
pub mod listen;
pub mod mcp;
pub mod record;
pub mod relay;
pub mod report;
pub mod respond;
pub mod scenario;
pub mod serve;
pub mod stdio;

use record::Request;
use report::{Report, ScenarioRun};
use scenario::{Scenario, ScenarioError};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The hang guard's default: generous, since its expiry is a FAILURE and a loaded machine
/// must not produce one for a client that would have finished.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How the probe serves the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP: the client's last word is the endpoint's URL.
    Http,
    /// stdio: the client's last word is a server command line to spawn, `relay` followed by
    /// the probe's address (`mrtr-gate probe --relay 127.0.0.1:PORT` from the CLI).
    Stdio {
        /// The relay's argv before the address.
        relay: Vec<String>,
    },
}

impl Transport {
    /// `http` or `stdio`, as `MCP_PROBE_TRANSPORT` and the report name it.
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Stdio { .. } => "stdio",
        }
    }
}

/// What a probe run needs.
pub struct ProbeOptions {
    /// The client's shell line (the URL, or the stdio server's command line, is appended as
    /// its last word).
    pub command: String,
    /// How the client is served.
    pub transport: Transport,
    /// The scenarios to run, in order.
    pub scenarios: Vec<Scenario>,
    /// The hang guard, per scenario (a held call's fallback comes at half of it at most, so
    /// before it).
    pub timeout: Duration,
    /// How long connections still open once the client's process tree has exited are waited
    /// for (a process outside the tree holds them); the run then fails. The CLI uses the hang
    /// guard's value.
    pub linger: Duration,
}

/// The scenarios named (all of them when `names` is empty), in the order given.
pub fn select(all: Vec<Scenario>, names: &[String]) -> Result<Vec<Scenario>, ScenarioError> {
    if names.is_empty() {
        return Ok(all);
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|s| &s.name == name)
                .cloned()
                .ok_or_else(|| ScenarioError {
                    code: "unknown_scenario",
                    scenario: name.clone(),
                    message: format!(
                        "no such scenario; known: {}",
                        all.iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
        })
        .collect()
}

/// Runs every scenario of `options` (one after the other) and judges them.
pub fn run(options: ProbeOptions) -> std::io::Result<Report> {
    run_with_progress(options, |_| {})
}

/// Where a run is, for a person watching it.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// Scenario `index` (from 1) of `total` starts.
    Started {
        /// From 1.
        index: usize,
        /// How many scenarios the run has.
        total: usize,
        /// The scenario.
        scenario: &'a Scenario,
    },
    /// Scenario `index` of `total` was run and judged.
    Judged {
        /// From 1.
        index: usize,
        /// How many scenarios the run has.
        total: usize,
        /// What it came to.
        run: &'a ScenarioRun,
    },
}

/// [`run`], telling `progress` as each scenario starts and is judged.
pub fn run_with_progress(
    mut options: ProbeOptions,
    mut progress: impl FnMut(Progress<'_>),
) -> std::io::Result<Report> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut runs = Vec::new();
        let scenarios = std::mem::take(&mut options.scenarios);
        let total = scenarios.len();
        for (i, scenario) in scenarios.into_iter().enumerate() {
            let index = i + 1;
            progress(Progress::Started {
                index,
                total,
                scenario: &scenario,
            });
            let run = run_one(Arc::new(scenario), &options).await?;
            progress(Progress::Judged {
                index,
                total,
                run: &run,
            });
            runs.push(run);
        }
        Ok(Report {
            transport: options.transport.name(),
            command: options.command,
            runs,
        })
    })
}

/// The environment a client gets for `scenario`: the suite's three variables and the probe's.
fn client_env(
    scenario: &Scenario,
    transport: &Transport,
    answers_file: &std::path::Path,
) -> Vec<(String, String)> {
    let mut context = serde_json::Map::new();
    context.insert("name".into(), Value::String(scenario.name.clone()));
    context.extend(scenario.context.clone());
    let tools: Vec<&str> = scenario.tools.iter().map(|t| t.name.as_str()).collect();
    let reads: Vec<&str> = context
        .get("read_twice")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let reads = reads.join(" ");
    vec![
        ("MCP_CONFORMANCE_SCENARIO".into(), scenario.name.clone()),
        (
            "MCP_CONFORMANCE_PROTOCOL_VERSION".into(),
            mcp::PROTOCOL_VERSION.into(),
        ),
        (
            "MCP_CONFORMANCE_CONTEXT".into(),
            Value::Object(context).to_string(),
        ),
        ("MCP_PROBE_TRANSPORT".into(), transport.name().into()),
        (
            "MCP_PROBE_TOOL".into(),
            tools.first().copied().unwrap_or_default().into(),
        ),
        ("MCP_PROBE_TOOLS".into(), tools.join(" ")),
        ("MCP_PROBE_READS".into(), reads),
        (
            "MCP_PROBE_ANSWERS_FILE".into(),
            answers_file.display().to_string(),
        ),
    ]
}

/// The endpoint a scenario is served on.
enum Endpoint {
    Http(http::Server),
    Stdio(stdio::Server),
}

impl Endpoint {
    fn start(
        scenario: &Arc<Scenario>,
        transport: &Transport,
        canary: u16,
        fallback: Duration,
    ) -> std::io::Result<(Endpoint, String)> {
        match transport {
            Transport::Http => {
                let server = http::Server::start(scenario.clone(), canary, fallback)?;
                let url = server.url();
                Ok((Endpoint::Http(server), url))
            }
            Transport::Stdio { relay } => {
                let server = stdio::Server::start(scenario.clone(), canary, fallback)?;
                let word = server.last_word(relay)?;
                Ok((Endpoint::Stdio(server), word))
            }
        }
    }

    async fn finish(self, guard: Duration) -> (Vec<Request>, bool, Option<hold::HoldRecord>) {
        match self {
            Endpoint::Http(server) => server.finish(guard).await,
            Endpoint::Stdio(server) => server.finish(guard).await,
        }
    }
}

async fn run_one(scenario: Arc<Scenario>, options: &ProbeOptions) -> std::io::Result<ScenarioRun> {
    if let Transport::Stdio { .. } = options.transport
        && let Some(why) = stdio::inexpressible(&scenario)
    {
        // Never run, so never passed: every check says why.
        let verdicts = judge::skip_all(&scenario, &format!("not expressible on stdio: {why}"));
        return Ok(ScenarioRun {
            scenario,
            recording: record::Recording::default(),
            verdicts,
            judged_at: SystemTime::now(),
        });
    }
    let dir = launch::RunDir::create()?;
    let answers_file = dir.path().join("answers.json");
    let answers = scenario
        .context
        .get("answers")
        .cloned()
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    std::fs::write(&answers_file, answers.to_string())?;
    let canary = canary::Canary::start()?;
    let canary_port = canary.port();
    let (server, last_word) = Endpoint::start(
        &scenario,
        &options.transport,
        canary_port,
        hold::fallback_within(options.timeout),
    )?;
    let exited = launch::run(
        launch::Launch {
            command: &options.command,
            last_word: &last_word,
            env: client_env(&scenario, &options.transport, &answers_file),
            timeout: options.timeout,
        },
        dir.path(),
    )
    .await?;
    // The client's tree is gone, so every connection ends at once; one that does not is held
    // by a process outside the tree, and the run fails rather than wait for it.
    let (requests, server_ended, hold) = server.finish(options.linger).await;
    let (hits, canary_ended) = canary.finish(options.linger).await;
    let unsupported = exited
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mrtr-probe: unsupported: "))
        .map(|w| w.trim().to_owned())
        .collect();
    let recording = record::Recording {
        requests,
        canary: hits,
        opened: exited.opened,
        unsupported,
        stdout: exited.stdout,
        stderr: exited.stderr,
        exit_code: exited.exit_code,
        timed_out: exited.timed_out,
        lingering: !(server_ended && canary_ended),
        duration_ms: exited.duration.as_millis(),
        hold,
    };
    let verdicts = judge::judge(&scenario, &recording, canary_port);
    Ok(ScenarioRun {
        scenario,
        recording,
        verdicts,
        judged_at: SystemTime::now(),
    })
}
