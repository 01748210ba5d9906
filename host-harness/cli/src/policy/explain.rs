//! `mrtr-gate policy explain FILE`: which policy decides a recorded round, and why. A round
//! comes back from a proxy's capture (`--capture CAPTURE --request-id ID`: the call's params
//! and each answer the gate judged) or as the consent view a host was given (`--view VIEW`).
//! A captured answer is made into the view the gate makes of it (a native gate with the
//! call's params registered accepts it); the policies then judge the view as a proxy or a
//! call judges it, and each round's facts, the policies that hold and the decision are shown.

use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::core::{
    ConsentView, DeprecatedMethod, Policy, Registration, RequestId, ResponseVerdict, ServerIdentity,
};
use mrtr_gate_host::shown::shown_text;
use mrtr_gate_host::{HostServices, NativeGate, say};
use mrtr_gate_policy::{Decision, Explanation, Facts, Names, Policies};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every round was explained.
pub const EXIT_EXPLAINED: u8 = 0;
/// No round to explain: the capture holds none for the request, or one could not be remade.
pub const EXIT_NO_ROUND: u8 = 1;
/// Usage: a file that cannot be read, a policy file refused, a view that does not read.
pub const EXIT_USAGE: u8 = 2;

/// The longest capture line read (a longer one is refused, never read whole).
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;
/// The longest view file read.
const MAX_VIEW_BYTES: u64 = 16 * 1024 * 1024;

/// What `policy explain` takes.
#[derive(Clone, Debug)]
pub struct ExplainOptions {
    /// The policy file.
    pub policy: PathBuf,
    /// Where the rounds come from.
    pub source: Source,
    /// The user the policies judge the call of.
    pub user: String,
    /// Their tenant.
    pub tenant: String,
    /// One JSON object on stdout instead of text.
    pub json: bool,
}

/// Where the rounds to explain come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A proxy's `--capture` file: every round of the call minted as `request_id`; `server`
    /// names the server where the capture's lines do not.
    Capture {
        /// The capture file.
        path: PathBuf,
        /// The trail's `request_id` of the call.
        request_id: String,
        /// The server, for a capture whose lines do not name it.
        server: Option<String>,
    },
    /// A consent view (`mrtr-gate/consent-view/v2`), as a host or a consent hook got it.
    View(PathBuf),
}

/// `mrtr-gate policy explain`; the exit status.
pub fn explain(options: &ExplainOptions) -> u8 {
    let policies = match super::load(&options.policy) {
        Ok(p) => p,
        Err(problems) => {
            say!("mrtr-gate: {problems}");
            return EXIT_USAGE;
        }
    };
    let rounds = match &options.source {
        Source::View(path) => read_view(path)
            .map(|v| vec![v])
            .map_err(|e| (EXIT_USAGE, e)),
        Source::Capture {
            path,
            request_id,
            server,
        } => from_capture(path, request_id, server.as_deref()),
    };
    let rounds = match rounds {
        Ok(r) if r.is_empty() => {
            say!("mrtr-gate: no round of that request is in the capture");
            return EXIT_NO_ROUND;
        }
        Ok(r) => r,
        Err((code, e)) => {
            say!("mrtr-gate: {}", shown_text(&e));
            return code;
        }
    };
    let names = Names {
        user: &options.user,
        tenant: &options.tenant,
    };
    let explained: Vec<(ConsentView, Explanation)> = rounds
        .into_iter()
        .map(|view| {
            let e = policies.explain(names, &view);
            (view, e)
        })
        .collect();
    if options.json {
        let rounds: Vec<Value> = explained.iter().map(|(v, e)| round_json(v, e)).collect();
        crate::out!(
            "{}",
            mrtr_gate_host::shown::json_for_terminal(&json!({"rounds": rounds}))
        );
    } else {
        for (view, e) in &explained {
            crate::out!("{}", round_text(view, e, &policies));
        }
    }
    EXIT_EXPLAINED
}

fn read_view(path: &Path) -> Result<ConsentView, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_VIEW_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("--view {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_VIEW_BYTES {
        return Err(format!(
            "--view {}: over {MAX_VIEW_BYTES} bytes",
            path.display()
        ));
    }
    ConsentView::parse(text.trim_end()).map_err(|e| format!("--view {}: {e}", path.display()))
}

/// The server a capture line names (`endpoint:<id>` or a URL).
fn server_named(name: &str) -> Result<ServerIdentity, String> {
    match name.strip_prefix("endpoint:") {
        Some(id) => ServerIdentity::endpoint(id),
        None => ServerIdentity::origin(name),
    }
    .map_err(|e| format!("the server {name:?}: {e}"))
}

/// Whether the capture's `request_id` (a JSON string or number) is `wanted`.
fn is_request(id: &Value, wanted: &str) -> bool {
    match id {
        Value::String(s) => s == wanted,
        Value::Number(n) => n.to_string() == wanted,
        _ => false,
    }
}

/// Every round of the call `request_id` in the capture at `path`, as the gate viewed it.
fn from_capture(
    path: &Path,
    request_id: &str,
    server: Option<&str>,
) -> Result<Vec<ConsentView>, (u8, String)> {
    let file = std::fs::File::open(path)
        .map_err(|e| (EXIT_USAGE, format!("--capture {}: {e}", path.display())))?;
    let mut reader = BufReader::new(file);
    let mut request: Option<(String, Value, Option<String>)> = None;
    let mut views = Vec::new();
    let mut number = 0u32;
    let mut line = Vec::new();
    for at in 1usize.. {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| (EXIT_USAGE, format!("--capture {}: {e}", path.display())))?;
        if read == 0 {
            break;
        }
        if read as u64 > MAX_LINE_BYTES {
            return Err((
                EXIT_USAGE,
                format!(
                    "--capture {}:{at}: a line over {MAX_LINE_BYTES} bytes",
                    path.display()
                ),
            ));
        }
        let Ok(entry) = serde_json::from_slice::<Value>(&line) else {
            return Err((
                EXIT_USAGE,
                format!("--capture {}:{at}: not a capture line", path.display()),
            ));
        };
        if !entry
            .get("request_id")
            .is_some_and(|id| is_request(id, request_id))
        {
            continue;
        }
        match entry.get("kind").and_then(Value::as_str) {
            Some("request") => {
                let method = entry
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let params = entry.get("params").cloned().unwrap_or(Value::Null);
                let named = entry
                    .get("server")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                request = Some((method.to_owned(), params, named));
            }
            Some("answer") => {
                let Some((method, params, named)) = &request else {
                    continue;
                };
                let answer = entry.get("answer").cloned().unwrap_or(Value::Null);
                let kind = answer
                    .get("result")
                    .and_then(|r| r.get("resultType"))
                    .and_then(Value::as_str);
                if kind != Some("input_required") {
                    continue;
                }
                number = number.saturating_add(1);
                let name = server.map(str::to_owned).or_else(|| named.clone()).ok_or((
                    EXIT_USAGE,
                    "the capture does not name the server: give --server".to_owned(),
                ))?;
                let server = server_named(&name).map_err(|e| (EXIT_USAGE, e))?;
                let mut view = view_of(&server, method, params, &answer).map_err(|e| {
                    (
                        EXIT_NO_ROUND,
                        format!("--capture {}:{at}: round {number}: {e}", path.display()),
                    )
                })?;
                view.round = number;
                views.push(view);
            }
            _ => {}
        }
    }
    Ok(views)
}

/// The view the gate makes of `answer` to a `method` call with `params` at `server` (as the
/// round's first: the caller sets its number). Deprecated methods are approved, so a round
/// asking for one is explained rather than refused.
fn view_of(
    server: &ServerIdentity,
    method: &str,
    params: &Value,
    answer: &Value,
) -> Result<ConsentView, String> {
    let id = answer
        .get("id")
        .and_then(RequestId::from_json)
        .ok_or("the answer has no id")?;
    let clock = Arc::new(ManualClock::new(0));
    let mut gate = NativeGate::new(HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Refuse)),
        audit: Arc::new(MemoryAudit::new()),
    });
    gate.register(Registration {
        request_id: id,
        server: server.clone(),
        user: "explain".into(),
        tenant: "explain".into(),
        method: method.into(),
        params_json: params.to_string(),
        policy: Policy {
            allowed_deprecated: vec![
                DeprecatedMethod::SamplingCreateMessage,
                DeprecatedMethod::RootsList,
            ],
            ..Policy::default()
        },
    })
    .map_err(|d| format!("the call does not register: {}", d.message))?;
    match gate.accept_response(server, &answer.to_string()) {
        Ok(ResponseVerdict::InputRequired(round)) => {
            ConsentView::parse(&round.view_json).map_err(|e| e.to_string())
        }
        Ok(_) => Err("the gate took the answer for no round".into()),
        Err(d) => Err(format!(
            "the gate refuses the answer ({}): {}",
            d.code, d.message
        )),
    }
}

fn listed(set: &std::collections::BTreeSet<String>) -> String {
    if set.is_empty() {
        "none".into()
    } else {
        shown_text(&set.iter().cloned().collect::<Vec<_>>().join(", "))
    }
}

fn facts_text(f: &Facts) -> String {
    format!(
        "  kinds: {}; inputs: {} ({})\n  form fields: {} (types {}; formats {}; required {})\n  url hosts: {} (marks {})\n  state: {}; deprecated: {}",
        listed(&f.kinds),
        f.inputs,
        listed(&f.keys),
        listed(&f.form_fields),
        listed(&f.form_types),
        listed(&f.form_formats),
        listed(&f.form_required),
        listed(&f.url_hosts),
        listed(&f.url_marks),
        if f.state {
            format!("{} bytes", f.state_bytes)
        } else {
            "none".into()
        },
        if f.deprecated { "yes" } else { "no" },
    )
}

fn decision_text(d: &Decision) -> String {
    match d {
        Decision::Allow { policy } => format!(
            "allow: consent granted by `{}` (receipt policy:{0})",
            shown_text(policy)
        ),
        Decision::Deny { policy } => {
            format!("deny: refused by `{}` (policy_denied)", shown_text(policy))
        }
        Decision::Ask { policies } if policies.is_empty() => {
            "ask: no policy decides; the configured consent does".into()
        }
        Decision::Ask { policies } => format!(
            "ask: the configured consent decides, as {} says (@ask)",
            shown_text(&policies.join(", "))
        ),
        Decision::Failed { reason } => format!(
            "fail: the policies could not judge the round (policy_failed): {}",
            shown_text(reason)
        ),
        _ => "a decision this build cannot name".into(),
    }
}

fn round_text(view: &ConsentView, e: &Explanation, policies: &Policies) -> String {
    let mut out = format!(
        "round {} of {} `{}` at {}",
        view.round,
        shown_text(&view.request.method),
        shown_text(&view.request.name),
        shown_text(&view.server)
    );
    if let Some(facts) = &e.facts {
        out.push('\n');
        out.push_str(&facts_text(facts));
    }
    let held: Vec<String> = e
        .held
        .iter()
        .map(|h| {
            let effect = match (h.forbid, h.ask) {
                (true, true) => "forbid, @ask",
                (true, false) => "forbid",
                _ => "permit",
            };
            format!("{} ({effect})", shown_text(&h.policy))
        })
        .collect();
    out.push_str(&format!(
        "\n  hold: {} of {} policies{}",
        held.len(),
        policies.ids().len(),
        if held.is_empty() {
            String::new()
        } else {
            format!(": {}", held.join(", "))
        }
    ));
    for error in &e.errors {
        out.push_str(&format!("\n  error: {}", shown_text(error)));
    }
    out.push_str(&format!("\n  decision: {}", decision_text(&e.decision)));
    out
}

fn round_json(view: &ConsentView, e: &Explanation) -> Value {
    let set = |s: &std::collections::BTreeSet<String>| json!(s);
    let facts = e.facts.as_ref().map(|f| {
        json!({"round": f.round, "max_rounds": f.max_rounds, "server": f.server,
            "kinds": set(&f.kinds), "inputs": f.inputs, "keys": set(&f.keys),
            "form_fields": set(&f.form_fields), "form_types": set(&f.form_types),
            "form_formats": set(&f.form_formats), "form_required": set(&f.form_required),
            "url_hosts": set(&f.url_hosts), "url_marks": set(&f.url_marks),
            "state": f.state, "state_bytes": f.state_bytes, "deprecated": f.deprecated})
    });
    let (kind, policy) = match &e.decision {
        Decision::Allow { policy } => ("allow", json!(policy)),
        Decision::Deny { policy } => ("deny", json!(policy)),
        Decision::Ask { policies } => ("ask", json!(policies)),
        Decision::Failed { .. } => ("fail", Value::Null),
        _ => ("other", Value::Null),
    };
    json!({
        "round": view.round,
        "method": view.request.method,
        "name": view.request.name,
        "server": view.server,
        "facts": facts,
        "held": e.held.iter().map(|h| json!({"policy": h.policy, "effect": if h.forbid {"forbid"} else {"permit"}, "ask": h.ask})).collect::<Vec<_>>(),
        "errors": e.errors,
        "decision": {"kind": kind, "policy": policy, "code": e.decision.code()},
    })
}
