//! The driver: each operation to the gate and to the model, their results compared.

use crate::common::*;
use crate::ops::*;
use crate::rules::*;
use mrtr_gate_core::memory::ScriptedAnswer;
use mrtr_gate_core::{
    ALL_CODES, CallerOutcome, Denial, Policy, RequestId, ResponseVerdict, ServerIdentity,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn assert_known(d: &Denial) {
    assert!(
        ALL_CODES.contains(&d.error.code()),
        "unknown code {}",
        d.error.code()
    );
}

pub(crate) struct World {
    fx: Fx,
    pub(crate) other: TestGate,
    pub(crate) model: Model,
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
    pub(crate) fn new() -> Self {
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

    pub(crate) fn gate(&mut self, which: usize) -> &mut TestGate {
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
    pub(crate) fn run(&mut self, op: &Op) -> Option<(Seen, Seen)> {
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

    pub(crate) fn apply(&mut self, op: &Op) {
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

    pub(crate) fn clock(&mut self, pick: &ClockPick) {
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
