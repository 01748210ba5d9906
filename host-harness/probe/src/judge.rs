//! The checks, over a finished recording: each is SUCCESS, FAILURE (saying what the client
//! did) or SKIPPED (what the client said it cannot do). Preconditions come first: a client the
//! hang guard ended fails every check, and a check whose tool was never called fails (the
//! conformance suite's convention: a client that did nothing proved nothing).

use crate::json_text::{decode_string, raw_member, show_units};

/// Where a 2026-07-28 request declares the client's elicitation modes.
const DECLARED_ELICITATION: &str =
    "/params/_meta/io.modelcontextprotocol~1clientCapabilities/elicitation";

/// Where a 2026-07-28 request declares the tasks extension (`io.modelcontextprotocol/tasks`).
const DECLARED_TASKS_EXTENSION: &str = "/params/_meta/io.modelcontextprotocol~1clientCapabilities/extensions/io.modelcontextprotocol~1tasks";

/// A state longer than this is shown cut, with its length.
const SHOWN_UNITS: usize = 200;

/// A state for a report: whole when short, else its start and its length.
fn show_state(units: &[u16]) -> String {
    match units.get(..SHOWN_UNITS) {
        Some(start) if units.len() > SHOWN_UNITS => {
            format!("{}… ({} UTF-16 units)", show_units(start), units.len())
        }
        _ => show_units(units),
    }
}
use crate::record::{Recording, Request};
use crate::respond::{Fill, Reply, reply};
use crate::scenario::{
    CANCELLED, Check, CheckKind, DECLARED_FORM_ONLY, DECLARED_TASKS, Match, Scenario,
};
use serde_json::{Value, json};

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The client did what a safe client does.
    Success,
    /// It did not (or never reached the check).
    Failure,
    /// It said it cannot do what the check needs.
    Skipped,
}

impl Status {
    /// The word printed (the conformance suite's).
    pub fn word(self) -> &'static str {
        match self {
            Status::Success => "SUCCESS",
            Status::Failure => "FAILURE",
            Status::Skipped => "SKIPPED",
        }
    }
}

/// One check's verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The check's id.
    pub id: String,
    /// The check's description.
    pub description: String,
    /// The outcome.
    pub status: Status,
    /// What the client did (FAILURE), or why it was skipped.
    pub message: Option<String>,
    /// The evidence, as JSON.
    pub details: Value,
}

/// Judges every check of `scenario` over `recording` (`canary`: the run's canary port).
pub fn judge(scenario: &Scenario, recording: &Recording, canary: u16) -> Vec<Verdict> {
    scenario
        .checks
        .iter()
        .map(|check| {
            let (status, message, details) = verdict(scenario, check, recording, canary);
            Verdict {
                id: check.id.clone(),
                description: check.description.clone(),
                status,
                message,
                details,
            }
        })
        .collect()
}

/// Every check of `scenario` SKIPPED for `why` (a scenario that was not run).
pub fn skip_all(scenario: &Scenario, why: &str) -> Vec<Verdict> {
    scenario
        .checks
        .iter()
        .map(|check| Verdict {
            id: check.id.clone(),
            description: check.description.clone(),
            status: Status::Skipped,
            message: Some(why.to_owned()),
            details: json!({"notRun": why}),
        })
        .collect()
}

type Outcome = (Status, Option<String>, Value);

fn fail(message: String, details: Value) -> Outcome {
    (Status::Failure, Some(message), details)
}

fn verdict(scenario: &Scenario, check: &Check, rec: &Recording, canary: u16) -> Outcome {
    if rec.timed_out {
        return fail(
            format!(
                "the client had not exited after {} ms; the hang guard ended it",
                rec.duration_ms
            ),
            json!({"timedOut": true}),
        );
    }
    if rec.lingering {
        return fail(
            "a connection to the probe stayed open after the client's process tree had exited (a process outside it still talks to the server); the hang guard ended the wait".into(),
            json!({"lingering": true}),
        );
    }
    if let Some(what) = check
        .requires
        .as_deref()
        .and_then(|r| r.strip_prefix("not_unsupported:"))
        && rec.unsupported.iter().any(|u| u == what)
    {
        return (
            Status::Skipped,
            Some(format!("the client says it does not support {what}")),
            json!({}),
        );
    }
    if check.requires.as_deref() == Some(CANCELLED) && rec.unsupported.iter().any(|u| u == "cancel")
    {
        return (
            Status::Skipped,
            Some("the client says it does not support cancel".into()),
            json!({}),
        );
    }
    let tools = scenario.tools_of(check);
    for tool in &tools {
        if rec.calls_of(tool).next().is_none() {
            return fail(
                format!(
                    "the client never called `{tool}` (exit code {})",
                    show_exit(rec.exit_code)
                ),
                json!({"toolCalled": false}),
            );
        }
    }
    if check.requires.as_deref() == Some(DECLARED_FORM_ONLY)
        && let Some(declared) = tools
            .iter()
            .filter_map(|t| rec.calls_of(t).next())
            .find_map(|first| {
                first
                    .value
                    .as_ref()
                    .and_then(|v| v.pointer(DECLARED_ELICITATION))
                    .filter(|e| e.get("url").is_some())
            })
    {
        return (
            Status::Skipped,
            Some(format!(
                "the client declared URL elicitation on its call (`elicitation` = {declared}): it could not be made to declare form only"
            )),
            json!({"declaredElicitation": declared}),
        );
    }
    if check.requires.as_deref() == Some(DECLARED_TASKS)
        && let Some(tool) = tools.iter().find(|t| {
            rec.calls_of(t).next().is_none_or(|first| {
                first
                    .value
                    .as_ref()
                    .and_then(|v| v.pointer(DECLARED_TASKS_EXTENSION))
                    .is_none()
            })
        })
    {
        return (
            Status::Skipped,
            Some(format!(
                "the client did not declare the tasks extension (`io.modelcontextprotocol/tasks`) on its call of `{tool}`: no task was its to drive"
            )),
            json!({"declaredTasks": false}),
        );
    }
    if check.requires.as_deref() == Some(CANCELLED) {
        if let Some(outcome) = unless_cancelled(rec) {
            return outcome;
        }
        let (status, message, mut details) = judge_kind(scenario, check, rec, canary);
        if let (Some(hold), Some(members)) = (&rec.hold, details.as_object_mut()) {
            members.insert("cancelled".into(), json!(hold.cancelled));
            let late = hold.late_on.and_then(|seq| rec.requests.get(seq));
            members.insert("lateRoundOn".into(), json!(late.map(Request::describe)));
        }
        return (status, message, details);
    }
    judge_kind(scenario, check, rec, canary)
}

fn judge_kind(scenario: &Scenario, check: &Check, rec: &Recording, canary: u16) -> Outcome {
    match check.kind {
        CheckKind::MinGapMs => min_gap(scenario, check, rec),
        CheckKind::Control => control(check, rec),
        CheckKind::NoRequest => no_request(check, rec),
        CheckKind::AtMost => at_most(check, rec),
        CheckKind::AtLeast => at_least(check, rec),
        CheckKind::StateEchoExact => state_echo(scenario, check, rec, canary),
        CheckKind::NoCanary => match rec.canary.first() {
            None => (Status::Success, None, json!({"canaryConnections": 0})),
            Some(hit) => fail(
                format!(
                    "the client connected to the canary {} time(s) (a fetch of a URL it was only to show); first line: {:?}",
                    rec.canary.len(),
                    hit.first_line
                ),
                json!({"canaryConnections": rec.canary.len(), "firstLine": hit.first_line}),
            ),
        },
        CheckKind::NoOpen => match rec.opened.first() {
            None => (Status::Success, None, json!({"opened": []})),
            Some(first) => fail(
                format!("the client handed a URL to an opener: `{first}`"),
                json!({"opened": rec.opened}),
            ),
        },
    }
}

fn show_exit(code: Option<i32>) -> String {
    code.map_or_else(|| "none: ended by a signal".into(), |c| c.to_string())
}

/// A call's `params.arguments`; absent ones are `{}` (MCP's "no arguments").
fn arguments_of(r: &Request) -> Value {
    r.value
        .as_ref()
        .and_then(|v| v.pointer("/params/arguments"))
        .cloned()
        .unwrap_or_else(|| json!({}))
}

/// Whether `m` holds for `r`, one of `rec`'s requests.
pub fn matches(m: &Match, r: &Request, rec: &Recording) -> bool {
    let tool = m.tool.as_ref().is_none_or(|t| r.tool.as_ref() == Some(t));
    let method = m
        .method
        .as_ref()
        .is_none_or(|x| r.method.as_ref() == Some(x));
    let state = m
        .state
        .as_ref()
        .is_none_or(|s| r.state.as_deref() == Some(&s.encode_utf16().collect::<Vec<_>>()[..]));
    let long = m
        .state_units_at_least
        .is_none_or(|at_least| r.state.as_ref().is_some_and(|s| s.len() >= at_least));
    let member = m.pointer.as_ref().is_none_or(|p| {
        let found = r.value.as_ref().and_then(|v| v.pointer(p));
        match (&m.equals, m.has) {
            (Some(expected), _) => found == Some(expected),
            (None, Some(has)) => found.is_some() == has,
            (None, None) => true,
        }
    });
    let any = m
        .any_of
        .as_ref()
        .is_none_or(|subs| subs.iter().any(|s| matches(s, r, rec)));
    let all = m
        .all_of
        .as_ref()
        .is_none_or(|subs| subs.iter().all(|s| matches(s, r, rec)));
    let other_id = m.id_differs_from_first.is_none_or(|differ| {
        let first = m.tool.as_deref().and_then(|t| rec.calls_of(t).next());
        let id = |q: &Request| q.value.as_ref().and_then(|v| v.get("id")).cloned();
        first.is_none_or(|f| id(f) != id(r)) == differ
    });
    let differ = m.arguments_differ_from_first.is_none_or(|differ| {
        let first = m
            .tool
            .as_deref()
            .and_then(|t| rec.calls_of(t).find(|c| !c.has_state));
        // With no first call to compare with, every call's arguments are "other".
        first.is_none_or(|f| arguments_of(f) != arguments_of(r)) == differ
    });
    tool && method && state && long && member && any && all && other_id && differ
}

/// What a request carried that matters for MRTR, for a report.
fn evidence(r: &Request) -> Value {
    let responses = r
        .value
        .as_ref()
        .and_then(|v| v.pointer("/params/inputResponses"))
        .cloned();
    json!({
        "request": r.describe(),
        "requestState": r.state.as_deref().map(show_state),
        "inputResponses": responses,
    })
}

fn evidence_line(r: &Request) -> String {
    let mut line = r.describe();
    if let Some(responses) = r
        .value
        .as_ref()
        .and_then(|v| v.pointer("/params/inputResponses"))
    {
        line.push_str(&format!(", inputResponses = {responses}"));
    }
    if let Some(state) = &r.state {
        line.push_str(&format!(", requestState {}", show_state(state)));
    } else if r.has_state {
        line.push_str(", requestState (not a string)");
    }
    line
}

fn control(check: &Check, rec: &Recording) -> Outcome {
    let Some(m) = &check.matcher else {
        return fail("the check has no match".into(), json!({}));
    };
    let matched: Vec<&Request> = rec.requests.iter().filter(|r| matches(m, r, rec)).collect();
    match matched.as_slice() {
        [one] => (Status::Success, None, evidence(one)),
        [] => fail(
            check.says.as_deref().map_or_else(
                || "the client did not complete the well-formed round (no retry with its state and answer)".to_owned(),
                |says| format!("the client {says}"),
            ),
            json!({"matched": 0}),
        ),
        many => fail(
            format!("the client sent {} retries completing the round, where one was expected", many.len()),
            json!({"matched": many.iter().map(|r| evidence(r)).collect::<Vec<_>>()}),
        ),
    }
}

fn no_request(check: &Check, rec: &Recording) -> Outcome {
    let Some(m) = &check.matcher else {
        return fail("the check has no match".into(), json!({}));
    };
    match rec.requests.iter().find(|r| matches(m, r, rec)) {
        None => (Status::Success, None, json!({"matched": 0})),
        Some(first) => fail(
            format!(
                "the client {}: {}",
                check
                    .says
                    .as_deref()
                    .unwrap_or("sent a request it should not have"),
                evidence_line(first)
            ),
            evidence(first),
        ),
    }
}

fn at_most(check: &Check, rec: &Recording) -> Outcome {
    let (Some(m), Some(n)) = (&check.matcher, check.n) else {
        return fail("the check has no match or no n".into(), json!({}));
    };
    let matched: Vec<&Request> = rec.requests.iter().filter(|r| matches(m, r, rec)).collect();
    if matched.len() <= n {
        return (Status::Success, None, json!({"matched": matched.len()}));
    }
    fail(
        format!(
            "the client {}: {} requests where at most {n} may be; the last: {}",
            check.says.as_deref().unwrap_or("sent too many requests"),
            matched.len(),
            matched.last().map(|r| evidence_line(r)).unwrap_or_default()
        ),
        json!({"matched": matched.iter().map(|r| evidence(r)).collect::<Vec<_>>()}),
    )
}

fn at_least(check: &Check, rec: &Recording) -> Outcome {
    let (Some(m), Some(n)) = (&check.matcher, check.n) else {
        return fail("the check has no match or no n".into(), json!({}));
    };
    let matched: Vec<&Request> = rec.requests.iter().filter(|r| matches(m, r, rec)).collect();
    if matched.len() >= n {
        return (Status::Success, None, json!({"matched": matched.len()}));
    }
    fail(
        format!(
            "the client {}: {} matching request(s) where at least {n} must be",
            check.says.as_deref().unwrap_or("sent too few requests"),
            matched.len(),
        ),
        json!({"matched": matched.iter().map(|r| evidence(r)).collect::<Vec<_>>()}),
    )
}

/// The state the tool's leg 0 answer gave, as UTF-16 units.
fn leg0_state(scenario: &Scenario, tool: &str, canary: u16) -> Option<Vec<u16>> {
    let answer = scenario.tool(tool)?.answer(0);
    let text = match reply(
        answer,
        &Fill {
            id: "1",
            canary,
            leg: 0,
        },
    ) {
        Reply::Json(text) => text,
        Reply::Sse(events) => events.into_iter().next()?,
        Reply::Close | Reply::Hold { .. } => return None,
    };
    decode_string(raw_member(&text, &["result", "requestState"])?)
}

fn state_echo(scenario: &Scenario, check: &Check, rec: &Recording, canary: u16) -> Outcome {
    let tool = check.tool.as_deref().unwrap_or_default();
    let Some(expected) = leg0_state(scenario, tool, canary) else {
        return fail(
            format!("the scenario's round for `{tool}` has no string requestState"),
            json!({}),
        );
    };
    let retries: Vec<&Request> = rec.calls_of(tool).filter(|r| r.has_state).collect();
    let shown = show_state(&expected);
    if let Some(wrong) = retries
        .iter()
        .find(|r| r.state.as_deref() != Some(&expected[..]))
    {
        return fail(
            format!(
                "the client changed the state: sent {} where the round's was {shown}",
                {
                    wrong
                        .state
                        .as_deref()
                        .map_or_else(|| "a requestState that is not a string".into(), show_state)
                }
            ),
            json!({"expected": shown, "sent": evidence(wrong)}),
        );
    }
    match (retries.len(), check.retry_required.unwrap_or(true)) {
        (0, true) => fail(
            format!("the client sent no retry of a well-formed round (state {shown})"),
            json!({"expected": shown, "retries": 0}),
        ),
        (0, false) => (
            Status::Success,
            Some("refused the round (no retry)".into()),
            json!({"expected": shown, "retries": 0}),
        ),
        (n, _) => (
            Status::Success,
            Some(format!(
                "echoed exactly ({n} retr{})",
                if n == 1 { "y" } else { "ies" }
            )),
            json!({"expected": shown, "retries": n}),
        ),
    }
}

/// The `cancelled` precondition: `None` when the held call was cancelled and the late round
/// went out on a later request (the check is then judged); otherwise SKIPPED (no cancellation:
/// the fallback answered the call) or FAILURE (no request came after the cancellation, so the
/// late round was never delivered and nothing was shown).
fn unless_cancelled(rec: &Recording) -> Option<Outcome> {
    let Some(hold) = &rec.hold else {
        return Some(fail(
            "the probe never held the call (the client's first call did not reach the held leg)"
                .into(),
            json!({"held": false}),
        ));
    };
    let Some(how) = hold.cancelled else {
        return Some((
            Status::Skipped,
            Some(format!(
                "the client did not cancel the held call (id {}) within {} s of the notification; the probe's fallback answered it (a client that cannot cancel says `mrtr-probe: unsupported: cancel`)",
                hold.id,
                hold.fallback.as_secs()
            )),
            json!({"cancelled": false, "fellBack": hold.fell_back}),
        ));
    };
    if hold.late_on.is_none() {
        return Some(fail(
            format!(
                "the client cancelled the held call (id {}, by {how}) but sent no request after it, so the late round was never delivered: nothing was shown",
                hold.id
            ),
            json!({"cancelled": how, "lateDelivered": false}),
        ));
    }
    None
}

/// The gap before each retry of a state-only round: from the round's answer to the retry's
/// head, per leg. `None` for a gap: the retry's head came before the round was written.
fn gaps(
    scenario: &Scenario,
    tool: &str,
    rec: &Recording,
) -> Vec<(usize, Option<std::time::Duration>)> {
    let Some(spec) = scenario.tool(tool) else {
        return Vec::new();
    };
    let calls: Vec<&Request> = rec.calls_of(tool).collect();
    calls
        .iter()
        .filter_map(|retry| {
            let leg = retry.leg?.checked_sub(1)?;
            if !spec.answer(leg).is_state_only() {
                return None;
            }
            let round = calls.iter().find(|c| c.leg == Some(leg))?;
            let answered = round.answered?;
            Some((leg, retry.started.checked_duration_since(answered)))
        })
        .collect()
}

fn min_gap(scenario: &Scenario, check: &Check, rec: &Recording) -> Outcome {
    let tool = check.tool.as_deref().unwrap_or_default();
    let least = std::time::Duration::from_millis(check.ms.unwrap_or_default());
    let measured = gaps(scenario, tool, rec);
    let shown: Vec<Value> = measured
        .iter()
        .map(|(leg, gap)| {
            json!({"round": leg, "gapMs": gap.map(|g| (g.as_secs_f64() * 10_000.0).round() / 10.0)})
        })
        .collect();
    if measured.is_empty() {
        return fail(
            format!(
                "the client sent no retry of `{tool}`'s state-only rounds: there is no gap to measure"
            ),
            json!({"gaps": shown}),
        );
    }
    let show = |gap: &Option<std::time::Duration>| {
        gap.map_or_else(
            || "before the round was written (its request had been opened ahead)".into(),
            |g| {
                format!(
                    "{:.1} ms after the round was written",
                    g.as_secs_f64() * 1000.0
                )
            },
        )
    };
    match measured
        .iter()
        .find(|(_, gap)| gap.is_none_or(|g| g < least))
    {
        None => (
            Status::Success,
            Some(format!(
                "paced: every state-only retry came at least {} ms after its round",
                least.as_millis()
            )),
            json!({"gaps": shown}),
        ),
        Some((leg, gap)) => fail(
            format!(
                "the client retried state-only round {leg} of `{tool}` {}, where at least {} ms are expected; {} retr{} measured",
                show(gap),
                least.as_millis(),
                measured.len(),
                if measured.len() == 1 { "y" } else { "ies" }
            ),
            json!({"gaps": shown}),
        ),
    }
}
