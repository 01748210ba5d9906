//! The shared scenario corpus (`tests/corpus/*.json`), its one loader and its runner: scenarios as data, so every host
//! (this one, and later Node, browser and Python hosts) runs the same inputs and expects the
//! same verdicts. The format is documented in `docs/corpus.md`.
//!
//! A scenario is a list of steps over one fresh set of hosts (test clock, in-memory storage,
//! scripted consent, in-memory audit). Each step names an operation and what it must give:
//! `{"ok": {JSON-pointer: value}}`, `{"error": "code"}`, or `{"verdict": ...}`. After the
//! steps, the audit chain must verify and no string in `secrets` may appear in any event.

use crate::fixture::ScenarioHosts;
use mrtr_gate_core::{
    CallerOutcome, ClientRetry, DeprecatedMethod, FinishRequest, Policy, Registration, RequestId,
    ResponseVerdict, RetryRequest, ServerIdentity, Unbound,
};
use mrtr_gate_host::reference_hosts::{AuditFault, ScriptedAnswer, ScriptedConsent};
use mrtr_gate_host::{GateApi, GateDenial};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The corpus of this repository, `tests/corpus/` (its JSON scenarios, and `trails/` with
/// the audit trail each one writes).
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus")
}

/// One scenario of the corpus.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its file name in the corpus folder (`<name>.json`).
    pub file: String,
    /// The scenario as written.
    pub json: Value,
}

fn read_scenario(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every scenario of the corpus (every `*.json` of [`corpus_dir`]), in file-name order.
pub fn all_scenarios() -> Result<Vec<Scenario>, String> {
    let dir = corpus_dir();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|x| x == "json") {
            files.push(path);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            Ok(Scenario {
                file: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                json: read_scenario(&path)?,
            })
        })
        .collect()
}

/// The scenario `tests/corpus/<name>.json`.
pub fn scenario(name: &str) -> Result<Value, String> {
    read_scenario(&corpus_dir().join(format!("{name}.json")))
}

/// Where the recorded audit trail of the scenario in `file` lives:
/// `tests/corpus/trails/<file stem>.jsonl`.
pub fn trail_path(file: &str) -> PathBuf {
    let stem = file.strip_suffix(".json").unwrap_or(file);
    corpus_dir().join("trails").join(format!("{stem}.jsonl"))
}

/// Where the recorded transcript of the scenario in `file` lives:
/// `tests/corpus/transcripts/<file stem>.jsonl` (see [`run_scenario_with`]).
pub fn transcript_path(file: &str) -> PathBuf {
    let stem = file.strip_suffix(".json").unwrap_or(file);
    corpus_dir()
        .join("transcripts")
        .join(format!("{stem}.jsonl"))
}

/// The default server of a scenario.
pub const DEFAULT_SERVER: &str = "https://server.example/mcp";

fn default_params(method: &str) -> Value {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
    });
    match method {
        "resources/read" => json!({"uri": "file:///project/README.md", "_meta": meta}),
        _ => json!({"name": "tool", "arguments": {}, "_meta": meta}),
    }
}

/// Queue the step's `consent` answer, if it names one.
fn queue_consent(step: &Value, consent: &ScriptedConsent) -> Result<(), String> {
    if let Some(answer) = step.get("consent").and_then(Value::as_str) {
        consent.push(match answer {
            "grant" => ScriptedAnswer::Grant,
            "refuse" => ScriptedAnswer::Refuse,
            "other_view" => ScriptedAnswer::GrantOtherView,
            "other_answers" => ScriptedAnswer::GrantOtherAnswers,
            "fail" => ScriptedAnswer::Fail,
            other => return Err(format!("unknown consent `{other}`")),
        });
    }
    Ok(())
}

/// A string field of a step, or its default.
fn text_or(step: &Value, key: &str, default: &str) -> String {
    step.get(key)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_owned()
}

fn id_of(v: &Value) -> Result<RequestId, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(RequestId::Number)
            .ok_or_else(|| format!("id `{v}` is not an integer")),
        Value::String(s) => Ok(RequestId::Text(s.clone())),
        _ => Err(format!("id `{v}` must be a number or a string")),
    }
}

fn server_of(step: &Value) -> Result<ServerIdentity, String> {
    match step.get("server") {
        None => ServerIdentity::origin(DEFAULT_SERVER).map_err(|e| e.to_string()),
        Some(Value::String(s)) => ServerIdentity::origin(s).map_err(|e| e.to_string()),
        Some(v) => match (v.get("origin"), v.get("endpoint")) {
            (Some(Value::String(o)), None) => ServerIdentity::origin(o).map_err(|e| e.to_string()),
            (None, Some(Value::String(e))) => {
                ServerIdentity::endpoint(e).map_err(|e| e.to_string())
            }
            _ => Err(format!("bad server `{v}`")),
        },
    }
}

fn policy_of(step: &Value) -> Result<Policy, String> {
    let mut p = Policy::default();
    let Some(v) = step.get("policy") else {
        return Ok(p);
    };
    if let Some(x) = v.get("lifetime_ms").and_then(Value::as_u64) {
        p.round_trip_lifetime_ms = x;
    }
    if let Some(x) = v.get("max_state_bytes").and_then(Value::as_u64) {
        p.max_request_state_bytes = u32::try_from(x).map_err(|e| e.to_string())?;
    }
    if let Some(x) = v.get("max_rounds").and_then(Value::as_u64) {
        p.max_rounds = u32::try_from(x).map_err(|e| e.to_string())?;
    }
    if let Some(x) = v.get("version").and_then(Value::as_str) {
        p.policy_version = x.to_owned();
    }
    if let Some(list) = v.get("allow").and_then(Value::as_array) {
        for m in list {
            p.allowed_deprecated.push(match m.as_str() {
                Some("roots/list") => DeprecatedMethod::RootsList,
                Some("sampling/createMessage") => DeprecatedMethod::SamplingCreateMessage,
                _ => return Err(format!("unknown deprecated method `{m}`")),
            });
        }
    }
    Ok(p)
}

/// What one operation gave, as JSON the expectations are checked against.
fn outcome<T>(r: Result<T, GateDenial>, ok: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => json!({"ok": ok(v)}),
        Err(d) => {
            json!({"error": d.code.as_str(), "cause": format!("{:?}", d.cause).to_lowercase()})
        }
    }
}

fn check(expect: &Value, got: &Value, at: &str) -> Result<(), String> {
    let fail = |why: String| Err(format!("{at}: {why}; got {got}"));
    if let Some(code) = expect.get("error") {
        if got.get("error") != Some(code) {
            return fail(format!("expected error {code}"));
        }
        if let Some(cause) = expect.get("cause")
            && got.get("cause") != Some(cause)
        {
            return fail(format!("expected cause {cause}"));
        }
        return Ok(());
    }
    let Some(ok) = got.get("ok") else {
        return fail("expected success".into());
    };
    if let Some(fields) = expect.get("ok").and_then(Value::as_object) {
        for (pointer, want) in fields {
            if ok.pointer(pointer) != Some(want) {
                return fail(format!("expected {pointer} = {want}"));
            }
        }
    }
    for pointer in expect
        .get("absent")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if ok.pointer(pointer).is_some() {
            return fail(format!("expected {pointer} absent"));
        }
    }
    Ok(())
}

/// Run one scenario against `gate` over `hosts`. Errors say which step failed and why.
pub fn run_scenario(
    scenario: &Value,
    gate: &mut dyn GateApi,
    hosts: &ScenarioHosts,
) -> Result<(), String> {
    run_scenario_with(scenario, gate, hosts, &mut Vec::new())
}

/// [`run_scenario`], also collecting its transcript: one line per step that calls the gate,
/// what the call gave (`{"ok": ...}` or `{"error": code, "cause": ...}`) in canonical JSON's key
/// order with every number as the gate wrote it (a request carries the client's digits), as
/// every host must give it (`tests/corpus/transcripts/`).
pub fn run_scenario_with(
    scenario: &Value,
    gate: &mut dyn GateApi,
    hosts: &ScenarioHosts,
    transcript: &mut Vec<String>,
) -> Result<(), String> {
    let steps = scenario
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("a scenario needs `steps`")?;
    for (i, step) in steps.iter().enumerate() {
        let op = step.get("op").and_then(Value::as_str).unwrap_or("?");
        let at = format!("step {i} ({op})");
        let got = match op {
            "register" => {
                let method = step
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or("tools/call");
                let params_json = match (step.get("params"), step.get("params_text")) {
                    (_, Some(Value::String(t))) => t.clone(),
                    (Some(p), _) => p.to_string(),
                    _ => default_params(method).to_string(),
                };
                let r = Registration {
                    request_id: id_of(step.get("id").unwrap_or(&Value::Null))?,
                    server: server_of(step)?,
                    user: text_or(step, "user", "alice"),
                    tenant: text_or(step, "tenant", "acme"),
                    method: method.into(),
                    params_json,
                    policy: policy_of(step)?,
                };
                outcome(gate.register(r), |ok| {
                    json!({
                        "request": serde_json::from_str::<Value>(&ok.request_json).unwrap_or(Value::Null),
                        "params_sha256": ok.params_sha256,
                    })
                })
            }
            "respond" => {
                let text = match (step.get("raw"), step.get("result"), step.get("error")) {
                    (Some(Value::String(raw)), _, _) => raw.clone(),
                    (_, Some(result), _) => {
                        json!({"jsonrpc": "2.0", "id": step.get("id"), "result": result})
                            .to_string()
                    }
                    (_, _, Some(error)) => {
                        json!({"jsonrpc": "2.0", "id": step.get("id"), "error": error}).to_string()
                    }
                    _ => return Err(format!("{at}: `respond` needs `raw`, `result` or `error`")),
                };
                let text = match step.get("generate") {
                    Some(g) => generated(&text, g).map_err(|e| format!("{at}: {e}"))?,
                    None => text,
                };
                outcome(
                    gate.accept_response(&server_of(step)?, &text),
                    |v| match v {
                        ResponseVerdict::InputRequired(view) => {
                            let shown = serde_json::from_str::<Value>(&view.view_json)
                                .unwrap_or(Value::Null);
                            // The view is the canonical text of what it shows, and its
                            // digest is the digest of that text: any host can recompute it.
                            let canonical = mrtr_gate_core::canonical::to_canonical(&shown)
                                == view.view_json
                                && mrtr_gate_core::digest::sha256_hex(view.view_json.as_bytes())
                                    == view.view_sha256;
                            json!({
                                "verdict": "input_required",
                                "round": view.round,
                                "input_keys": view.input_keys,
                                "request_state_sha256": view.request_state_sha256,
                                "view": shown,
                                "view_sha256": view.view_sha256,
                                "view_is_canonical": canonical,
                            })
                        }
                        ResponseVerdict::Complete => json!({"verdict": "complete"}),
                        ResponseVerdict::Error(code) => json!({"verdict": "error", "code": code}),
                    },
                )
            }
            "retry" => {
                queue_consent(step, &hosts.consent).map_err(|e| format!("{at}: {e}"))?;
                let responses_json = match (step.get("responses"), step.get("responses_text")) {
                    (_, Some(Value::String(t))) => t.clone(),
                    (Some(r), _) => r.to_string(),
                    _ => "{}".into(),
                };
                let r = RetryRequest {
                    server: server_of(step)?,
                    request_id: id_of(step.get("id").unwrap_or(&Value::Null))?,
                    retry_id: id_of(step.get("retry_id").unwrap_or(&Value::Null))?,
                    user: text_or(step, "user", "alice"),
                    tenant: text_or(step, "tenant", "acme"),
                    responses_json,
                };
                outcome(gate.build_retry(r), |ok| {
                    json!({
                        "request": serde_json::from_str::<Value>(&ok.request_json).unwrap_or(Value::Null),
                        "round": ok.round,
                        "consent_receipt_id": ok.consent_receipt_id,
                    })
                })
            }
            "retry_from_client" => {
                queue_consent(step, &hosts.consent).map_err(|e| format!("{at}: {e}"))?;
                let method = step
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or("tools/call");
                let params_json = match (step.get("params"), step.get("params_text")) {
                    (_, Some(Value::String(t))) => t.clone(),
                    (Some(p), _) => p.to_string(),
                    _ => return Err(format!("{at}: `retry_from_client` needs `params`")),
                };
                let request_id = match step.get("id") {
                    None | Some(Value::Null) => None,
                    Some(id) => Some(id_of(id)?),
                };
                let r = ClientRetry {
                    server: server_of(step)?,
                    request_id,
                    retry_id: id_of(step.get("retry_id").unwrap_or(&Value::Null))?,
                    user: text_or(step, "user", "alice"),
                    tenant: text_or(step, "tenant", "acme"),
                    method: method.into(),
                    params_json,
                };
                outcome(gate.retry_from_client(r), |ok| {
                    json!({
                        "request": serde_json::from_str::<Value>(&ok.request_json).unwrap_or(Value::Null),
                        "round": ok.round,
                        "consent_receipt_id": ok.consent_receipt_id,
                    })
                })
            }
            "refuse_unbound" => {
                let refusal = match step.get("refusal").and_then(Value::as_str) {
                    Some("server_request") => Unbound::ServerRequest(
                        step.get("method")
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                format!("{at}: a `server_request` refusal needs `method`")
                            })?
                            .to_owned(),
                    ),
                    Some("input_required") => Unbound::InputRequired,
                    Some("input_requests_notified") => Unbound::InputRequestsNotified,
                    Some("input_responses") => Unbound::InputResponses,
                    other => {
                        return Err(format!(
                            "{at}: `refuse_unbound` needs a known `refusal`, not {other:?}"
                        ));
                    }
                };
                let denial = gate.refuse_unbound(
                    &server_of(step)?,
                    &text_or(step, "user", "alice"),
                    &text_or(step, "tenant", "acme"),
                    &refusal,
                );
                outcome(Err::<(), _>(denial), |()| Value::Null)
            }
            "finish" => {
                let outcome_in = match (
                    step.get("policy_denied").and_then(Value::as_str),
                    step.get("outcome").and_then(Value::as_str),
                ) {
                    (Some(policy), _) => CallerOutcome::PolicyDenied(policy.to_owned()),
                    (None, Some("cancelled") | None) => CallerOutcome::Cancelled,
                    (None, Some(reason)) => CallerOutcome::Error(reason.to_owned()),
                };
                let r = FinishRequest {
                    server: server_of(step)?,
                    request_id: id_of(step.get("id").unwrap_or(&Value::Null))?,
                    user: text_or(step, "user", "alice"),
                    tenant: text_or(step, "tenant", "acme"),
                    outcome: outcome_in,
                };
                outcome(gate.finish(r), |t| json!({"outcome": t.as_str()}))
            }
            "expire_stale" => outcome(gate.expire_stale(), |n| json!({"ended": n})),
            "advance_clock" => {
                hosts
                    .clock
                    .advance(step.get("ms").and_then(Value::as_u64).unwrap_or(0));
                continue;
            }
            "fault" => {
                if let Some(f) = step.get("audit").and_then(Value::as_str) {
                    hosts.audit.set_fault(match f {
                        "none" => AuditFault::None,
                        "fail_append" => AuditFault::FailAppend,
                        "corrupt_readback" => AuditFault::CorruptReadback,
                        "lose_writes" => AuditFault::LoseWrites,
                        "fail_readback" => AuditFault::FailReadback,
                        other => return Err(format!("{at}: unknown audit fault `{other}`")),
                    });
                }
                if let Some(f) = step.get("storage").and_then(Value::as_str) {
                    hosts.storage.set_failing(f == "fail");
                    hosts.storage.set_losing_cas(f == "lose_cas");
                    hosts.storage.set_failing_deletes(f == "fail_deletes");
                }
                if let Some(f) = step.get("clock").and_then(Value::as_str) {
                    hosts.set_clock_wrapped(match f {
                        "none" => false,
                        "wrapped_negative" => true,
                        other => return Err(format!("{at}: unknown clock fault `{other}`")),
                    });
                }
                if let Some(n) = step.get("lose_cas_after") {
                    let n = n
                        .as_u64()
                        .ok_or_else(|| format!("{at}: `lose_cas_after` takes a count"))?;
                    hosts.storage.lose_cas_after(n);
                }
                continue;
            }
            other => return Err(format!("{at}: unknown op `{other}`")),
        };
        let expect = step
            .get("expect")
            .cloned()
            .unwrap_or_else(|| json!({"ok": {}}));
        transcript.push(mrtr_gate_core::canonical::to_sent_form(&got));
        if got.pointer("/ok/view_is_canonical") == Some(&Value::Bool(false)) {
            return Err(format!(
                "{at}: the consent view is not canonical json with its digest"
            ));
        }
        check(&expect, &got, &at)?;
    }
    check_trail(scenario, hosts)
}

/// The placeholder a `generate` step field is written in place of: a string no scenario
/// holds (serde_json writes the NUL as `\u0000`).
const GENERATED: &str = "\u{0}mrtr-generated";

/// `text` with the string [`GENERATED`] replaced by the JSON text `generate` describes:
/// `{"string_bytes": N}` (a string of N `a`s), `{"depth": D}` (D nested arrays around `1`)
/// or `{"values": K}` (an array of K ones): large results without large scenario files.
fn generated(text: &str, generate: &Value) -> Result<String, String> {
    let placeholder = serde_json::to_string(GENERATED).map_err(|e| e.to_string())?;
    if !text.contains(&placeholder) {
        return Err(format!(
            "`generate` needs the placeholder {placeholder} in the message"
        ));
    }
    let size = |k: &str| {
        generate
            .get(k)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let made = if let Some(n) = size("string_bytes") {
        format!("\"{}\"", "a".repeat(n))
    } else if let Some(d) = size("depth") {
        format!("{}1{}", "[".repeat(d), "]".repeat(d))
    } else if let Some(k) = size("values") {
        format!("[{}]", vec!["1"; k].join(","))
    } else {
        return Err(format!("unknown `generate` {generate}"));
    };
    Ok(text.replacen(&placeholder, &made, 1))
}

/// The checks every scenario ends with: the chain verifies, every line is canonical JSON, no
/// secret reached the trail, and the events named in `audit` occurred as many times as said.
fn check_trail(scenario: &Value, hosts: &ScenarioHosts) -> Result<(), String> {
    let entries = hosts.audit.entries();
    mrtr_gate_core::audit::verify_chain(entries.iter().map(|e| e.line.as_str()))
        .map_err(|b| format!("the audit chain is broken: {b:?}"))?;
    // Every line is canonical JSON (RFC 8785): any host recomputes its digest from its text.
    for e in &entries {
        let parsed: Value = serde_json::from_str(&e.line)
            .map_err(|err| format!("an audit line does not parse ({err}): {}", e.line))?;
        if mrtr_gate_core::canonical::to_canonical(&parsed) != e.line {
            return Err(format!("an audit line is not canonical JSON: {}", e.line));
        }
    }
    for secret in scenario
        .get("secrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if let Some(e) = entries.iter().find(|e| e.line.contains(secret)) {
            return Err(format!(
                "the secret `{secret}` reached the audit trail: {}",
                e.line
            ));
        }
    }
    if let Some(counts) = scenario.get("audit").and_then(Value::as_object) {
        let events = hosts.audit.events();
        for (kind, want) in counts {
            let n = events
                .iter()
                .filter(|e| {
                    let k = e.get("event").and_then(Value::as_str).unwrap_or("");
                    let o = e.get("outcome").and_then(Value::as_str).unwrap_or("");
                    kind == k || *kind == format!("{k}:{o}")
                })
                .count();
            if Some(n as u64) != want.as_u64() {
                return Err(format!("expected {want} `{kind}` audit events, found {n}"));
            }
        }
    }
    Ok(())
}
