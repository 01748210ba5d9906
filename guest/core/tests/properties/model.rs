//! A small executable model of the gate's rules, written from `docs/errors.md` (every code and
//! what triggers it), `docs/corpus.md` ("Behaviour worth knowing") and the control's G001, not
//! from the gate's code. `differential` drives the real gate and this model with the same
//! operations and holds them to the same verdict.
//!
//! The model is a plain state machine: bindings keyed by (server, original id), each with its
//! principal, its arguments, the ids it used, its open round and its lifetime. Each rule is a
//! line or two. Where several rules fail at once the first one checked wins; the order is
//! stated at each operation.
//!
//! What it leaves out is listed in `docs/corpus.md`, "The differential model".

use serde_json::Value;
use std::collections::BTreeMap;

pub type Id = i64;
/// An index into the test's pool of servers: ids are per server.
pub type Server = usize;

/// How long storage keeps an expired binding so that whoever meets it can end it as expired
/// (`EXPIRY_GRACE_MS`); after that it vanishes without a terminal event.
pub const GRACE_MS: u64 = 60_000;

/// What an input of an open round must be answered as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    Form,
    Url,
}

/// One input request a server may put in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// A form with the fixture's schema (`common::form_schema`).
    Form,
    /// A form whose schema uses `pattern`, outside the MCP subset.
    FormBadSchema,
    /// An `https://` URL elicitation.
    Url,
    /// An `http://` URL elicitation.
    UrlUnsafe,
    /// An elicitation in a mode that is neither `form` nor `url`.
    UnknownMode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    InputRequired {
        requests: BTreeMap<String, Request>,
        state: Option<String>,
    },
    Complete,
    Error,
    /// `resultType` neither `complete` nor `input_required`.
    BadResultType,
}

/// What `register` is handed wrong, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defect {
    EmptyUser,
    ZeroLifetime,
    EmptyUserAndZeroLifetime,
    ParamsCarryState,
}

/// What the consent host answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsentAnswer {
    Grant,
    Refuse,
    GrantOtherView,
    GrantOtherAnswers,
    Fail,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Registered {
        expires_at_ms: u64,
    },
    /// An accepted round: its keys (sorted) and its number.
    Round(Vec<String>, u32),
    Complete,
    ServerError,
    Retry {
        round: u32,
        with_receipt: bool,
    },
    Finished(&'static str),
    Expired(u32),
    ClockAdvanced,
    Denied(&'static str),
}

#[derive(Clone, Debug)]
pub struct Round {
    pub inputs: BTreeMap<String, Input>,
    pub state: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Binding {
    pub user: String,
    pub tenant: String,
    pub args: Value,
    pub url_declared: bool,
    pub max_rounds: u32,
    pub live: Id,
    /// The original id first, then every retry id.
    pub used: Vec<Id>,
    pub rounds: u32,
    pub open: Option<Round>,
    pub expires_at_ms: u64,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub now: u64,
    pub bindings: BTreeMap<(Server, Id), Binding>,
}

use Verdict::Denied;

impl Model {
    pub fn new(now: u64) -> Self {
        Self {
            now,
            bindings: BTreeMap::new(),
        }
    }

    pub fn advance(&mut self, ms: u64) -> Verdict {
        self.now += ms;
        // Storage forgets a binding once the grace after its lifetime has passed.
        let now = self.now;
        self.bindings
            .retain(|_, b| now < b.expires_at_ms + GRACE_MS);
        Verdict::ClockAdvanced
    }

    /// Expiry is `now >= registered_at + lifetime`.
    pub fn expired(&self, b: &Binding) -> bool {
        self.now >= b.expires_at_ms
    }

    /// The binding on `server` that uses `id` (as its original id or a retry id).
    pub fn holder(&self, server: Server, id: Id) -> Option<(Server, Id)> {
        self.bindings
            .iter()
            .find(|((s, _), b)| *s == server && b.used.contains(&id))
            .map(|(k, _)| *k)
    }

    /// Registration: the input first (binding fields before the policy), the id's availability
    /// on its server last.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &mut self,
        server: Server,
        id: Id,
        user: &str,
        tenant: &str,
        args: Value,
        url_declared: bool,
        lifetime_ms: u64,
        max_rounds: u32,
        defect: Option<Defect>,
    ) -> Verdict {
        match defect {
            Some(Defect::EmptyUser | Defect::EmptyUserAndZeroLifetime) => {
                return Denied("active_request_binding_missing");
            }
            Some(Defect::ZeroLifetime) => return Denied("invalid_mrtr_lifetime"),
            Some(Defect::ParamsCarryState) => return Denied("params_carry_mrtr_fields"),
            None => {}
        }
        // Taken while any binding on the server still uses the id, expired or not.
        if self.holder(server, id).is_some() {
            return Denied("request_id_in_use");
        }
        let expires_at_ms = self.now + lifetime_ms;
        let binding = Binding {
            user: user.into(),
            tenant: tenant.into(),
            args,
            url_declared,
            max_rounds,
            live: id,
            used: vec![id],
            rounds: 0,
            open: None,
            expires_at_ms,
        };
        self.bindings.insert((server, id), binding);
        Verdict::Registered { expires_at_ms }
    }

    /// A response from `server` for `id`. Order: the id must be the live id of a binding on
    /// that server; the lifetime; the result type; a round while one is open is a duplicate;
    /// the round limit; the round's own content.
    pub fn respond(&mut self, server: Server, id: Id, reply: &Reply) -> Verdict {
        let Some(key) = self.holder(server, id) else {
            return Denied("no_live_request");
        };
        let b = &self.bindings[&key];
        if b.live != id {
            return Denied("no_live_request"); // late or replayed: the binding is kept
        }
        if self.expired(b) {
            self.bindings.remove(&key);
            return Denied("no_live_request");
        }
        let (requests, state) = match reply {
            Reply::InputRequired { requests, state } => (requests, state),
            Reply::Complete | Reply::Error | Reply::BadResultType => {
                self.bindings.remove(&key);
                return match reply {
                    Reply::Complete => Verdict::Complete,
                    Reply::Error => Verdict::ServerError,
                    _ => Denied("invalid_result_type"),
                };
            }
        };
        if b.open.is_some() {
            return Denied("duplicate_round"); // the open round stays as it was
        }
        if b.rounds >= b.max_rounds {
            self.bindings.remove(&key);
            return Denied("round_limit_exceeded");
        }
        if let Err(code) = round_content(requests, state.as_deref(), b.url_declared) {
            self.bindings.remove(&key);
            return Denied(code);
        }
        let inputs: BTreeMap<String, Input> = requests
            .iter()
            .map(|(k, r)| {
                let input = if *r == Request::Url {
                    Input::Url
                } else {
                    Input::Form
                };
                (k.clone(), input)
            })
            .collect();
        let keys = inputs.keys().cloned().collect();
        let b = self.bindings.get_mut(&key).unwrap();
        b.rounds += 1;
        b.open = Some(Round {
            inputs,
            state: state.clone(),
        });
        Verdict::Round(keys, b.rounds)
    }

    /// The caller's answers for the round that arrived on `on`. Order: the id must name a
    /// binding on the server; the lifetime; the round must be open on the live id; the retry
    /// id must be new to this binding; the principal must be the binding's; the answers; the
    /// retry id must be free on the server; consent (only for a round with inputs).
    #[allow(clippy::too_many_arguments)]
    pub fn retry(
        &mut self,
        server: Server,
        on: Id,
        retry_id: Id,
        user: &str,
        tenant: &str,
        answers: &Value,
        consent: ConsentAnswer,
    ) -> Verdict {
        let Some(key) = self.holder(server, on) else {
            return Denied("inactive_mrtr_round");
        };
        let b = &self.bindings[&key];
        if self.expired(b) {
            self.bindings.remove(&key);
            return Denied("inactive_mrtr_round");
        }
        let Some(round) = b.open.as_ref().filter(|_| b.live == on) else {
            return Denied("inactive_mrtr_round"); // consumed already, or a stale id
        };
        if b.used.contains(&retry_id) {
            return Denied("retry_requires_new_jsonrpc_id");
        }
        if b.user != user || b.tenant != tenant {
            return Denied("mrtr_identity_or_argument_mismatch");
        }
        if let Err(code) = answers_fit(&round.inputs, answers) {
            return Denied(code);
        }
        if self.holder(server, retry_id).is_some() {
            return Denied("retry_requires_new_jsonrpc_id"); // held by another binding
        }
        // A state-only round sends nothing of the user's: no prompt, no receipt.
        let with_receipt = !round.inputs.is_empty();
        if with_receipt {
            match consent {
                ConsentAnswer::Grant => {}
                ConsentAnswer::Fail => return Denied("consent_unavailable"),
                ConsentAnswer::Refuse => return Denied("consent_refused"),
                ConsentAnswer::GrantOtherView | ConsentAnswer::GrantOtherAnswers => {
                    return Denied("consent_mismatch");
                }
            }
        }
        let b = self.bindings.get_mut(&key).unwrap();
        b.open = None; // single use
        b.live = retry_id;
        b.used.push(retry_id);
        Verdict::Retry {
            round: b.rounds,
            with_receipt,
        }
    }

    /// The caller ends a binding by any id it used. Only its own principal may; past its
    /// lifetime it ends as expired whatever the caller said.
    pub fn finish(
        &mut self,
        server: Server,
        id: Id,
        user: &str,
        tenant: &str,
        cancel: bool,
    ) -> Verdict {
        let Some(key) = self.holder(server, id) else {
            return Denied("unknown_request");
        };
        let b = &self.bindings[&key];
        if b.user != user || b.tenant != tenant {
            return Denied("mrtr_identity_or_argument_mismatch");
        }
        let outcome = match (self.expired(b), cancel) {
            (true, _) => "expired",
            (false, true) => "cancelled",
            (false, false) => "error",
        };
        self.bindings.remove(&key);
        Verdict::Finished(outcome)
    }

    /// The sweeper ends every binding whose lifetime has passed.
    pub fn expire_stale(&mut self) -> Verdict {
        let now = self.now;
        let before = self.bindings.len();
        self.bindings.retain(|_, b| now < b.expires_at_ms);
        Verdict::Expired(u32::try_from(before - self.bindings.len()).unwrap())
    }
}

/// A round's content. A state, if sent, must be a non-empty string (named whatever else is
/// present); a round needs requests or a state; then each request in key order: its mode, its
/// form schema or URL, and last whether the client declared the capability.
fn round_content(
    requests: &BTreeMap<String, Request>,
    state: Option<&str>,
    url_declared: bool,
) -> Result<(), &'static str> {
    if state == Some("") {
        return Err("invalid_requestState");
    }
    if requests.is_empty() && state.is_none() {
        return Err("input_required_payload_empty");
    }
    for request in requests.values() {
        match request {
            Request::Form => {}
            Request::FormBadSchema => return Err("invalid_form_requestedSchema"),
            Request::UnknownMode => return Err("unknown_elicitation_mode"),
            Request::UrlUnsafe => return Err("unsafe_url_elicitation"),
            Request::Url if !url_declared => return Err("undeclared_capability"),
            Request::Url => {}
        }
    }
    Ok(())
}

/// The answers must be an object with exactly the round's keys (`{}` for a state-only round);
/// then each answer in key order: its shape, content only on `accept` (before the URL rule),
/// no content for a URL, and accepted form content valid against the schema shown.
fn answers_fit(inputs: &BTreeMap<String, Input>, answers: &Value) -> Result<(), &'static str> {
    let Value::Object(answers) = answers else {
        return Err("invalid_input_response");
    };
    if !answers.keys().eq(inputs.keys()) {
        return Err("input_response_population_mismatch");
    }
    for (key, input) in inputs {
        let Value::Object(a) = &answers[key] else {
            return Err("invalid_input_response");
        };
        if a.keys()
            .any(|k| !["action", "content", "_meta"].contains(&k.as_str()))
        {
            return Err("invalid_input_response");
        }
        let action = a.get("action").and_then(Value::as_str);
        if !matches!(action, Some("accept" | "decline" | "cancel")) {
            return Err("invalid_input_response");
        }
        let content = a.get("content");
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

/// `common::form_schema()`: `login` a required string of 1 to 39 characters, `count` an
/// integer from 1 to 10 (JSON Schema counts `2.0` as an integer), `confirm` a boolean, and no
/// other property.
fn fits_form_schema(content: Option<&Value>) -> bool {
    let Some(Value::Object(c)) = content else {
        return false;
    };
    let each_fits = c.iter().all(|(k, v)| match k.as_str() {
        "login" => v
            .as_str()
            .is_some_and(|s| (1..=39).contains(&s.chars().count())),
        "count" => v
            .as_f64()
            .is_some_and(|n| n.fract() == 0.0 && (1.0..=10.0).contains(&n)),
        "confirm" => v.is_boolean(),
        _ => false,
    });
    each_fits && c.contains_key("login")
}
