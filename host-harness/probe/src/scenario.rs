//! The scenario model (`tests/probe/scenarios/<name>.json`), its loading and its checks.
//! A scenario is data: what the server answers each leg of each tool, what the client's
//! handler is told, the clauses it checks and the checks, as predicates over the recording.
//! Every file is read strictly (unknown members are refused) and validated before anything
//! runs, so a typo cannot turn a check into one that always passes.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

/// The precondition that the client declared form elicitation only.
pub const DECLARED_FORM_ONLY: &str = "declared_form_only";

/// The precondition that the client declared the tasks extension
/// (`io.modelcontextprotocol/tasks`) on its call; a client that did not is SKIPPED.
pub const DECLARED_TASKS: &str = "declared_tasks";

/// The methods the probe answers itself, which a scenario's `methods` cannot take over.
const OWN_METHODS: [&str; 7] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "ping",
    "initialize",
];

/// The precondition that the client cancelled the held call (and the late round was
/// delivered after it); a client that says `unsupported: cancel` is SKIPPED.
pub const CANCELLED: &str = "cancelled";

/// The largest `ms` a `min_gap_ms` check may ask for: a lower bound, never a wait.
const MAX_GAP_MS: u64 = 10_000;

/// The name of the tool every scenario lists last: a plain complete result.
pub const SENTINEL_TOOL: &str = "probe_done";

/// A scenario, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The scenario's name: the file's stem.
    pub name: String,
    /// What the server does, in a sentence.
    pub description: String,
    /// The spec notes, seed lines and control clauses it checks.
    pub clauses: Vec<Clause>,
    /// What a safe client does, printed with every FAILURE.
    pub safe: String,
    /// Merged into `MCP_CONFORMANCE_CONTEXT` (`answers`, `answer_by_message`, ...).
    #[serde(default)]
    pub context: serde_json::Map<String, Value>,
    /// The tools the server lists (before the sentinel), in order.
    pub tools: Vec<Tool>,
    /// Other requests the server answers, by JSON-RPC method (a task's `tasks/get` and
    /// `tasks/update`): legs are counted per method, as a tool's are.
    #[serde(default)]
    pub methods: Vec<Method>,
    /// Resources the server lists and answers `resources/read` of, by URI: legs are counted
    /// per URI, as a tool's are. The client programs read each twice (context `read_twice`).
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// The checks.
    pub checks: Vec<Check>,
}

/// A clause a scenario checks.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clause {
    /// A short identifier (`SEP-2322`, `AID-H-028.007-G001`).
    pub id: String,
    /// Where it is written (file and line).
    pub source: String,
    /// The clause's words.
    pub text: String,
}

/// A tool and what each call of it is answered.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// Leg 0 answers the first call, leg n the n-th retry.
    pub legs: Vec<Answer>,
    /// The answer to every leg after `legs`.
    pub then: Answer,
}

/// A method besides the probe's own and what each request of it is answered.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Method {
    /// The JSON-RPC method (`tasks/get`).
    pub method: String,
    /// Leg 0 answers the first request of the method, leg n the n-th after it.
    pub legs: Vec<Answer>,
    /// The answer to every leg after `legs`.
    pub then: Answer,
}

/// A resource and what each `resources/read` of it is answered.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// The resource's URI.
    pub uri: String,
    /// Leg 0 answers the first read, leg n the n-th after it (a retry is a read too).
    pub legs: Vec<Answer>,
    /// The answer to every leg after `legs`.
    pub then: Answer,
}

/// One answer to a request: exactly one of its members.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// A JSON-RPC result, serialised by the probe under the request's id.
    pub result: Option<Value>,
    /// A JSON-RPC error object, likewise.
    pub error: Option<Value>,
    /// The whole JSON-RPC message, verbatim (placeholders substituted textually): for what a
    /// JSON serialiser cannot write, such as a duplicated key or a lone surrogate.
    pub raw: Option<String>,
    /// An SSE stream of several messages (each one of the other forms), one event each.
    pub sse: Option<Vec<Answer>>,
    /// Send a single message framed as one SSE event instead of a JSON body.
    #[serde(default)]
    pub as_sse: bool,
    /// Read the request whole, record it, then close the connection without a response
    /// (a transport error the server causes).
    #[serde(default)]
    pub close: bool,
    /// Hold the call: an SSE stream with one notification, kept open until the client
    /// cancels the call; the `late` answer then goes, under the cancelled id, first on the
    /// stream of the client's next request.
    pub hold: Option<Hold>,
}

/// A held call (at most one per scenario, in a tool's `legs`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    /// The notification sent on the held stream (a JSON-RPC notification: `method`, no `id`).
    pub notify: Value,
    /// The answer delivered late, under the cancelled id (a `result`, `error` or `raw`).
    pub late: Box<Answer>,
}

/// What a check is.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// A well-formed round must be completed: exactly one request matches.
    Control,
    /// No request may match.
    NoRequest,
    /// The tool's retry carries the state of its leg 0 answer, the same UTF-16 units.
    StateEchoExact,
    /// Nothing connects to the canary listener.
    NoCanary,
    /// Nothing is handed to a URL opener.
    NoOpen,
    /// At most `n` requests match.
    AtMost,
    /// At least `n` requests match.
    AtLeast,
    /// Every retry of the tool's state-only rounds comes at least `ms` after the round was
    /// written (a lower bound: load only lengthens a gap).
    MinGapMs,
}

/// A check over the recording.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// A stable identifier (`mrtr-...`), unique across scenarios.
    pub id: String,
    /// What it checks, in a sentence.
    pub description: String,
    /// What it is.
    pub kind: CheckKind,
    /// `control`, `no_request`: which requests count.
    #[serde(rename = "match")]
    pub matcher: Option<Match>,
    /// `state_echo_exact`: the tool whose round is checked.
    pub tool: Option<String>,
    /// `state_echo_exact`: whether sending no retry fails (a well-formed round) or passes
    /// (a round a client may refuse, such as one whose state is not valid Unicode).
    pub retry_required: Option<bool>,
    /// `no_request`, `at_most`, `at_least`: what the client did, completed with the matching
    /// request (`at_least`: with the count);
    /// `control` (optional): what a client that sent no matching request did.
    pub says: Option<String>,
    /// `at_most`, `at_least`: how many requests may (must) match.
    pub n: Option<usize>,
    /// `min_gap_ms`: the least gap, in milliseconds.
    pub ms: Option<u64>,
    /// `not_unsupported:<what>`: SKIPPED when the client says it cannot do `<what>`;
    /// `declared_form_only`: SKIPPED when the first call of the check's tools declares
    /// `elicitation.url` (the client could not be made to declare form only);
    /// `declared_tasks`: SKIPPED when the first call of the check's tools does not declare the
    /// tasks extension (`io.modelcontextprotocol/tasks`);
    /// `cancelled`: SKIPPED when the client says `unsupported: cancel` or never cancelled the
    /// held call, FAILURE when it sent no request after cancelling (the late round was never
    /// delivered).
    pub requires: Option<String>,
}

/// A predicate over one recorded request: every member given must hold.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// A `tools/call` of this tool.
    pub tool: Option<String>,
    /// A request of this JSON-RPC method (`tasks/update`).
    pub method: Option<String>,
    /// Its `params.requestState` decodes to these UTF-16 units.
    pub state: Option<String>,
    /// Its `params.requestState` is a string of at least this many UTF-16 units.
    pub state_units_at_least: Option<usize>,
    /// The member at this JSON pointer (with `equals` or `has`).
    pub pointer: Option<String>,
    /// ... is this value.
    pub equals: Option<Value>,
    /// ... exists (`true`) or not (`false`).
    pub has: Option<bool>,
    /// Its `params.arguments` differ, as JSON values, from those of the tool's first call
    /// (the one without a `requestState`; absent arguments count as `{}`).
    pub arguments_differ_from_first: Option<bool>,
    /// Its JSON-RPC `id` differs (`true`) or not (`false`), as JSON values, from that of the
    /// tool's first call.
    pub id_differs_from_first: Option<bool>,
    /// One of these matches.
    pub any_of: Option<Vec<Match>>,
    /// Each of these matches.
    pub all_of: Option<Vec<Match>>,
}

/// Why a scenario file was refused, with a stable snake_case code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The code (`unknown_field`, `unknown_placeholder`, ...).
    pub code: &'static str,
    /// The file or scenario it is about.
    pub scenario: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.code, self.scenario, self.message)
    }
}

impl std::error::Error for ScenarioError {}

fn refuse(code: &'static str, scenario: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        code,
        scenario: scenario.to_owned(),
        message: message.into(),
    }
}

/// The placeholders an answer may hold: the request's id (raw answers only), the canary's
/// port and the leg's number; and `{{x:N}}`, N copies of `x` (an oversized value).
const PLACEHOLDERS: [&str; 3] = ["id", "canary", "n"];

/// The most copies `{{x:N}}` may make: the probe's own request body limit.
const MAX_REPEAT: usize = 16 << 20;

/// N of a `{{x:N}}` placeholder's name (`x:N`), if it is one.
pub fn repeat_count(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("x:")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|n| (1..=MAX_REPEAT).contains(n))
}

/// Reads one scenario from its text; `stem` is the file's name without `.json`.
pub fn parse(stem: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let scenario: Scenario = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let code = if message.starts_with("unknown field") {
            "unknown_field"
        } else if message.starts_with("unknown variant") {
            "unknown_check_kind"
        } else if message.starts_with("missing field") {
            "missing_field"
        } else {
            "invalid_scenario"
        };
        refuse(code, stem, message)
    })?;
    validate(stem, &scenario)?;
    Ok(scenario)
}

/// Reads every `*.json` of a folder, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, ScenarioError> {
    let shown = dir.display().to_string();
    let entries =
        std::fs::read_dir(dir).map_err(|e| refuse("scenario_unreadable", &shown, e.to_string()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| refuse("scenario_unreadable", &shown, e.to_string()))?
            .path();
        if path.extension().is_some_and(|x| x == "json") {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        // An empty set would pass every client.
        return Err(refuse(
            "no_scenarios",
            &shown,
            "the folder holds no `*.json` scenario",
        ));
    }
    let mut scenarios = Vec::new();
    for path in files {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path).map_err(|e| {
            refuse(
                "scenario_unreadable",
                &path.display().to_string(),
                e.to_string(),
            )
        })?;
        scenarios.push(parse(&stem, &text)?);
    }
    check_set(&scenarios)?;
    Ok(scenarios)
}

/// What must hold across scenarios: names and check ids unique.
pub fn check_set(scenarios: &[Scenario]) -> Result<(), ScenarioError> {
    let mut names = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for s in scenarios {
        if !names.insert(s.name.as_str()) {
            return Err(refuse(
                "duplicate_scenario",
                &s.name,
                "two scenarios have this name",
            ));
        }
        for c in &s.checks {
            if !ids.insert(c.id.as_str()) {
                return Err(refuse(
                    "duplicate_check_id",
                    &s.name,
                    format!("check id `{}` is used twice", c.id),
                ));
            }
        }
    }
    Ok(())
}

fn validate(stem: &str, s: &Scenario) -> Result<(), ScenarioError> {
    if s.name != stem {
        return Err(refuse(
            "name_mismatch",
            stem,
            format!(
                "the scenario is named `{}` in a file named `{stem}.json`",
                s.name
            ),
        ));
    }
    let well_named = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    if !well_named(&s.name) {
        return Err(refuse(
            "invalid_name",
            stem,
            "names are lowercase letters, digits, `-` and `_`",
        ));
    }
    if s.clauses.is_empty() || s.checks.is_empty() || s.tools.is_empty() {
        return Err(refuse(
            "missing_field",
            stem,
            "a scenario names its clauses, its tools and its checks",
        ));
    }
    let mut tools = BTreeSet::new();
    let mut holds = 0;
    for tool in &s.tools {
        if !well_named(&tool.name)
            || tool.name == SENTINEL_TOOL
            || !tools.insert(tool.name.as_str())
        {
            return Err(refuse(
                "invalid_tool",
                stem,
                format!(
                    "tool `{}` is ill-named, reserved or listed twice",
                    tool.name
                ),
            ));
        }
        validate_legs(
            stem,
            &format!("tool `{}`", tool.name),
            &tool.legs,
            &tool.then,
        )?;
        holds += tool.legs.iter().filter(|a| a.hold.is_some()).count();
        if tool.then.hold.is_some() {
            holds += 2;
        }
    }
    let mut methods = BTreeSet::new();
    for m in &s.methods {
        if m.method.is_empty()
            || OWN_METHODS.contains(&m.method.as_str())
            || !methods.insert(m.method.as_str())
        {
            return Err(refuse(
                "invalid_method",
                stem,
                format!(
                    "method `{}` is empty, one the probe answers itself, or listed twice",
                    m.method
                ),
            ));
        }
        unheld_legs(stem, &format!("method `{}`", m.method), &m.legs, &m.then)?;
    }
    let mut uris = BTreeSet::new();
    for r in &s.resources {
        if r.uri.is_empty() || r.uri.contains("{{") || !uris.insert(r.uri.as_str()) {
            return Err(refuse(
                "invalid_resource",
                stem,
                format!(
                    "resource `{}` is empty, holds a placeholder, or is listed twice",
                    r.uri
                ),
            ));
        }
        unheld_legs(stem, &format!("resource `{}`", r.uri), &r.legs, &r.then)?;
    }
    if holds > 1 {
        // One held call per run: the late round has one place to go.
        return Err(refuse(
            "invalid_answer",
            stem,
            "a scenario holds at most one call, in a tool's `legs` (not `then`)",
        ));
    }
    let mut ids = BTreeSet::new();
    for check in &s.checks {
        if !ids.insert(check.id.as_str()) || !is_check_id(&check.id) {
            return Err(refuse(
                "duplicate_check_id",
                stem,
                format!(
                    "check id `{}` is repeated, or neither `mrtr-...` nor a conformance suite id (`sep-<number>-...`)",
                    check.id
                ),
            ));
        }
        validate_check(stem, s, &tools, check)?;
    }
    Ok(())
}

/// `owner`'s answers: at least one leg, each answer well formed.
fn validate_legs(
    stem: &str,
    owner: &str,
    legs: &[Answer],
    then: &Answer,
) -> Result<(), ScenarioError> {
    if legs.is_empty() {
        return Err(refuse(
            "missing_field",
            stem,
            format!("{owner} has no legs"),
        ));
    }
    legs.iter()
        .chain(std::iter::once(then))
        .try_for_each(|answer| validate_answer(stem, answer, false))
}

/// As [`validate_legs`], for what is not a tool's call: none of its answers holds.
fn unheld_legs(
    stem: &str,
    owner: &str,
    legs: &[Answer],
    then: &Answer,
) -> Result<(), ScenarioError> {
    validate_legs(stem, owner, legs, then)?;
    if legs
        .iter()
        .chain(std::iter::once(then))
        .any(|a| a.hold.is_some())
    {
        return Err(refuse(
            "invalid_answer",
            stem,
            format!("{owner}: only a tool's call may be held"),
        ));
    }
    Ok(())
}

/// A check's id: the probe's own (`mrtr-...`), or the conformance suite's for a check the probe
/// runs under the suite's name (`sep-2322-client-request-state-echoed`), so the two reports read
/// line by line.
fn is_check_id(id: &str) -> bool {
    if id.starts_with("mrtr-") {
        return true;
    }
    id.strip_prefix("sep-")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(number, name)| {
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && !name.is_empty()
        })
}

fn validate_answer(stem: &str, a: &Answer, nested: bool) -> Result<(), ScenarioError> {
    let given = [
        a.result.is_some(),
        a.error.is_some(),
        a.raw.is_some(),
        a.sse.is_some(),
        a.close,
        a.hold.is_some(),
    ]
    .iter()
    .filter(|g| **g)
    .count();
    if given != 1
        || (nested && (a.sse.is_some() || a.as_sse || a.close || a.hold.is_some()))
        || (a.as_sse && (a.sse.is_some() || a.close || a.hold.is_some()))
    {
        return Err(refuse(
            "invalid_answer",
            stem,
            "an answer is exactly one of result, error, raw, sse, close and hold (an sse event or a late answer is a message)",
        ));
    }
    if let Some(hold) = &a.hold {
        let notification = hold.notify.as_object().is_some_and(|n| {
            n.get("method").is_some_and(Value::is_string) && !n.contains_key("id")
        });
        if !notification {
            return Err(refuse(
                "invalid_answer",
                stem,
                "a hold's `notify` is a JSON-RPC notification: a `method` string and no `id`",
            ));
        }
        check_value_placeholders(stem, &hold.notify)?;
        validate_answer(stem, &hold.late, true)?;
    }
    if let Some(raw) = &a.raw {
        check_placeholders(stem, raw, true)?;
    }
    for value in [&a.result, &a.error].into_iter().flatten() {
        check_value_placeholders(stem, value)?;
    }
    for event in a.sse.iter().flatten() {
        validate_answer(stem, event, true)?;
    }
    Ok(())
}

fn check_value_placeholders(stem: &str, value: &Value) -> Result<(), ScenarioError> {
    match value {
        Value::String(s) => check_placeholders(stem, s, false),
        Value::Array(items) => items
            .iter()
            .try_for_each(|v| check_value_placeholders(stem, v)),
        Value::Object(members) => members.iter().try_for_each(|(k, v)| {
            check_placeholders(stem, k, false)?;
            check_value_placeholders(stem, v)
        }),
        _ => Ok(()),
    }
}

/// Every `{{` opens a known placeholder closed by `}}`; `{{id}}` only in raw text (in a
/// result the probe writes the id itself).
fn check_placeholders(stem: &str, text: &str, raw: bool) -> Result<(), ScenarioError> {
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = rest.get(open + 2..).unwrap_or_default();
        let Some(close) = after.find("}}") else {
            return Err(refuse("unknown_placeholder", stem, "`{{` without `}}`"));
        };
        let name = after.get(..close).unwrap_or_default();
        let known = PLACEHOLDERS.contains(&name) || repeat_count(name).is_some();
        if !known || (name == "id" && !raw) {
            return Err(refuse(
                "unknown_placeholder",
                stem,
                format!("`{{{{{name}}}}}` is not a placeholder here"),
            ));
        }
        rest = after.get(close + 2..).unwrap_or_default();
    }
    if rest.contains("}}") && !raw {
        return Err(refuse("unknown_placeholder", stem, "`}}` without `{{`"));
    }
    Ok(())
}

fn validate_check(
    stem: &str,
    s: &Scenario,
    tools: &BTreeSet<&str>,
    c: &Check,
) -> Result<(), ScenarioError> {
    let bad = |why: &str| refuse("invalid_check", stem, format!("check `{}`: {why}", c.id));
    let needs_match = matches!(
        c.kind,
        CheckKind::Control | CheckKind::NoRequest | CheckKind::AtMost | CheckKind::AtLeast
    );
    if needs_match != c.matcher.is_some() {
        return Err(bad(
            "`match` is for control, no_request, at_most and at_least checks, which need one",
        ));
    }
    let counted = matches!(c.kind, CheckKind::AtMost | CheckKind::AtLeast);
    if counted != c.n.is_some() || (c.kind == CheckKind::AtLeast && c.n == Some(0)) {
        return Err(bad(
            "`n` is for at_most and at_least (from 1) checks, which need one",
        ));
    }
    let tooled = matches!(c.kind, CheckKind::StateEchoExact | CheckKind::MinGapMs);
    if tooled != c.tool.is_some()
        || (c.kind == CheckKind::StateEchoExact) != c.retry_required.is_some()
    {
        return Err(bad(
            "`tool` is for state_echo_exact (with `retry_required`) and min_gap_ms checks, which need it",
        ));
    }
    if (c.kind == CheckKind::MinGapMs) != c.ms.is_some()
        || c.ms.is_some_and(|ms| ms == 0 || ms > MAX_GAP_MS)
    {
        return Err(bad(&format!(
            "`ms` (1 to {MAX_GAP_MS}) is for min_gap_ms checks, which need it"
        )));
    }
    // A control check may say what a client that sends no matching request did (else: it did
    // not complete the round).
    if matches!(
        c.kind,
        CheckKind::NoRequest | CheckKind::AtMost | CheckKind::AtLeast
    ) && c.says.is_none()
        || !matches!(
            c.kind,
            CheckKind::NoRequest | CheckKind::AtMost | CheckKind::AtLeast | CheckKind::Control
        ) && c.says.is_some()
    {
        return Err(bad(
            "`says` is for no_request, at_most and at_least checks, which need one, and control checks",
        ));
    }
    if let Some(tool) = &c.tool
        && !tools.contains(tool.as_str())
    {
        return Err(bad(&format!("tool `{tool}` is not one of the scenario's")));
    }
    if c.kind == CheckKind::MinGapMs
        && !s
            .tools
            .iter()
            .filter(|t| c.tool.as_ref() == Some(&t.name))
            .any(|t| t.legs.iter().any(Answer::is_state_only))
    {
        return Err(bad(
            "a min_gap_ms check's tool has no state-only round (a `result` with resultType `input_required` and no inputRequests) in its legs",
        ));
    }
    if let Some(m) = &c.matcher {
        validate_match(tools, m).map_err(|why| bad(&why))?;
    }
    if let Some(r) = &c.requires
        && r != DECLARED_FORM_ONLY
        && r != DECLARED_TASKS
        && r != CANCELLED
        && r.strip_prefix("not_unsupported:").is_none_or(str::is_empty)
    {
        return Err(bad(
            "`requires` is `not_unsupported:<what>`, `declared_form_only`, `declared_tasks` or `cancelled`",
        ));
    }
    let holds = s
        .tools
        .iter()
        .any(|t| t.legs.iter().any(|a| a.hold.is_some()));
    if c.requires.as_deref() == Some(CANCELLED) && !holds {
        return Err(bad(
            "`requires: cancelled` needs a scenario that holds a call (`hold`)",
        ));
    }
    Ok(())
}

fn validate_match(tools: &BTreeSet<&str>, m: &Match) -> Result<(), String> {
    if let Some(tool) = &m.tool
        && !tools.contains(tool.as_str())
    {
        return Err(format!("tool `{tool}` is not one of the scenario's"));
    }
    if (m.equals.is_some() || m.has.is_some()) != m.pointer.is_some()
        || (m.equals.is_some() && m.has.is_some())
    {
        return Err("`pointer` goes with exactly one of `equals` and `has`".into());
    }
    if m.arguments_differ_from_first.is_some() && m.tool.is_none() {
        return Err(
            "`arguments_differ_from_first` needs the `tool` whose first call it compares".into(),
        );
    }
    if m.pointer.as_deref().is_some_and(|p| !p.starts_with('/')) {
        return Err("a pointer starts with `/`".into());
    }
    if m.id_differs_from_first.is_some() && m.tool.is_none() {
        return Err("`id_differs_from_first` needs the `tool` whose first call it compares".into());
    }
    let any_of = m.any_of.as_deref().unwrap_or_default();
    if m.any_of.is_some() && any_of.is_empty() {
        return Err("`any_of` is empty".into());
    }
    let all_of = m.all_of.as_deref().unwrap_or_default();
    if m.all_of.is_some() && all_of.is_empty() {
        return Err("`all_of` is empty".into());
    }
    if m.tool.is_none()
        && m.method.is_none()
        && m.state.is_none()
        && m.state_units_at_least.is_none()
        && m.pointer.is_none()
        && m.any_of.is_none()
        && m.all_of.is_none()
    {
        return Err("an empty match matches every request".into());
    }
    any_of
        .iter()
        .chain(all_of)
        .try_for_each(|sub| validate_match(tools, sub))
}

impl Scenario {
    /// The tools a check is about (all the scenario's when it names none).
    pub fn tools_of(&self, check: &Check) -> Vec<String> {
        let mut named = BTreeSet::new();
        if let Some(t) = &check.tool {
            named.insert(t.clone());
        }
        if let Some(m) = &check.matcher {
            m.collect_tools(&mut named);
        }
        if named.is_empty() {
            self.tools.iter().map(|t| t.name.clone()).collect()
        } else {
            self.tools
                .iter()
                .filter(|t| named.contains(&t.name))
                .map(|t| t.name.clone())
                .collect()
        }
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The resource at `uri`.
    pub fn resource(&self, uri: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| r.uri == uri)
    }

    /// What the scenario answers for requests of `method`, if it answers them.
    pub fn method(&self, method: &str) -> Option<&Method> {
        self.methods.iter().find(|m| m.method == method)
    }
}

impl Match {
    fn collect_tools(&self, into: &mut BTreeSet<String>) {
        if let Some(t) = &self.tool {
            into.insert(t.clone());
        }
        for sub in self.any_of.iter().chain(&self.all_of).flatten() {
            sub.collect_tools(into);
        }
    }
}

impl Answer {
    /// A `result` that is a state-only round: resultType `input_required`, no inputRequests.
    pub fn is_state_only(&self) -> bool {
        self.result.as_ref().is_some_and(|r| {
            r.get("resultType").and_then(Value::as_str) == Some("input_required")
                && r.get("inputRequests").is_none()
        })
    }
}

impl Tool {
    /// The answer to leg `leg`.
    pub fn answer(&self, leg: usize) -> &Answer {
        self.legs.get(leg).unwrap_or(&self.then)
    }
}

impl Resource {
    /// The answer to leg `leg`.
    pub fn answer(&self, leg: usize) -> &Answer {
        self.legs.get(leg).unwrap_or(&self.then)
    }
}

impl Method {
    /// The answer to leg `leg`.
    pub fn answer(&self, leg: usize) -> &Answer {
        self.legs.get(leg).unwrap_or(&self.then)
    }
}
