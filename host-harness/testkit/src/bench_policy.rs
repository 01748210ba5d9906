//! `mrtr-gate-testkit bench-policy` (issue 42): what the operator's policies cost per round.
//! Rounds the native gate accepted (a form, a URL, a state-only round), judged by 1 policy and
//! by 100 through [`Decider::judge`], what a proxy calls for every round it accepts (the view
//! parsed, the Cedar request and entities made, the policies its action and resource can meet
//! decided from the facts or evaluated): on the example shapes (each with its own id and
//! constants, most of them global), on the same policies each evaluated by Cedar with the
//! request checked against the schema (the cost before the scope index and the guards, in the
//! same run), on per-tool policies, and on the example shapes each opened by a test only Cedar
//! evaluates. Each
//! judgement timed on its own; p50, p99 and the mean. Prints figures, never a verdict: the
//! goal is in docs/performance.md.

use crate::fixture::ScenarioHosts;
use crate::timed::percentile;
use mrtr_gate_host::core::{Policy, Registration, RequestId, ResponseVerdict, ServerIdentity};
use mrtr_gate_host::{GateApi, NativeGate, Principal};
use mrtr_gate_policy::{Decider, Decision, Policies};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Untimed judgements before timing.
const WARM: usize = 1_000;

/// The view (and its digest) the gate makes of `result` answering a `tools/call` of `tool`.
fn view(tool: &str, result: Value) -> Result<(String, String), String> {
    let mut gate = NativeGate::new(ScenarioHosts::new().services());
    let server = ServerIdentity::endpoint("https://mcp.example/mcp").map_err(|e| e.to_string())?;
    let params = json!({"name": tool, "arguments": {"n": 1}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}}});
    gate.register(Registration {
        request_id: RequestId::Text("r1".into()),
        server: server.clone(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: params.to_string(),
        policy: Policy::default(),
    })
    .map_err(|d| d.to_string())?;
    let answer = json!({"jsonrpc": "2.0", "id": "r1", "result": result});
    match gate.accept_response(&server, &answer.to_string()) {
        Ok(ResponseVerdict::InputRequired(round)) => Ok((round.view_json, round.view_sha256)),
        other => Err(format!("not a round: {other:?}")),
    }
}

/// The three rounds.
fn rounds() -> Result<Vec<(&'static str, String, String)>, String> {
    let form = json!({"resultType": "input_required", "inputRequests": {"passenger": {
        "method": "elicitation/create", "params": {"mode": "form", "message": "Who flies?",
        "requestedSchema": {"type": "object", "properties": {
            "full_name": {"type": "string"}, "email": {"type": "string", "format": "email"},
            "seat": {"type": "string", "enum": ["window", "aisle"]}}, "required": ["full_name"]}}}}});
    let url = json!({"resultType": "input_required", "inputRequests": {"payment": {
        "method": "elicitation/create", "params": {"mode": "url", "message": "Pay",
        "url": "https://pay.example.com/session/42", "elicitationId": "e1"}}}});
    let state = json!({"resultType": "input_required", "requestState": "step-2"});
    let mut out = Vec::new();
    for (name, tool, result) in [
        ("form", "book_flight", form),
        ("url", "pay", url),
        ("state-only", "continue_job", state),
    ] {
        let (json, sha) = view(tool, result)?;
        out.push((name, json, sha));
    }
    Ok(out)
}

/// `n` policies: the example shapes in turn, each with its own id and constants, so none is a
/// copy Cedar could share.
fn policies(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let _ = match i % 4 {
            0 => writeln!(
                text,
                "@id(\"url-{i}\") forbid (principal, action, resource) when {{ context.kinds.contains(\"url\") && ![\"pay{i}.example.com\", \"pay.example.com\"].containsAll(context.url_hosts) }};"
            ),
            1 => writeln!(
                text,
                "@id(\"secret-{i}\") @ask forbid (principal, action, resource) when {{ context.form_fields.containsAny([\"password{i}\", \"token{i}\", \"secret\"]) }};"
            ),
            2 => writeln!(
                text,
                "@id(\"state-{i}\") forbid (principal, action, resource) when {{ context.inputs == 0 && context.state }} unless {{ resource in Mrtr::Server::\"endpoint:https://mcp.example/mcp\" && context.state_bytes <= {} }};",
                65_536 + i
            ),
            _ => writeln!(
                text,
                "@id(\"tool-{i}\") permit (principal in Mrtr::Tenant::\"acme\", action == Mrtr::Action::\"tools/call\", resource == Mrtr::Tool::\"tool{i}\") when {{ context.round <= {} }};",
                1 + i % 3
            ),
        };
    }
    text
}

/// The example shapes, each condition opened by a test no guard takes (`like`, which Cedar
/// alone evaluates): policies outside what the facts decide, each evaluated by Cedar for every
/// round its scope admits. The cost of a file written in the rest of the language.
fn cedar_policies(n: usize) -> String {
    policies(n).replace("when {", "when { context.server like \"*\" &&")
}

/// `n` policies each scoped to one tool (`resource == Mrtr::Tool::"tool{i}"`), none the
/// rounds call: per-tool rules, which the scope index files away from every other tool's
/// rounds.
fn per_tool_policies(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let _ = writeln!(
            text,
            "@id(\"only-{i}\") forbid (principal, action == Mrtr::Action::\"tools/call\", resource == Mrtr::Tool::\"tool{i}\") when {{ context.kinds.contains(\"url\") && !context.url_hosts.contains(\"pay{i}.example.com\") }};"
        );
    }
    text
}

fn label(decision: &Decision) -> &'static str {
    match decision {
        Decision::Allow { .. } => "allow",
        Decision::Deny { .. } => "deny",
        Decision::Ask { .. } => "ask",
        Decision::Failed { .. } => "failed",
        _ => "other",
    }
}

/// `rounds_each` timed judgements of each of `views` by `judge`: p50, p99, mean (us), and the
/// decisions seen.
fn timed(
    rounds_each: usize,
    views: &[(&'static str, String, String)],
    mut judge: impl FnMut(&str, &str) -> Decision,
) -> (f64, f64, f64, Vec<String>) {
    for (_, json, sha) in views.iter().cycle().take(WARM) {
        std::hint::black_box(judge(json, sha));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut times = Vec::with_capacity(rounds_each * views.len());
    for _ in 0..rounds_each {
        for (name, json, sha) in views {
            let started = Instant::now();
            let decision = judge(json, sha);
            times.push(started.elapsed().as_secs_f64() * 1e6);
            seen.insert(format!("{name} {}", label(&decision)));
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    (
        percentile(&mut times.clone(), 0.5),
        percentile(&mut times, 0.99),
        mean,
        seen.into_iter().collect(),
    )
}

/// `rounds` timed judgements of each round per policy count, in four ways: `Decider::judge`
/// (what a proxy calls) on the example shapes, the same policies each evaluated by Cedar with
/// the request checked against the schema (what a decision cost before the scope index and the
/// guards), `Decider::judge` on per-tool policies, and on the example shapes each opened by a
/// test only Cedar evaluates. The report (markdown).
pub fn run(rounds_each: usize, counts: &[usize]) -> Result<String, String> {
    let views = rounds()?;
    let bound = Principal {
        user: "alice".into(),
        tenant: "acme".into(),
    };
    let mut out = format!(
        "| per round ({rounds_each} of each: form, url, state-only) | p50 | p99 | mean | decisions |\n|---|---|---|---|---|\n"
    );
    for &n in counts {
        let noun = if n == 1 { "policy" } else { "policies" };
        for (way, text) in [
            ("`Decider::judge`", policies(n)),
            (
                "every policy evaluated, the request schema-checked",
                policies(n),
            ),
            ("`Decider::judge`, per-tool", per_tool_policies(n)),
            (
                "`Decider::judge`, each opened by a test only Cedar evaluates",
                cedar_policies(n),
            ),
        ] {
            let loaded = Policies::parse(&text).map_err(|e| e.to_string())?;
            let (p50, p99, mean, decisions) =
                if way.starts_with("every") {
                    let names = mrtr_gate_policy::Names {
                        user: "alice",
                        tenant: "acme",
                    };
                    timed(rounds_each, &views, |json, _| {
                        match mrtr_gate_host::core::ConsentView::parse(json) {
                            Ok(view) => loaded.decide_unscoped(names, &view),
                            Err(e) => Decision::Failed {
                                reason: e.to_string(),
                            },
                        }
                    })
                } else {
                    let decider = Decider::new(loaded, Duration::from_secs(600));
                    decider.know(&bound, "alice", "acme");
                    timed(rounds_each, &views, |json, sha| {
                        decider.judge(&bound, json, sha)
                    })
                };
            let _ = writeln!(
                out,
                "| {n} {noun}: {way} | {p50:.1} us | {p99:.1} us | {mean:.1} us | {} |",
                decisions.join(", ")
            );
        }
    }
    Ok(out)
}
