//! Differential test: random operation sequences go to the real gate (two instances over one
//! store, the in-memory hosts) and to the executable model (`model`); every verdict must
//! agree: allowed with the same result, or denied with the same code.
//!
//! Inputs come from small pools (five ids, two servers, two users, two tenants) so that id
//! collisions, replays, other principals and other servers happen often. Operations name
//! their target either by a pick among the model's bindings (to reach deep states) or raw
//! (to reach the refusals); the model, never the gate, decides what the verdict must be.

use super::model::{self, ConsentAnswer, Defect, Id, Input, Model, Reply, Request, Verdict};
use super::*;
use mrtr_gate_core::{FinishRequest, Registration, RetryRequest, ServerIdentity, TerminalOutcome};

const SERVERS: [&str; 2] = [SERVER, OTHER_SERVER];
const USERS: [&str; 2] = [USER, "mallory@example.com"];
const TENANTS: [&str; 2] = [TENANT, "tenant-b"];
const IDS: std::ops::RangeInclusive<Id> = 1..=5;
const LIFETIMES_MS: [u64; 2] = [8_000, 30_000];

#[derive(Clone, Copy, Debug)]
enum Target {
    /// The live id of the picked binding, on its server.
    Live(usize),
    /// An id the picked binding used before its live one (its original id if none).
    Stale(usize),
    /// Any id on any server.
    Raw { server: usize, id: Id },
}

#[derive(Clone, Copy, Debug)]
enum Who {
    Same,
    OtherUser,
    OtherTenant,
}

#[derive(Clone, Copy, Debug)]
enum RetryId {
    /// The lowest id no binding on the server uses.
    Fresh,
    Raw(Id),
}

/// How to answer a round: per input, an index into its pool of answers (0 is a right
/// answer), cycled over the round's keys; then an optional change to the whole object.
#[derive(Clone, Debug)]
struct AnswerPlan {
    picks: Vec<usize>,
    change: Option<WholeChange>,
}

#[derive(Clone, Copy, Debug)]
enum WholeChange {
    ExtraKey,
    MissingKey,
    NotAnObject,
}

#[derive(Clone, Debug)]
enum Op {
    Register {
        gate: usize,
        server: usize,
        id: Id,
        user: usize,
        tenant: usize,
        args: u8,
        url_declared: bool,
        lifetime: usize,
        max_rounds: u32,
        defect: Option<Defect>,
    },
    Respond {
        gate: usize,
        target: Target,
        from_other_server: bool,
        reply: Reply,
    },
    Retry {
        gate: usize,
        target: Target,
        who: Who,
        retry_id: RetryId,
        answers: AnswerPlan,
        consent: ConsentAnswer,
    },
    Finish {
        gate: usize,
        target: Target,
        who: Who,
        cancel: bool,
    },
    Expire {
        gate: usize,
    },
    Advance {
        ms: u64,
    },
}

fn form_answers() -> Vec<Value> {
    vec![
        accept_with(json!({"login": "octocat"})),
        accept_with(json!({"login": "octocat", "count": 3, "confirm": true})),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        accept_with(json!({"login": "o", "count": 2.0})),
        accept_with(json!({"login": 5})),
        accept_with(json!({"login": ""})),
        accept_with(json!({"count": 3})),
        accept_with(json!({"login": "o", "count": 11})),
        accept_with(json!({"login": "o", "extra": 1})),
        json!({"action": "accept"}),
        json!({"action": "decline", "content": {}}),
        json!({"action": "maybe"}),
        json!({"action": "accept", "content": {"login": "o"}, "extra": 1}),
        json!(5),
    ]
}

fn url_answers() -> Vec<Value> {
    vec![
        json!({"action": "accept"}),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        accept_with(json!({"x": 1})),
        json!({"action": "cancel", "content": {"x": 1}}),
        json!({"action": "nope"}),
        json!("x"),
    ]
}

fn arb_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => any::<usize>().prop_map(Target::Live),
        1 => any::<usize>().prop_map(Target::Stale),
        2 => (0usize..2, IDS).prop_map(|(server, id)| Target::Raw { server, id }),
    ]
}

fn arb_who() -> impl Strategy<Value = Who> {
    prop_oneof![8 => Just(Who::Same), 1 => Just(Who::OtherUser), 1 => Just(Who::OtherTenant)]
}

fn arb_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        24 => Just(Request::Form),
        12 => Just(Request::Url),
        1 => Just(Request::FormBadSchema),
        1 => Just(Request::UrlUnsafe),
        1 => Just(Request::UnknownMode),
    ]
}

fn arb_reply() -> impl Strategy<Value = Reply> {
    let keys = prop::sample::select(vec!["f0", "f1", "u0", "a b", "名前"]);
    let requests = prop::collection::btree_map(keys.prop_map(str::to_owned), arb_request(), 0..3);
    let state = prop_oneof![
        4 => Just(None),
        3 => "[a-z]{1,6}".prop_map(Some),
        1 => Just(Some(String::new())),
    ];
    prop_oneof![
        10 => (requests, state).prop_map(|(requests, state)| Reply::InputRequired { requests, state }),
        1 => Just(Reply::Complete),
        1 => Just(Reply::Error),
        1 => Just(Reply::BadResultType),
    ]
}

fn arb_answers() -> impl Strategy<Value = AnswerPlan> {
    let pick = prop_oneof![6 => Just(0usize), 1 => 0usize..16];
    let change = prop_oneof![
        12 => Just(None),
        1 => Just(Some(WholeChange::ExtraKey)),
        1 => Just(Some(WholeChange::MissingKey)),
        1 => Just(Some(WholeChange::NotAnObject)),
    ];
    (prop::collection::vec(pick, 1..3), change)
        .prop_map(|(picks, change)| AnswerPlan { picks, change })
}

fn arb_consent() -> impl Strategy<Value = ConsentAnswer> {
    prop_oneof![
        12 => Just(ConsentAnswer::Grant),
        1 => Just(ConsentAnswer::Refuse),
        1 => Just(ConsentAnswer::GrantOtherView),
        1 => Just(ConsentAnswer::GrantOtherAnswers),
        1 => Just(ConsentAnswer::Fail),
    ]
}

fn arb_defect() -> impl Strategy<Value = Option<Defect>> {
    prop_oneof![
        20 => Just(None),
        1 => Just(Some(Defect::EmptyUser)),
        1 => Just(Some(Defect::ZeroLifetime)),
        1 => Just(Some(Defect::EmptyUserAndZeroLifetime)),
        1 => Just(Some(Defect::ParamsCarryState)),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let gate = 0usize..2;
    let register = (
        gate.clone(),
        0usize..2,
        IDS,
        prop_oneof![5 => Just(0usize), 1 => Just(1usize)],
        prop_oneof![5 => Just(0usize), 1 => Just(1usize)],
        0u8..2,
        prop::bool::weighted(0.7),
        0usize..2,
        1u32..4,
        arb_defect(),
    )
        .prop_map(
            |(gate, server, id, user, tenant, args, url_declared, lifetime, max_rounds, defect)| {
                Op::Register {
                    gate,
                    server,
                    id,
                    user,
                    tenant,
                    args,
                    url_declared,
                    lifetime,
                    max_rounds,
                    defect,
                }
            },
        );
    let respond = (
        gate.clone(),
        arb_target(),
        prop::bool::weighted(0.1),
        arb_reply(),
    )
        .prop_map(|(gate, target, from_other_server, reply)| Op::Respond {
            gate,
            target,
            from_other_server,
            reply,
        });
    let retry_id = prop_oneof![4 => Just(RetryId::Fresh), 1 => IDS.prop_map(RetryId::Raw)];
    let retry = (
        gate.clone(),
        arb_target(),
        arb_who(),
        retry_id,
        arb_answers(),
        arb_consent(),
    )
        .prop_map(
            |(gate, target, who, retry_id, answers, consent)| Op::Retry {
                gate,
                target,
                who,
                retry_id,
                answers,
                consent,
            },
        );
    let finish = (gate.clone(), arb_target(), arb_who(), any::<bool>()).prop_map(
        |(gate, target, who, cancel)| Op::Finish {
            gate,
            target,
            who,
            cancel,
        },
    );
    prop_oneof![
        3 => register,
        6 => respond,
        6 => retry,
        1 => finish,
        1 => gate.prop_map(|gate| Op::Expire { gate }),
        // Exact lifetimes and the grace, to land on the boundaries.
        2 => prop_oneof![
            6 => 0u64..2_000,
            1 => 5_000u64..40_000,
            1 => prop::sample::select(vec![1u64, 8_000, 30_000, 60_000, 61_000]),
        ]
            .prop_map(|ms| Op::Advance { ms }),
    ]
}

struct World {
    fx: Fx,
    other: TestGate,
    model: Model,
}

/// Where an operation lands: server, id, and the principal it acts for.
struct Resolved {
    server: usize,
    id: Id,
    user: String,
    tenant: String,
}

fn origin(server: usize) -> ServerIdentity {
    ServerIdentity::origin(SERVERS[server]).unwrap()
}

impl World {
    fn new() -> Self {
        let fx = Fx::new();
        let other = fx.second_gate();
        Self {
            fx,
            other,
            model: Model::new(T0),
        }
    }

    fn gate(&mut self, which: usize) -> &mut TestGate {
        if which == 0 {
            &mut self.fx.gate
        } else {
            &mut self.other
        }
    }

    /// `Live` and `Stale` pick among the bindings in `wanted` (the ones the operation can
    /// succeed on, so that deep states are reached), or among all bindings if none is.
    fn resolve(
        &self,
        target: Target,
        who: Who,
        wanted: impl Fn(&model::Binding) -> bool,
    ) -> Resolved {
        let now = self.model.now;
        let mut bindings: Vec<_> = self
            .model
            .bindings
            .iter()
            .filter(|(_, b)| now < b.expires_at_ms && wanted(b))
            .collect();
        if bindings.is_empty() {
            bindings = self.model.bindings.iter().collect();
        }
        let (server, id, user, tenant) = match target {
            Target::Live(pick) | Target::Stale(pick) if !bindings.is_empty() => {
                let ((server, _), b) = bindings[pick % bindings.len()];
                let id = match target {
                    Target::Stale(_) => b.used.iter().rev().nth(1).copied().unwrap_or(b.used[0]),
                    _ => b.live,
                };
                (*server, id, b.user.clone(), b.tenant.clone())
            }
            Target::Raw { server, id } => (server, id, USER.to_owned(), TENANT.to_owned()),
            _ => (0, 1, USER.to_owned(), TENANT.to_owned()),
        };
        let swap = |v: &str, pool: [&str; 2]| -> String {
            if v == pool[0] { pool[1] } else { pool[0] }.to_owned()
        };
        let (user, tenant) = match who {
            Who::Same => (user, tenant),
            Who::OtherUser => (swap(&user, USERS), tenant),
            Who::OtherTenant => (user, swap(&tenant, TENANTS)),
        };
        Resolved {
            server,
            id,
            user,
            tenant,
        }
    }

    fn answers(&self, on: &Resolved, plan: &AnswerPlan) -> Value {
        let inputs = self
            .model
            .holder(on.server, on.id)
            .and_then(|k| self.model.bindings[&k].open.clone())
            .map(|r| r.inputs)
            .unwrap_or_default();
        let (forms, urls) = (form_answers(), url_answers());
        let mut m = serde_json::Map::new();
        for (i, (key, input)) in inputs.iter().enumerate() {
            let pick = plan.picks[i % plan.picks.len()];
            let pool = if *input == Input::Url { &urls } else { &forms };
            m.insert(key.clone(), pool[pick % pool.len()].clone());
        }
        match plan.change {
            None => Value::Object(m),
            Some(WholeChange::ExtraKey) => {
                m.insert("zz".into(), json!({"action": "decline"}));
                Value::Object(m)
            }
            Some(WholeChange::MissingKey) => {
                let first = m.keys().next().cloned();
                first.map(|k| m.remove(&k));
                Value::Object(m)
            }
            Some(WholeChange::NotAnObject) => json!(["not", "an", "object"]),
        }
    }

    fn apply(&mut self, op: &Op) -> (Verdict, Result<Verdict, Denial>) {
        match op.clone() {
            Op::Register {
                gate,
                server,
                id,
                user,
                tenant,
                args,
                url_declared,
                lifetime,
                max_rounds,
                defect,
            } => {
                let caps = if url_declared {
                    json!({"elicitation": {"form": {}, "url": {}}})
                } else {
                    json!({"elicitation": {"form": {}}})
                };
                let mut params = tool_params_caps("t", json!({"n": args}), caps);
                let mut policy = Policy {
                    round_trip_lifetime_ms: LIFETIMES_MS[lifetime],
                    max_rounds,
                    ..Policy::default()
                };
                let mut user = USERS[user].to_owned();
                match defect {
                    Some(Defect::EmptyUser) => user.clear(),
                    Some(Defect::ZeroLifetime) => policy.round_trip_lifetime_ms = 0,
                    Some(Defect::EmptyUserAndZeroLifetime) => {
                        user.clear();
                        policy.round_trip_lifetime_ms = 0;
                    }
                    Some(Defect::ParamsCarryState) => params["requestState"] = json!("s"),
                    None => {}
                }
                let want = self.model.register(
                    server,
                    id,
                    &user,
                    TENANTS[tenant],
                    json!({"n": args}),
                    url_declared,
                    LIFETIMES_MS[lifetime],
                    max_rounds,
                    defect,
                );
                let got = self.gate(gate).register(Registration {
                    request_id: RequestId::Number(id),
                    server: origin(server),
                    user,
                    tenant: TENANTS[tenant].into(),
                    method: "tools/call".into(),
                    params_json: params.to_string(),
                    policy,
                });
                (
                    want,
                    got.map(|r| Verdict::Registered {
                        expires_at_ms: r.expires_at_ms,
                    }),
                )
            }
            Op::Respond {
                gate,
                target,
                from_other_server,
                reply,
            } => {
                let on = self.resolve(target, Who::Same, |b| b.open.is_none());
                let server = if from_other_server {
                    1 - on.server
                } else {
                    on.server
                };
                let want = self.model.respond(server, on.id, &reply);
                let text = match &reply {
                    Reply::Complete => response(on.id, complete()),
                    Reply::Error => error_response(on.id, -32603),
                    Reply::BadResultType => response(on.id, json!({"resultType": "partial"})),
                    Reply::InputRequired { requests, state } => {
                        let mut result = json!({"resultType": "input_required"});
                        if !requests.is_empty() {
                            let wire: serde_json::Map<String, Value> = requests
                                .iter()
                                .map(|(k, r)| (k.clone(), wire_request(*r)))
                                .collect();
                            result["inputRequests"] = Value::Object(wire);
                        }
                        if let Some(s) = state {
                            result["requestState"] = json!(s);
                        }
                        response(on.id, result)
                    }
                };
                let got = self.gate(gate).accept_response(&origin(server), &text);
                let got = got.map(|v| match v {
                    ResponseVerdict::InputRequired(view) => {
                        assert_view_is_canonical(&view);
                        Verdict::Round(view.input_keys, view.round)
                    }
                    ResponseVerdict::Complete => Verdict::Complete,
                    ResponseVerdict::Error(_) => Verdict::ServerError,
                });
                (want, got)
            }
            Op::Retry {
                gate,
                target,
                who,
                retry_id,
                answers,
                consent,
            } => {
                let on = self.resolve(target, who, |b| b.open.is_some());
                let retry_id = match retry_id {
                    RetryId::Raw(id) => id,
                    RetryId::Fresh => (1..)
                        .find(|id| self.model.holder(on.server, *id).is_none())
                        .unwrap_or(0),
                };
                let answers = self.answers(&on, &answers);
                let round = self
                    .model
                    .holder(on.server, on.id)
                    .map(|k| self.model.bindings[&k].clone());
                let want = self.model.retry(
                    on.server, on.id, retry_id, &on.user, &on.tenant, &answers, consent,
                );
                self.fx.consent.set_default(match consent {
                    ConsentAnswer::Grant => ScriptedAnswer::Grant,
                    ConsentAnswer::Refuse => ScriptedAnswer::Refuse,
                    ConsentAnswer::GrantOtherView => ScriptedAnswer::GrantOtherView,
                    ConsentAnswer::GrantOtherAnswers => ScriptedAnswer::GrantOtherAnswers,
                    ConsentAnswer::Fail => ScriptedAnswer::Fail,
                });
                let got = self.gate(gate).build_retry(RetryRequest {
                    server: origin(on.server),
                    request_id: RequestId::Number(on.id),
                    retry_id: RequestId::Number(retry_id),
                    user: on.user.clone(),
                    tenant: on.tenant.clone(),
                    responses_json: answers.to_string(),
                });
                let got = got.map(|retry| {
                    if let Some(b) = &round {
                        assert_retry_rebuilt_from_registration(
                            &retry.request_json,
                            retry_id,
                            b,
                            &answers,
                        );
                    }
                    Verdict::Retry {
                        round: retry.round,
                        with_receipt: retry.consent_receipt_id.is_some(),
                    }
                });
                (want, got)
            }
            Op::Finish {
                gate,
                target,
                who,
                cancel,
            } => {
                let on = self.resolve(target, who, |_| true);
                let want = self
                    .model
                    .finish(on.server, on.id, &on.user, &on.tenant, cancel);
                let got = self.gate(gate).finish(FinishRequest {
                    server: origin(on.server),
                    request_id: RequestId::Number(on.id),
                    user: on.user,
                    tenant: on.tenant,
                    outcome: if cancel {
                        CallerOutcome::Cancelled
                    } else {
                        CallerOutcome::Error("transport_failed".into())
                    },
                });
                let got = got.map(|t| {
                    Verdict::Finished(match t {
                        TerminalOutcome::Expired => "expired",
                        TerminalOutcome::Cancelled => "cancelled",
                        TerminalOutcome::Error => "error",
                        TerminalOutcome::Complete => "complete",
                    })
                });
                (want, got)
            }
            Op::Expire { gate } => {
                let want = self.model.expire_stale();
                (want, self.gate(gate).expire_stale().map(Verdict::Expired))
            }
            Op::Advance { ms } => {
                self.fx.clock.advance(ms);
                (self.model.advance(ms), Ok(Verdict::ClockAdvanced))
            }
        }
    }
}

fn wire_request(r: Request) -> Value {
    match r {
        Request::Form => form("F"),
        Request::FormBadSchema => form_request(
            None,
            "F",
            json!({"type": "object", "properties": {"login": {"type": "string", "pattern": "^a"}}}),
        ),
        Request::Url => url_request("https://auth.example.com/x?y=1"),
        Request::UrlUnsafe => url_request("http://auth.example.com/x"),
        Request::UnknownMode => {
            json!({"method": "elicitation/create", "params": {"mode": "voice", "message": "m"}})
        }
    }
}

/// G001: the retry carries the registered method and arguments, the new id, exactly the
/// answers consented to (none for a state-only round) and exactly the round's state.
fn assert_retry_rebuilt_from_registration(
    text: &str,
    retry_id: Id,
    before: &model::Binding,
    answers: &Value,
) {
    let msg = parse(text);
    let round = before.open.as_ref().expect("a retry answers an open round");
    assert_eq!(msg["id"], json!(retry_id));
    assert_eq!(msg["method"], json!("tools/call"));
    assert_eq!(msg["params"]["name"], json!("t"));
    assert_eq!(msg["params"]["arguments"], before.args);
    let sent = msg["params"].get("inputResponses");
    if round.inputs.is_empty() {
        assert_eq!(sent, None, "a state-only retry sends no answers");
    } else {
        // The answers go out as the canonical text the user consented to (`2.0` is `2`).
        let canonical = mrtr_gate_core::canonical::to_canonical;
        assert_eq!(sent.map(canonical), Some(canonical(answers)));
    }
    assert_eq!(
        msg["params"].get("requestState").and_then(Value::as_str),
        round.state.as_deref()
    );
}

fn verdict_of(r: &Result<Verdict, Denial>) -> Verdict {
    match r {
        Ok(v) => v.clone(),
        Err(d) => Verdict::Denied(d.error.code()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn the_gate_agrees_with_the_model(ops in prop::collection::vec(arb_op(), 1..80)) {
        let mut world = World::new();
        for (step, op) in ops.iter().enumerate() {
            let (want, got) = world.apply(op);
            prop_assert_eq!(
                &want,
                &verdict_of(&got),
                "step {} {:?}: the model says {:?}, the gate {:?}",
                step, op, want, got
            );
        }
        world.fx.assert_chain();
    }
}
