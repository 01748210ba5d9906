//! Differential test: a small executable model of the gate's rules, written from the rules
//! (docs/errors.md, the control's G001/G002, the MRTR notes), not from the gate's code. Random
//! operation sequences run through the real gate (two instances over one in-memory store)
//! and through the model; for every operation both must allow with the same visible result,
//! or deny with the same code. See docs/testing.md for what it covers and leaves out.

#![cfg(test)]

#[path = "../common/mod.rs"]
mod common;

use common::*;
use mrtr_gate_core::memory::ScriptedAnswer;
use mrtr_gate_core::{
    ALL_CODES, CLOCK_SKEW_TOLERANCE_MS, CallerOutcome, Denial, EXPIRY_GRACE_MS, MAX_TIME_MS,
    Policy, RequestId, ResponseVerdict, ServerIdentity, TerminalOutcome,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};

fn assert_known(d: &Denial) {
    assert!(
        ALL_CODES.contains(&d.error.code()),
        "unknown code {}",
        d.error.code()
    );
}

// ---------------------------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------------------------

/// How an input request of an open round must be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    /// A form with the fixture's schema (`form_schema`).
    Form,
    /// A URL-mode elicitation.
    Url,
}

#[derive(Clone, Debug)]
struct OpenRound {
    /// Key -> what it asks for (sorted by key, like JSON object keys in the view).
    inputs: BTreeMap<String, Input>,
    state: Option<String>,
}

/// A binding the store still holds: the one registered request and where it stands.
#[derive(Clone, Debug)]
struct ModelBinding {
    server: usize,
    original: RequestId,
    user: usize,
    tenant: usize,
    params: Value,
    /// The only id a response or a retry may name.
    live: RequestId,
    /// Every id it used (original first): all reserved on its server until it ends.
    used: Vec<RequestId>,
    open: Option<OpenRound>,
    rounds: u32,
    max_rounds: u32,
    created_at: u64,
    expires_at: u64,
}

/// What an operation visibly did: the same type for the gate and the model.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Registered {
        request: Value,
        expires_at: u64,
    },
    Round {
        number: u32,
        keys: Vec<String>,
        has_state: bool,
    },
    Complete,
    ServerError(i64),
    /// The retry request, parsed: its id, the registered params plus exactly the answers and
    /// the state; and whether it rests on a consent receipt.
    Retry {
        request: Value,
        round: u32,
        receipt: bool,
    },
    Finished(TerminalOutcome),
    Expired(u32),
    /// The code, and whether a `rejected` event was written and read back.
    Denied {
        code: &'static str,
        audited: bool,
    },
}

/// A denial as the model's rules give it; whether it is audited is decided per operation
/// ([`audited`]).
fn denied(code: &'static str) -> Seen {
    Seen::Denied {
        code,
        audited: false,
    }
}

#[derive(Clone, Copy, Debug)]
enum Operation {
    Register,
    Accept,
    Retry,
    Finish,
    ExpireStale,
}

/// Which denials leave a `rejected` event, the sink working (docs/errors.md, "Which denials
/// are audited").
fn audited(operation: Operation, code: &str) -> bool {
    match (operation, code) {
        // No time to stamp an event with.
        (_, "clock_out_of_range") => false,
        (Operation::Register | Operation::ExpireStale, _) => false,
        // Another principal's attempt and a clock set back are on record; an unknown id is not.
        (Operation::Finish, code) => matches!(
            code,
            "mrtr_identity_or_argument_mismatch" | "clock_behind_binding"
        ),
        (Operation::Accept | Operation::Retry, _) => true,
    }
}

fn with_audit(operation: Operation, seen: Seen) -> Seen {
    match seen {
        Seen::Denied { code, .. } => Seen::Denied {
            code,
            audited: audited(operation, code),
        },
        allowed => allowed,
    }
}

/// The server's message, as the model reads it.
#[derive(Clone, Debug)]
enum Reply {
    InputRequired {
        inputs: BTreeMap<String, Input>,
        state: Option<String>,
    },
    Complete,
    Error(i64),
    /// `resultType` that is neither `complete` nor `input_required`.
    BadResultType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConsentAnswer {
    Grant,
    Refuse,
    GrantOtherView,
    Fail,
}

struct Model {
    now: u64,
    /// The clock reads beyond 2^53 - 1 (every operation is refused before anything else).
    clock_out_of_range: bool,
    bindings: Vec<ModelBinding>,
    /// Consent answers queued; an empty queue grants.
    consent: VecDeque<ConsentAnswer>,
}

impl Model {
    fn new(now: u64) -> Self {
        Self {
            now,
            clock_out_of_range: false,
            bindings: Vec::new(),
            consent: VecDeque::new(),
        }
    }

    /// The binding on `server` that uses `id` (ids are per server).
    fn find(&self, server: usize, id: &RequestId) -> Option<usize> {
        self.bindings
            .iter()
            .position(|b| b.server == server && b.used.contains(id))
    }

    fn expired(&self, b: &ModelBinding) -> bool {
        self.now >= b.expires_at
    }

    /// More than the skew tolerance before the binding's registration: the clock went back.
    fn clock_behind(&self, b: &ModelBinding) -> bool {
        self.now + CLOCK_SKEW_TOLERANCE_MS < b.created_at
    }

    fn end(&mut self, i: usize) {
        self.bindings.remove(i);
    }

    /// The store drops a binding's keys once its lifetime and the grace have passed.
    fn store_drops_stale(&mut self) {
        let now = self.now;
        self.bindings
            .retain(|b| now < b.expires_at.saturating_add(EXPIRY_GRACE_MS));
    }

    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        server: usize,
        id: &RequestId,
        user: usize,
        tenant: usize,
        params: &Value,
        policy: &Policy,
    ) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        // The id is reserved on its server by every live binding using it in any role.
        if self.find(server, id).is_some() {
            return denied("request_id_in_use");
        }
        let expires_at = self.now + policy.round_trip_lifetime_ms;
        self.bindings.push(ModelBinding {
            server,
            original: id.clone(),
            user,
            tenant,
            params: params.clone(),
            live: id.clone(),
            used: vec![id.clone()],
            open: None,
            rounds: 0,
            max_rounds: policy.max_rounds,
            created_at: self.now,
            expires_at,
        });
        Seen::Registered {
            request: json!({"id": id.to_json(), "jsonrpc": "2.0", "method": "tools/call", "params": params}),
            expires_at,
        }
    }

    /// Precedence: the clock; the binding (per server); the live id; the clock against the
    /// binding; the lifetime; then the message itself (a bad `resultType` before the round
    /// rules; a duplicate round before the round limit).
    fn accept(&mut self, server: usize, id: &RequestId, reply: &Reply) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        let Some(i) = self.find(server, id) else {
            return denied("no_live_request"); // (a) unknown on this server: nothing touched
        };
        let b = &self.bindings[i];
        if b.live != *id {
            return denied("no_live_request"); // (b) an id it moved on from: kept
        }
        if self.clock_behind(b) {
            return denied("clock_behind_binding"); // kept
        }
        if self.expired(b) {
            self.end(i); // (c) ends: expired
            return denied("no_live_request");
        }
        match reply {
            Reply::Complete => {
                self.end(i);
                Seen::Complete
            }
            Reply::Error(code) => {
                self.end(i);
                Seen::ServerError(*code)
            }
            Reply::BadResultType => {
                self.end(i);
                denied("invalid_result_type")
            }
            Reply::InputRequired { inputs, state } => {
                if b.open.is_some() {
                    return denied("duplicate_round"); // kept: the open round unchanged
                }
                if b.rounds >= b.max_rounds {
                    self.end(i);
                    return denied("round_limit_exceeded");
                }
                let b = &mut self.bindings[i];
                b.rounds += 1;
                b.open = Some(OpenRound {
                    inputs: inputs.clone(),
                    state: state.clone(),
                });
                Seen::Round {
                    number: b.rounds,
                    keys: inputs.keys().cloned().collect(),
                    has_state: state.is_some(),
                }
            }
        }
    }

    /// Precedence: the clock; the binding; the clock against it; the lifetime; an open round
    /// on the live id; the retry id against the binding's own ids; user and tenant; the
    /// answers; the retry id against every other live binding; consent.
    #[allow(clippy::too_many_arguments)]
    fn retry(
        &mut self,
        server: usize,
        id: &RequestId,
        retry_id: &RequestId,
        user: usize,
        tenant: usize,
        answers: &Value,
    ) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        let Some(i) = self.find(server, id) else {
            return denied("inactive_mrtr_round"); // (a)
        };
        let b = &self.bindings[i];
        if self.clock_behind(b) {
            return denied("clock_behind_binding");
        }
        if self.expired(b) {
            self.end(i); // (c) ends: expired
            return denied("inactive_mrtr_round");
        }
        let open = match &b.open {
            Some(open) if b.live == *id => open.clone(),
            _ => return denied("inactive_mrtr_round"), // (b) consumed, or not the live id
        };
        if b.used.contains(retry_id) {
            return denied("retry_requires_new_jsonrpc_id");
        }
        if b.user != user || b.tenant != tenant {
            return denied("mrtr_identity_or_argument_mismatch");
        }
        if let Err(code) = check_answers(answers, &open.inputs) {
            return denied(code);
        }
        if self
            .bindings
            .iter()
            .any(|o| o.server == server && o.used.contains(retry_id))
        {
            return denied("retry_requires_new_jsonrpc_id"); // held by another live binding
        }
        // A state-only round sends nothing of the user's: no prompt.
        let receipt = !open.inputs.is_empty();
        if receipt {
            match self.consent.pop_front().unwrap_or(ConsentAnswer::Grant) {
                ConsentAnswer::Grant => {}
                ConsentAnswer::Refuse => return denied("consent_refused"),
                ConsentAnswer::GrantOtherView => return denied("consent_mismatch"),
                ConsentAnswer::Fail => return denied("consent_unavailable"),
            }
        }
        let b = &mut self.bindings[i];
        let mut params = b.params.clone();
        if receipt {
            params["inputResponses"] = answers.clone();
        }
        if let Some(state) = &open.state {
            params["requestState"] = json!(state);
        }
        b.live = retry_id.clone();
        b.used.push(retry_id.clone());
        b.open = None;
        Seen::Retry {
            request: json!({"id": retry_id.to_json(), "jsonrpc": "2.0", "method": "tools/call", "params": params}),
            round: b.rounds,
            receipt,
        }
    }

    /// Precedence: the clock; the binding (by any id it used); user and tenant (another
    /// principal cannot end it, not even as expired); the clock against it; the lifetime.
    fn finish(
        &mut self,
        server: usize,
        id: &RequestId,
        user: usize,
        tenant: usize,
        transport_failed: bool,
    ) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        let Some(i) = self.find(server, id) else {
            return denied("unknown_request");
        };
        let b = &self.bindings[i];
        if b.user != user || b.tenant != tenant {
            return denied("mrtr_identity_or_argument_mismatch");
        }
        if self.clock_behind(b) {
            return denied("clock_behind_binding");
        }
        let outcome = if self.expired(b) {
            TerminalOutcome::Expired // the lifetime passed first, whatever the caller says
        } else if transport_failed {
            TerminalOutcome::Error
        } else {
            TerminalOutcome::Cancelled
        };
        self.end(i);
        Seen::Finished(outcome)
    }

    fn expire_stale(&mut self) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        let before = self.bindings.len();
        let now = self.now;
        self.bindings.retain(|b| now < b.expires_at);
        Seen::Expired((before - self.bindings.len()) as u32)
    }
}

/// The answers must have exactly the round's keys; each answer is checked on its own (the
/// generator breaks at most one answer, so the order across keys never decides).
fn check_answers(answers: &Value, inputs: &BTreeMap<String, Input>) -> Result<(), &'static str> {
    let Some(answers) = answers.as_object() else {
        return Err("invalid_input_response");
    };
    let keys_match =
        answers.len() == inputs.len() && answers.keys().all(|k| inputs.contains_key(k));
    if !keys_match {
        return Err("input_response_population_mismatch");
    }
    for (key, input) in inputs {
        let Some(answer) = answers[key].as_object() else {
            return Err("invalid_input_response");
        };
        if answer
            .keys()
            .any(|k| !matches!(k.as_str(), "action" | "content" | "_meta"))
        {
            return Err("invalid_input_response");
        }
        let action = answer.get("action").and_then(Value::as_str);
        if !matches!(action, Some("accept" | "decline" | "cancel")) {
            return Err("invalid_input_response");
        }
        let content = answer.get("content");
        if action != Some("accept") && content.is_some() {
            return Err("non_accept_response_must_not_have_content");
        }
        match input {
            Input::Url if content.is_some() => {
                return Err("url_elicitation_response_must_not_have_content");
            }
            Input::Form if action == Some("accept") && !fits_form_schema(content) => {
                return Err("input_response_schema_mismatch");
            }
            _ => {}
        }
    }
    Ok(())
}

/// The fixture's schema, by hand: `login` a required string of 1 to 39 characters, `count`
/// an integer from 1 to 10, `confirm` a boolean, nothing else.
fn fits_form_schema(content: Option<&Value>) -> bool {
    let Some(Value::Object(c)) = content else {
        return false;
    };
    let login_ok = c
        .get("login")
        .and_then(Value::as_str)
        .is_some_and(|l| (1..=39).contains(&l.chars().count()));
    let count_ok = c
        .get("count")
        .is_none_or(|n| n.as_i64().is_some_and(|n| (1..=10).contains(&n)));
    let confirm_ok = c.get("confirm").is_none_or(Value::is_boolean);
    let known = c
        .keys()
        .all(|k| matches!(k.as_str(), "login" | "count" | "confirm"));
    login_ok && count_ok && confirm_ok && known
}

// ---------------------------------------------------------------------------------------------
// The operations and their generators. Pools are small so ids, servers and principals collide.
// ---------------------------------------------------------------------------------------------

const SERVERS: [&str; 2] = [SERVER, OTHER_SERVER];
const USERS: [&str; 2] = [USER, "bob@example.com"];
const TENANTS: [&str; 2] = [TENANT, "tenant-b"];
const SHORT_LIFETIME_MS: u64 = 10_000;

/// `1`, `2`, `3`, and the strings `"1"` and `"b"` (`1` and `"1"` are different ids).
fn pool_id(n: usize) -> RequestId {
    match n % 5 {
        0 => RequestId::Number(1),
        1 => RequestId::Number(2),
        2 => RequestId::Number(3),
        3 => RequestId::Text("1".into()),
        _ => RequestId::Text("b".into()),
    }
}

/// Which binding or id an operation names.
#[derive(Clone, Debug)]
enum Target {
    /// The live id of the k-th binding the model holds, on its server or on the other one.
    Live { k: usize, other_server: bool },
    /// The live id of the k-th binding with an open round (the live id of any if none).
    Open { k: usize },
    /// The live id of the k-th binding without an open round (the live id of any if none).
    Idle { k: usize },
    /// The original id of the k-th binding (stale once a retry went out).
    Original { k: usize },
    /// Any id seen so far (the pool or a retry id), on either server.
    Any { n: usize, server: usize },
}

#[derive(Clone, Debug)]
enum PolicyPick {
    Default,
    MaxRoundsTwo,
    ShortLifetime,
}

#[derive(Clone, Debug)]
enum ReplyPick {
    Forms(usize),
    Url,
    FormAndUrl,
    StateOnly(String),
    FormWithState(String),
    Complete,
    Error,
    BadResultType,
}

#[derive(Clone, Debug)]
enum AnswersPick {
    Right,
    Decline,
    Extra,
    Missing,
    BadContent(usize),
    DeclineWithContent,
    BadAction,
    NotAnObject,
}

#[derive(Clone, Debug)]
enum RetryIdPick {
    Fresh,
    /// The last fresh id handed out: taken if its retry went out, free again if it was
    /// refused (the reservation is released).
    LastFresh,
    OwnOriginal,
    Pool(usize),
}

#[derive(Clone, Debug)]
enum ClockPick {
    Small(u64),
    PastShortLifetime,
    PastDefaultLifetime,
    Back(u64),
    OutOfRange(u64),
}

#[derive(Clone, Debug)]
enum Op {
    Register {
        gate: usize,
        server: usize,
        id: usize,
        user: usize,
        tenant: usize,
        arg: u8,
        policy: PolicyPick,
    },
    Respond {
        gate: usize,
        target: Target,
        reply: ReplyPick,
    },
    Retry {
        gate: usize,
        target: Target,
        retry_id: RetryIdPick,
        answers: AnswersPick,
        other_user: bool,
        other_tenant: bool,
    },
    QueueConsent(ConsentAnswer),
    Finish {
        gate: usize,
        target: Target,
        other_user: bool,
        other_tenant: bool,
        /// The transport failed (`CallerOutcome::Error`) rather than the user cancelling.
        transport_failed: bool,
    },
    ExpireStale {
        gate: usize,
    },
    Clock(ClockPick),
}

/// Targets for a server's response: mostly a binding waiting for one.
fn arb_response_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        5 => any::<usize>().prop_map(|k| Target::Idle { k }),
        2 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

/// Targets for a retry: mostly a binding with an open round.
fn arb_retry_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => any::<usize>().prop_map(|k| Target::Open { k }),
        1 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        1 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

/// Targets for `finish`: any id a binding used, or none.
fn arb_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(k, other_server)| Target::Live { k, other_server }),
        1 => any::<usize>().prop_map(|k| Target::Original { k }),
        2 => (any::<usize>(), 0usize..2).prop_map(|(n, server)| Target::Any { n, server }),
    ]
}

fn arb_state() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("s1".to_owned()),
        Just("é😀\"\\".to_owned()),
        "[ -~]{1,8}"
    ]
}

fn arb_reply() -> impl Strategy<Value = ReplyPick> {
    prop_oneof![
        4 => (1usize..3).prop_map(ReplyPick::Forms),
        2 => Just(ReplyPick::Url),
        2 => Just(ReplyPick::FormAndUrl),
        2 => arb_state().prop_map(ReplyPick::StateOnly),
        2 => arb_state().prop_map(ReplyPick::FormWithState),
        2 => Just(ReplyPick::Complete),
        1 => Just(ReplyPick::Error),
        1 => Just(ReplyPick::BadResultType),
    ]
}

fn arb_answers() -> impl Strategy<Value = AnswersPick> {
    prop_oneof![
        8 => Just(AnswersPick::Right),
        2 => Just(AnswersPick::Decline),
        1 => Just(AnswersPick::Extra),
        1 => Just(AnswersPick::Missing),
        2 => (0usize..4).prop_map(AnswersPick::BadContent),
        1 => Just(AnswersPick::DeclineWithContent),
        1 => Just(AnswersPick::BadAction),
        1 => Just(AnswersPick::NotAnObject),
    ]
}

fn arb_clock() -> impl Strategy<Value = ClockPick> {
    prop_oneof![
        6 => (0u64..4_000).prop_map(ClockPick::Small),
        1 => Just(ClockPick::PastShortLifetime),
        1 => Just(ClockPick::PastDefaultLifetime),
        1 => prop_oneof![Just(4_000u64), Just(5_000), Just(5_001), Just(30_000)].prop_map(ClockPick::Back),
        1 => prop_oneof![Just(MAX_TIME_MS + 1), Just(u64::MAX)].prop_map(ClockPick::OutOfRange),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let gate = 0usize..2;
    let policy = prop_oneof![
        3 => Just(PolicyPick::Default),
        1 => Just(PolicyPick::MaxRoundsTwo),
        1 => Just(PolicyPick::ShortLifetime),
    ];
    let who = prop::bool::weighted(0.1);
    prop_oneof![
        3 => (gate.clone(), 0usize..2, 0usize..5, 0usize..2, 0usize..2, 0u8..3, policy)
            .prop_map(|(gate, server, id, user, tenant, arg, policy)| Op::Register { gate, server, id, user, tenant, arg, policy }),
        8 => (gate.clone(), arb_response_target(), arb_reply()).prop_map(|(gate, target, reply)| Op::Respond { gate, target, reply }),
        6 => (
            gate.clone(),
            arb_retry_target(),
            prop_oneof![6 => Just(RetryIdPick::Fresh), 2 => Just(RetryIdPick::LastFresh), 1 => Just(RetryIdPick::OwnOriginal), 2 => (0usize..5).prop_map(RetryIdPick::Pool)],
            arb_answers(),
            who,
            who,
        )
            .prop_map(|(gate, target, retry_id, answers, other_user, other_tenant)| Op::Retry { gate, target, retry_id, answers, other_user, other_tenant }),
        1 => prop_oneof![
            Just(ConsentAnswer::Refuse),
            Just(ConsentAnswer::GrantOtherView),
            Just(ConsentAnswer::Fail),
            Just(ConsentAnswer::Grant),
        ].prop_map(Op::QueueConsent),
        2 => (gate.clone(), arb_target(), who, who, any::<bool>()).prop_map(|(gate, target, other_user, other_tenant, transport_failed)| Op::Finish { gate, target, other_user, other_tenant, transport_failed }),
        1 => gate.prop_map(|gate| Op::ExpireStale { gate }),
        3 => arb_clock().prop_map(Op::Clock),
    ]
}

// ---------------------------------------------------------------------------------------------
// The driver: each operation to the gate and to the model, their results compared.
// ---------------------------------------------------------------------------------------------

struct World {
    fx: Fx,
    other: TestGate,
    model: Model,
    /// Every id an operation may name: the pool and every retry id handed out.
    seen_ids: Vec<RequestId>,
    next_fresh: i64,
}

fn server_identity(s: usize) -> ServerIdentity {
    ServerIdentity::origin(SERVERS[s]).unwrap()
}

fn seen_of<T>(r: Result<T, Denial>, ok: impl FnOnce(T) -> Seen) -> Seen {
    match r {
        Ok(v) => ok(v),
        Err(d) => {
            assert_known(&d);
            Seen::Denied {
                code: d.error.code(),
                audited: d.audited,
            }
        }
    }
}

impl World {
    fn new() -> Self {
        let fx = Fx::new();
        let other = fx.second_gate();
        Self {
            fx,
            other,
            model: Model::new(T0),
            seen_ids: (0..5).map(pool_id).collect(),
            next_fresh: 1000,
        }
    }

    fn gate(&mut self, which: usize) -> &mut TestGate {
        if which == 0 {
            &mut self.fx.gate
        } else {
            &mut self.other
        }
    }

    /// (server, id) an operation names. Falls back to the pool when the model holds nothing.
    fn resolve(&self, target: &Target) -> (usize, RequestId) {
        let bindings = &self.model.bindings;
        let open: Vec<&ModelBinding> = bindings.iter().filter(|b| b.open.is_some()).collect();
        let idle: Vec<&ModelBinding> = bindings.iter().filter(|b| b.open.is_none()).collect();
        match target {
            Target::Open { k } if !open.is_empty() => {
                let b = open[k % open.len()];
                (b.server, b.live.clone())
            }
            Target::Idle { k } if !idle.is_empty() => {
                let b = idle[k % idle.len()];
                (b.server, b.live.clone())
            }
            Target::Open { k } | Target::Idle { k } if !bindings.is_empty() => {
                let b = &bindings[k % bindings.len()];
                (b.server, b.live.clone())
            }
            Target::Live { k, other_server } if !bindings.is_empty() => {
                let b = &bindings[k % bindings.len()];
                (b.server ^ usize::from(*other_server), b.live.clone())
            }
            Target::Original { k } if !bindings.is_empty() => {
                let b = &bindings[k % bindings.len()];
                (b.server, b.original.clone())
            }
            Target::Live { k, .. }
            | Target::Original { k }
            | Target::Open { k }
            | Target::Idle { k } => (0, pool_id(*k)),
            Target::Any { n, server } => (*server, self.seen_ids[n % self.seen_ids.len()].clone()),
        }
    }

    /// The user and tenant of the binding on (server, id), if the model has one (the caller
    /// acting for it); the first of each otherwise.
    fn principals_of(&self, server: usize, id: &RequestId) -> (usize, usize) {
        self.model.find(server, id).map_or((0, 0), |i| {
            (self.model.bindings[i].user, self.model.bindings[i].tenant)
        })
    }

    /// The inputs of the round open on (server, id), if the model has one there (the
    /// generator aims at it; the verdict is still the model's and the gate's to give).
    fn round_inputs(&self, server: usize, id: &RequestId) -> BTreeMap<String, Input> {
        self.model
            .find(server, id)
            .and_then(|i| self.model.bindings[i].open.as_ref())
            .map(|o| o.inputs.clone())
            .unwrap_or_else(|| BTreeMap::from([("f0".to_owned(), Input::Form)]))
    }

    /// One operation on the gate and on the model: (the gate's result, the model's), none
    /// for an operation on the hosts alone.
    fn run(&mut self, op: &Op) -> Option<(Seen, Seen)> {
        let (got, want) = match op.clone() {
            Op::Register {
                gate,
                server,
                id,
                user,
                tenant,
                arg,
                policy,
            } => {
                let id = pool_id(id);
                let params = tool_params("t", json!({"n": arg}));
                let policy = match policy {
                    PolicyPick::Default => Policy::default(),
                    PolicyPick::MaxRoundsTwo => Policy {
                        max_rounds: 2,
                        ..Policy::default()
                    },
                    PolicyPick::ShortLifetime => Policy {
                        round_trip_lifetime_ms: SHORT_LIFETIME_MS,
                        ..Policy::default()
                    },
                };
                let registration = mrtr_gate_core::Registration {
                    request_id: id.clone(),
                    server: server_identity(server),
                    user: USERS[user].into(),
                    tenant: TENANTS[tenant].into(),
                    method: "tools/call".into(),
                    params_json: params.to_string(),
                    policy: policy.clone(),
                };
                let got = seen_of(self.gate(gate).register(registration), |r| {
                    Seen::Registered {
                        request: parse(&r.request_json),
                        expires_at: r.expires_at_ms,
                    }
                });
                let want = self
                    .model
                    .register(server, &id, user, tenant, &params, &policy);
                let want = with_audit(Operation::Register, want);
                (got, want)
            }
            Op::Respond {
                gate,
                target,
                reply,
            } => {
                let (server, id) = self.resolve(&target);
                let (text, model_reply) = reply_text(&id, &reply);
                let got = seen_of(
                    self.gate(gate)
                        .accept_response(&server_identity(server), &text),
                    |v| match v {
                        ResponseVerdict::InputRequired(view) => {
                            assert_view_is_canonical(&view);
                            Seen::Round {
                                number: view.round,
                                keys: view.input_keys,
                                has_state: view.request_state_sha256.is_some(),
                            }
                        }
                        ResponseVerdict::Complete => Seen::Complete,
                        ResponseVerdict::Error(code) => Seen::ServerError(code),
                    },
                );
                let want = with_audit(
                    Operation::Accept,
                    self.model.accept(server, &id, &model_reply),
                );
                (got, want)
            }
            Op::Retry {
                gate,
                target,
                retry_id,
                answers,
                other_user,
                other_tenant,
            } => {
                let (server, id) = self.resolve(&target);
                let retry_id = match retry_id {
                    RetryIdPick::Fresh => {
                        self.next_fresh += 1;
                        let fresh = RequestId::Number(self.next_fresh);
                        self.seen_ids.push(fresh.clone());
                        fresh
                    }
                    RetryIdPick::LastFresh => RequestId::Number(self.next_fresh),
                    RetryIdPick::OwnOriginal => self
                        .model
                        .find(server, &id)
                        .map_or_else(|| id.clone(), |i| self.model.bindings[i].original.clone()),
                    RetryIdPick::Pool(n) => pool_id(n),
                };
                let answers = answers_value(&self.round_inputs(server, &id), &answers);
                let (own_user, own_tenant) = self.principals_of(server, &id);
                let user = own_user ^ usize::from(other_user);
                let tenant = own_tenant ^ usize::from(other_tenant);
                let request = mrtr_gate_core::RetryRequest {
                    server: server_identity(server),
                    request_id: id.clone(),
                    retry_id: retry_id.clone(),
                    user: USERS[user].into(),
                    tenant: TENANTS[tenant].into(),
                    responses_json: answers.to_string(),
                };
                let got = seen_of(self.gate(gate).build_retry(request), |r| Seen::Retry {
                    request: parse(&r.request_json),
                    round: r.round,
                    receipt: r.consent_receipt_id.is_some(),
                });
                let want = self
                    .model
                    .retry(server, &id, &retry_id, user, tenant, &answers);
                let want = with_audit(Operation::Retry, want);
                (got, want)
            }
            Op::QueueConsent(answer) => {
                self.fx.consent.push(match answer {
                    ConsentAnswer::Grant => ScriptedAnswer::Grant,
                    ConsentAnswer::Refuse => ScriptedAnswer::Refuse,
                    ConsentAnswer::GrantOtherView => ScriptedAnswer::GrantOtherView,
                    ConsentAnswer::Fail => ScriptedAnswer::Fail,
                });
                self.model.consent.push_back(answer);
                return None;
            }
            Op::Finish {
                gate,
                target,
                other_user,
                other_tenant,
                transport_failed,
            } => {
                let (server, id) = self.resolve(&target);
                let (own_user, own_tenant) = self.principals_of(server, &id);
                let user = own_user ^ usize::from(other_user);
                let tenant = own_tenant ^ usize::from(other_tenant);
                let outcome = if transport_failed {
                    CallerOutcome::Error("transport_failed".into())
                } else {
                    CallerOutcome::Cancelled
                };
                let request = mrtr_gate_core::FinishRequest {
                    server: server_identity(server),
                    request_id: id.clone(),
                    user: USERS[user].into(),
                    tenant: TENANTS[tenant].into(),
                    outcome,
                };
                let got = seen_of(self.gate(gate).finish(request), Seen::Finished);
                let want = with_audit(
                    Operation::Finish,
                    self.model
                        .finish(server, &id, user, tenant, transport_failed),
                );
                (got, want)
            }
            Op::ExpireStale { gate } => {
                let got = seen_of(self.gate(gate).expire_stale(), Seen::Expired);
                (
                    got,
                    with_audit(Operation::ExpireStale, self.model.expire_stale()),
                )
            }
            Op::Clock(pick) => {
                self.clock(&pick);
                return None;
            }
        };
        Some((got, want))
    }

    fn apply(&mut self, op: &Op) {
        let compared = self.run(op);
        if self.model.clock_out_of_range && !matches!(op, Op::Clock(_) | Op::QueueConsent(_)) {
            // An out-of-range reading lasts one operation; then the clock reads right again.
            self.clock(&ClockPick::Small(0));
        }
        let Some((got, want)) = compared else {
            return;
        };
        assert_eq!(
            got, want,
            "the gate (left) and the model (right) disagree on {op:?}"
        );
    }

    fn clock(&mut self, pick: &ClockPick) {
        let m = &mut self.model;
        match pick {
            ClockPick::OutOfRange(at) => {
                m.clock_out_of_range = true;
                self.fx.clock.set(*at);
                return;
            }
            ClockPick::Back(ms) => m.now = m.now.saturating_sub(*ms),
            ClockPick::Small(ms) => m.now += ms,
            ClockPick::PastShortLifetime => m.now += SHORT_LIFETIME_MS,
            ClockPick::PastDefaultLifetime => m.now += Policy::default().round_trip_lifetime_ms,
        }
        // Any clock step after an out-of-range reading brings the clock back from where it was.
        m.clock_out_of_range = false;
        self.fx.clock.set(m.now);
        // A real store drops keys at their TTL; the in-memory one only hides them (and would
        // show them again to a clock set back), so drop them as a real store would.
        self.fx.storage.purge_expired();
        m.store_drops_stale();
    }
}

fn reply_text(id: &RequestId, reply: &ReplyPick) -> (String, Reply) {
    let forms = |n: usize| -> BTreeMap<String, Input> {
        (0..n).map(|f| (format!("f{f}"), Input::Form)).collect()
    };
    let (inputs, state) = match reply {
        ReplyPick::Forms(n) => (forms(*n), None),
        ReplyPick::Url => (BTreeMap::from([("u0".to_owned(), Input::Url)]), None),
        ReplyPick::FormAndUrl => {
            let mut i = forms(1);
            i.insert("u0".into(), Input::Url);
            (i, None)
        }
        ReplyPick::StateOnly(s) => (BTreeMap::new(), Some(s.clone())),
        ReplyPick::FormWithState(s) => (forms(1), Some(s.clone())),
        ReplyPick::Complete => return (response(id.to_json(), complete()), Reply::Complete),
        ReplyPick::Error => return (error_response(id.to_json(), -32603), Reply::Error(-32603)),
        ReplyPick::BadResultType => {
            return (
                response(id.to_json(), json!({"resultType": "partial"})),
                Reply::BadResultType,
            );
        }
    };
    let mut result = json!({"resultType": "input_required"});
    if !inputs.is_empty() {
        let requests: serde_json::Map<String, Value> = inputs
            .iter()
            .map(|(k, input)| {
                let request = match input {
                    Input::Form => form("F"),
                    Input::Url => url_request("https://auth.example.com/x?y=1"),
                };
                (k.clone(), request)
            })
            .collect();
        result["inputRequests"] = Value::Object(requests);
    }
    if let Some(s) = &state {
        result["requestState"] = json!(s);
    }
    (
        response(id.to_json(), result),
        Reply::InputRequired { inputs, state },
    )
}

/// Answers for a round with `inputs`, right or broken in one way.
fn answers_value(inputs: &BTreeMap<String, Input>, pick: &AnswersPick) -> Value {
    let right = |input: Input| match input {
        Input::Form => accept_with(json!({"login": "octocat", "count": 2})),
        Input::Url => json!({"action": "accept"}),
    };
    let mut m: serde_json::Map<String, Value> =
        inputs.iter().map(|(k, i)| (k.clone(), right(*i))).collect();
    let first = inputs.iter().next().map(|(k, i)| (k.clone(), *i));
    match pick {
        AnswersPick::Right => {}
        AnswersPick::Decline => {
            for v in m.values_mut() {
                *v = json!({"action": "decline"});
            }
        }
        AnswersPick::Extra => {
            m.insert("zz".into(), json!({"action": "decline"}));
        }
        AnswersPick::Missing => {
            if let Some((k, _)) = first {
                m.remove(&k);
            }
        }
        AnswersPick::BadContent(n) => {
            let bad = [
                json!({"login": 5}),
                json!({"login": ""}),
                json!({"count": 3}),
                json!({"login": "x", "extra": 1}),
            ];
            // The first form answer gets content off the schema; a url answer gets content.
            let form_key = inputs
                .iter()
                .find(|(_, i)| **i == Input::Form)
                .map(|(k, _)| k);
            if let Some(k) = form_key {
                m.insert(k.clone(), accept_with(bad[n % bad.len()].clone()));
            } else if let Some((k, _)) = first {
                m.insert(k, accept_with(json!({"x": 1})));
            }
        }
        AnswersPick::DeclineWithContent => {
            if let Some((k, _)) = first {
                m.insert(k, json!({"action": "decline", "content": {"login": "x"}}));
            }
        }
        AnswersPick::BadAction => {
            if let Some((k, _)) = first {
                m.insert(k, json!({"action": "ok"}));
            }
        }
        AnswersPick::NotAnObject => return json!(["not", "an", "object"]),
    }
    Value::Object(m)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        // Next to this file (the default would be `tests/proptest-regressions/main.txt`,
        // a name every `tests/*/main.rs` shares).
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "tests/model/main.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    /// For every operation, the gate and the model agree: allowed with the same visible
    /// result, or denied with the same code.
    #[test]
    fn gate_agrees_with_the_model(ops in prop::collection::vec(arb_op(), 1..60)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
        }
    }
}
