//! The model: the gate's rules as a small executable state machine, written from the rules
//! (docs/errors.md, docs/corpus.md "Behaviour worth knowing", the control's G001/G002, the
//! MRTR notes), not from the gate's code. What a round and its answers may hold is in
//! `content`.

use crate::model::content::{Allowed, Input, Request, check_answers, round_content};
use mrtr_gate_core::{
    CLOCK_SKEW_TOLERANCE_MS, EXPIRY_GRACE_MS, Policy, RequestId, TerminalOutcome,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug)]
pub(crate) struct OpenRound {
    /// Key -> what it asks for (sorted by key, like JSON object keys in the view).
    pub(crate) inputs: BTreeMap<String, Input>,
    pub(crate) state: Option<String>,
}

/// A binding the store still holds: the one registered request and where it stands.
#[derive(Clone, Debug)]
pub(crate) struct ModelBinding {
    pub(crate) server: usize,
    pub(crate) original: RequestId,
    pub(crate) user: usize,
    pub(crate) tenant: usize,
    pub(crate) params: Value,
    allowed: Allowed,
    /// The only id a response or a retry may name.
    pub(crate) live: RequestId,
    /// Every id it used (original first): all reserved on its server until it ends.
    pub(crate) used: Vec<RequestId>,
    pub(crate) open: Option<OpenRound>,
    rounds: u32,
    pub(crate) max_rounds: u32,
    created_at: u64,
    pub(crate) expires_at: u64,
}

/// What an operation visibly did: the same type for the gate and the model.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Seen {
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
pub(crate) fn denied(code: &'static str) -> Seen {
    Seen::Denied {
        code,
        audited: false,
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Operation {
    Register,
    Accept,
    Retry,
    Finish,
    ExpireStale,
}

/// Which denials leave a `rejected` event, the sink working (docs/errors.md, "Which denials
/// are audited").
pub(crate) fn audited(operation: Operation, code: &str) -> bool {
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

pub(crate) fn with_audit(operation: Operation, seen: Seen) -> Seen {
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
pub(crate) enum Reply {
    InputRequired {
        requests: BTreeMap<String, Request>,
        state: Option<String>,
    },
    Complete,
    Error(i64),
    /// `resultType` that is neither `complete` nor `input_required`.
    BadResultType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConsentAnswer {
    Grant,
    Refuse,
    GrantOtherView,
    GrantOtherAnswers,
    Fail,
}

/// What `register` is handed wrong, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Defect {
    EmptyUser,
    ZeroLifetime,
    /// Two faults at once: the binding's fields are checked before the policy.
    EmptyUserAndZeroLifetime,
    ParamsCarryState,
}

pub(crate) struct Model {
    pub(crate) now: u64,
    /// The clock reads beyond 2^53 - 1 (every operation is refused before anything else).
    pub(crate) clock_out_of_range: bool,
    pub(crate) bindings: Vec<ModelBinding>,
    /// Consent answers queued; an empty queue grants.
    pub(crate) consent: VecDeque<ConsentAnswer>,
}

impl Model {
    pub(crate) fn new(now: u64) -> Self {
        Self {
            now,
            clock_out_of_range: false,
            bindings: Vec::new(),
            consent: VecDeque::new(),
        }
    }

    /// The binding on `server` that uses `id` (ids are per server).
    pub(crate) fn find(&self, server: usize, id: &RequestId) -> Option<usize> {
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
    pub(crate) fn store_drops_stale(&mut self) {
        let now = self.now;
        self.bindings
            .retain(|b| now < b.expires_at.saturating_add(EXPIRY_GRACE_MS));
    }

    /// Precedence: the clock; the input (the binding's fields, the policy, the params); the
    /// id's availability on its server.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn register(
        &mut self,
        server: usize,
        id: &RequestId,
        user: usize,
        tenant: usize,
        params: &Value,
        policy: &Policy,
        allowed: Allowed,
        defect: Option<Defect>,
    ) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        match defect {
            Some(Defect::EmptyUser | Defect::EmptyUserAndZeroLifetime) => {
                return denied("active_request_binding_missing");
            }
            Some(Defect::ZeroLifetime) => return denied("invalid_mrtr_lifetime"),
            Some(Defect::ParamsCarryState) => return denied("params_carry_mrtr_fields"),
            None => {}
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
            allowed,
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
    /// rules; a duplicate round, then the round limit, then the round's content).
    pub(crate) fn accept(&mut self, server: usize, id: &RequestId, reply: &Reply) -> Seen {
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
            Reply::InputRequired { requests, state } => {
                if b.open.is_some() {
                    return denied("duplicate_round"); // kept: the open round unchanged
                }
                if b.rounds >= b.max_rounds {
                    self.end(i);
                    return denied("round_limit_exceeded");
                }
                let inputs = match round_content(requests, state.as_deref(), b.allowed) {
                    Ok(inputs) => inputs,
                    Err(code) => {
                        self.end(i);
                        return denied(code);
                    }
                };
                let b = &mut self.bindings[i];
                b.rounds += 1;
                let keys = inputs.keys().cloned().collect();
                b.open = Some(OpenRound {
                    inputs,
                    state: state.clone(),
                });
                Seen::Round {
                    number: b.rounds,
                    keys,
                    has_state: state.is_some(),
                }
            }
        }
    }

    /// Precedence: the clock; the binding; the clock against it; the lifetime; an open round
    /// on the live id; the retry id against the binding's own ids; user and tenant; the
    /// answers; the retry id against every other live binding; consent.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn retry(
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
                ConsentAnswer::GrantOtherView | ConsentAnswer::GrantOtherAnswers => {
                    return denied("consent_mismatch");
                }
                ConsentAnswer::Fail => return denied("consent_unavailable"),
            }
        }
        let b = &mut self.bindings[i];
        let mut params = b.params.clone();
        if receipt {
            // The answers go out as given: the values the user consented to (`2.0` and `2`
            // alike), each number with the digits it was given.
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

    /// `retry-from-client`: no round found is refused (audited); otherwise a retry whose
    /// request (its method, its params but `_meta` and the MRTR fields) is the binding's
    /// request, and whose state is the round's, with `inputResponses` (absent: `{}`) as the
    /// answers; anything else is a mismatch, judged after the principal and before the answers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn client_retry(
        &mut self,
        server: usize,
        id: Option<&RequestId>,
        retry_id: &RequestId,
        user: usize,
        tenant: usize,
        method: &str,
        params: &Value,
    ) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        let Some(id) = id else {
            return denied("inactive_mrtr_round");
        };
        let mut request = params.as_object().cloned().unwrap_or_default();
        let answers = request
            .remove("inputResponses")
            .unwrap_or_else(|| json!({}));
        let state = request.remove("requestState");
        request.remove("_meta");
        let same = |b: &ModelBinding| {
            let mut registered = b.params.as_object().cloned().unwrap_or_default();
            registered.remove("_meta");
            let round_state = b
                .open
                .as_ref()
                .and_then(|o| o.state.clone())
                .map(Value::from);
            method == "tools/call" && registered == request && round_state == state
        };
        // Every check of `retry` before the answers, then the client's own.
        let Some(i) = self.find(server, id) else {
            return self.retry(server, id, retry_id, user, tenant, &answers);
        };
        let b = &self.bindings[i];
        let ahead = self.clock_behind(b)
            || self.expired(b)
            || b.open.is_none()
            || b.live != *id
            || b.used.contains(retry_id)
            || b.user != user
            || b.tenant != tenant;
        if !ahead {
            if !answers.is_object() {
                return denied("invalid_input_response");
            }
            if !same(b) {
                return denied("mrtr_identity_or_argument_mismatch");
            }
        }
        self.retry(server, id, retry_id, user, tenant, &answers)
    }

    /// Precedence: the clock; the binding (by any id it used); user and tenant (another
    /// principal cannot end it, not even as expired); the clock against it; the lifetime.
    pub(crate) fn finish(
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

    pub(crate) fn expire_stale(&mut self) -> Seen {
        if self.clock_out_of_range {
            return denied("clock_out_of_range");
        }
        let before = self.bindings.len();
        let now = self.now;
        self.bindings.retain(|b| now < b.expires_at);
        Seen::Expired((before - self.bindings.len()) as u32)
    }
}
