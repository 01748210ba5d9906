//! The driver: each operation to the gate and to the model, their results compared.

use crate::common::*;
use crate::model::content::{Allowed, Input};
use crate::model::ops::*;
use crate::model::rules::*;
use crate::model::wire::{answers_value, reply_text};
use mrtr_gate_core::memory::ScriptedAnswer;
use mrtr_gate_core::{
    ALL_CODES, CallerOutcome, Denial, DeprecatedMethod, Policy, RequestId, ResponseVerdict,
    ServerIdentity,
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
            Target::Previous { k } if !bindings.is_empty() => {
                let b = &bindings[k % bindings.len()];
                let previous = b.used.iter().rev().nth(1).unwrap_or(&b.original);
                (b.server, previous.clone())
            }
            Target::Live { k, .. }
            | Target::Original { k }
            | Target::Previous { k }
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

    /// What a client sends as its retry of the round on (server, id): the params it sent
    /// (the binding's, as the model holds them, or a request of the pool's shape) with the
    /// round's state and `answers` (`{}` omitted, as the Python SDK does), then `change`.
    fn client_params(
        &self,
        server: usize,
        id: &RequestId,
        answers: &Value,
        change: ClientChange,
    ) -> (Option<RequestId>, &'static str, Value) {
        let binding = self.model.find(server, id).map(|i| &self.model.bindings[i]);
        let mut params =
            binding.map_or_else(|| tool_params("t", json!({"n": 0})), |b| b.params.clone());
        let mut state = binding
            .and_then(|b| b.open.as_ref())
            .and_then(|o| o.state.clone());
        let mut method = "tools/call";
        let mut request_id = Some(id.clone());
        match change {
            ClientChange::None => {}
            ClientChange::Meta => params["_meta"] = json!({"progressToken": 1}),
            ClientChange::Arguments => params["arguments"] = json!({"n": 99}),
            ClientChange::Name => params["name"] = json!("t2"),
            ClientChange::Method => method = "prompts/get",
            ClientChange::State => {
                state = Some(state.map_or_else(|| "added".to_owned(), |s| format!("{s}!")));
            }
            ClientChange::NoState => state = None,
            ClientChange::NoRound => request_id = None,
        }
        if answers.as_object().is_none_or(|a| !a.is_empty()) {
            params["inputResponses"] = answers.clone();
        }
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        (request_id, method, params)
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
                setup,
                defect,
            } => {
                let id = pool_id(id);
                let allowed = Allowed {
                    url_declared: setup.url_declared,
                    roots_declared: setup.roots_declared,
                    roots_approved: setup.roots_approved,
                };
                let mut caps = json!({"elicitation": {"form": {}}});
                if allowed.url_declared {
                    caps["elicitation"]["url"] = json!({});
                }
                if allowed.roots_declared {
                    caps["roots"] = json!({});
                }
                let params = tool_params_caps("t", json!({"n": arg}), caps);
                let mut policy = Policy::default();
                if setup.short_lifetime {
                    policy.round_trip_lifetime_ms = SHORT_LIFETIME_MS;
                }
                if let Some(max_rounds) = setup.max_rounds {
                    policy.max_rounds = max_rounds;
                }
                if allowed.roots_approved {
                    policy.allowed_deprecated = vec![DeprecatedMethod::RootsList];
                }
                let mut registration = mrtr_gate_core::Registration {
                    request_id: id.clone(),
                    server: server_identity(server),
                    user: USERS[user].into(),
                    tenant: TENANTS[tenant].into(),
                    method: "tools/call".into(),
                    params_json: params.to_string(),
                    policy: policy.clone(),
                };
                match defect {
                    Some(Defect::EmptyUser) => registration.user.clear(),
                    Some(Defect::ZeroLifetime) => registration.policy.round_trip_lifetime_ms = 0,
                    Some(Defect::EmptyUserAndZeroLifetime) => {
                        registration.user.clear();
                        registration.policy.round_trip_lifetime_ms = 0;
                    }
                    Some(Defect::ParamsCarryState) => {
                        let mut carrying = params.clone();
                        carrying["requestState"] = json!("s");
                        registration.params_json = carrying.to_string();
                    }
                    None => {}
                }
                let got = seen_of(self.gate(gate).register(registration), |r| {
                    Seen::Registered {
                        request: parse(&r.request_json),
                        expires_at: r.expires_at_ms,
                    }
                });
                let want = self
                    .model
                    .register(server, &id, user, tenant, &params, &policy, allowed, defect);
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
                client,
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
                    RetryIdPick::LowestFree => (1..)
                        .map(RequestId::Number)
                        .find(|id| self.model.find(server, id).is_none())
                        .unwrap_or(RequestId::Number(0)),
                    RetryIdPick::Pool(n) => pool_id(n),
                };
                let answers = answers_value(&self.round_inputs(server, &id), &answers);
                let (own_user, own_tenant) = self.principals_of(server, &id);
                let user = own_user ^ usize::from(other_user);
                let tenant = own_tenant ^ usize::from(other_tenant);
                let seen = |r: mrtr_gate_core::Retry| Seen::Retry {
                    request: parse(&r.request_json),
                    round: r.round,
                    receipt: r.consent_receipt_id.is_some(),
                };
                let (got, want) = if let Some(change) = client {
                    let (request_id, method, params) =
                        self.client_params(server, &id, &answers, change);
                    let request = mrtr_gate_core::ClientRetry {
                        server: server_identity(server),
                        request_id: request_id.clone(),
                        retry_id: retry_id.clone(),
                        user: USERS[user].into(),
                        tenant: TENANTS[tenant].into(),
                        method: method.into(),
                        params_json: params.to_string(),
                    };
                    let got = seen_of(self.gate(gate).retry_from_client(request), seen);
                    let want = self.model.client_retry(
                        server,
                        request_id.as_ref(),
                        &retry_id,
                        user,
                        tenant,
                        method,
                        &params,
                    );
                    (got, want)
                } else {
                    let request = mrtr_gate_core::RetryRequest {
                        server: server_identity(server),
                        request_id: id.clone(),
                        retry_id: retry_id.clone(),
                        user: USERS[user].into(),
                        tenant: TENANTS[tenant].into(),
                        responses_json: answers.to_string(),
                    };
                    let got = seen_of(self.gate(gate).build_retry(request), seen);
                    let want = self
                        .model
                        .retry(server, &id, &retry_id, user, tenant, &answers);
                    (got, want)
                };
                let want = with_audit(Operation::Retry, want);
                (got, want)
            }
            Op::QueueConsent(answer) => {
                self.fx.consent.push(match answer {
                    ConsentAnswer::Grant => ScriptedAnswer::Grant,
                    ConsentAnswer::Refuse => ScriptedAnswer::Refuse,
                    ConsentAnswer::GrantOtherView => ScriptedAnswer::GrantOtherView,
                    ConsentAnswer::GrantOtherAnswers => ScriptedAnswer::GrantOtherAnswers,
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

    /// The trail both instances wrote is one intact chain.
    pub(crate) fn assert_chain(&self) {
        self.fx.assert_chain();
    }

    pub(crate) fn apply(&mut self, op: &Op) {
        let compared = self.run(op);
        if self.model.clock_out_of_range && !matches!(op, Op::Clock(_) | Op::QueueConsent(_)) {
            // An out-of-range reading lasts one operation; then the clock reads right again.
            self.clock(&ClockPick::Forward(0));
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
            ClockPick::Forward(ms) => m.now += ms,
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
