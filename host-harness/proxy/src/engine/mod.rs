//! The proxy's core, free of any transport: it is handed one message at a time, from the
//! client or from the server, and says where what comes of it goes. The stdio wrapper and the
//! HTTP endpoint feed it lines and bodies; everything the gate decides is decided here.
//!
//! A gated request (`tools/call`, `prompts/get`, `resources/read`) is registered under an id
//! the proxy mints ([`crate::ids`]) and the gate's text goes upstream; its response goes to
//! the gate as received, and what the gate accepts reaches the client byte-exact but for the
//! client's id put back. What the gate refuses never reaches the client: it gets a JSON-RPC
//! error carrying the gate's code ([`crate::errors`]), and the binding ends.
//!
//! A client's retry (a gated method whose params carry `inputResponses` or `requestState`)
//! finds its round in the index of open rounds ([`crate::rounds`]) and the gate checks it
//! against that round and builds it (`retry-from-client`); a retry that matches no open round
//! is refused by the gate and audited, and nothing goes upstream.

use crate::capture::{self, Capture};
use crate::consent::DeferredConsent;
use crate::errors::Refusal;
use crate::ids::{IdMinter, MINTED_PREFIX, splice_id};
use crate::message::{FromClient, from_client};
use crate::metrics::{self, EngineGauges, Sent, Verdict};
use crate::no_cache;
use crate::rounds::{self, Filed, Named, RoundIndex};
use crate::trace::{self, CallTrace, Outcome};
use mrtr_gate_host::core::host::ConsentPrompt;
use mrtr_gate_host::core::{
    CallerOutcome, ClientRetry, EXPIRY_GRACE_MS, ErrorCause, ErrorCode, FinishRequest, Policy,
    Registration, RequestId, ResponseVerdict, ServerIdentity, URL_ELICITATION_REQUIRED, Unbound,
    canonical_responses, digest, limits, parse_members,
};
use mrtr_gate_host::wire::{FromServer, LEGACY_SERVER_REQUESTS, from_server};

use mrtr_gate_host::{GateApi, GateDenial};
use mrtr_gate_policy::{Decider, Decision};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the engine binds every call to.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The upstream as configured (the spawned command, the `--upstream` URL), never what
    /// the server or the client says about it.
    pub server: ServerIdentity,
    /// Who calls are bound to when the transport names nobody ([`Engine::on_client`]).
    pub principal: Principal,
    /// Every binding's policy.
    pub policy: Policy,
    /// Where the rounds delivered to clients are filed for their retries: over the gate's own
    /// storage, so replicas sharing it find each other's rounds.
    pub rounds: RoundIndex,
    /// Relay a server's own `elicitation/create`, `sampling/createMessage` and `roots/list`
    /// requests (2025-era input requests the gate never sees) instead of refusing them.
    pub allow_legacy_server_requests: bool,
    /// Relay the input channels no binding covers (`inputRequests` in an ungated answer or a
    /// notification, such as a task's; `inputResponses` in an ungated message, such as
    /// `tasks/update`; a 2025-11-25 `-32042` URL elicitation error to a request the gate does
    /// not bind) instead of refusing them. A `-32042` to a gated call is the gate's to refuse.
    pub allow_ungated_input: bool,
    /// A slow consent (`tty`, `command`) asked off the engine's thread (HTTP mode): a retry
    /// that needs a decision nobody made yet is handed back as [`Action::AskConsent`] instead
    /// of holding up every client while a person or a hook decides. `None`: asked inline.
    pub deferred_consent: Option<Arc<DeferredConsent>>,
    /// Policies that judge each round the gate accepted before it is delivered (`--policy`,
    /// docs/policy.md): a deny or a failure refuses it, an allow grants its retry's consent.
    /// `None`: no policies.
    pub policies: Option<Arc<Decider>>,
}

/// Who a gated call is bound to (one type across the crates).
pub use mrtr_gate_host::Principal;

/// Where a message goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// This text goes to the server as it came.
    ToServer(String),
    /// The gate's text goes to the server, under the id the proxy minted for it (a transport
    /// that can tell a call was abandoned ends it with [`Engine::on_cancel`]).
    Gated {
        /// The request to send.
        text: String,
        /// Its id upstream.
        upstream_id: RequestId,
        /// The call's span: its context goes upstream as HTTP headers
        /// ([`CallTrace::headers`]), never in the body.
        trace: CallTrace,
    },
    /// This text goes to the client.
    ToClient(String),
    /// Nothing goes anywhere (the reason, for the log).
    Drop(&'static str),
    /// The retry needs the user's decision on this prompt first: ask it off the engine's
    /// thread ([`DeferredConsent::ask`], under the call's span: [`CallTrace::attach`]), then
    /// hand the engine the same message again.
    AskConsent(ConsentPrompt, CallTrace),
}

/// A gated call of the client's, by the id it went upstream under.
#[derive(Clone, Debug)]
struct Call {
    /// The client's id, its exact JSON text.
    client_id: String,
    /// Who the binding is bound to.
    principal: Principal,
    /// The method.
    method: String,
    /// The params as the client sent them, their exact text: a round without a state is filed
    /// under them.
    params: String,
    /// When the call was sent upstream (for a round: when it was delivered).
    since: Instant,
    /// For a delivered round: the index key it is filed under ([`crate::rounds`]).
    filed: Option<String>,
    /// For a delivered round that asks the user something: the consent view the gate made of
    /// it (a retry's prompt shows exactly it), and its digest.
    view: Option<(String, String)>,
    /// The call's span, from its first request through every round.
    trace: CallTrace,
    /// It is a round's retry (it carries `inputResponses` or `requestState`): its complete
    /// answer reaches the client uncacheable ([`crate::no_cache`]).
    retry: bool,
}

/// A server's request shown to a client.
#[derive(Clone, Debug)]
struct Asked {
    /// The id the server gave it (exact JSON text): the answer goes upstream under it.
    server_id: String,
    /// Who it was shown to.
    principal: Principal,
    /// The protocol session of the stream it was shown on.
    session: Option<String>,
    /// When.
    since: Instant,
}

/// The prefix of the id a server's request is shown under on an endpoint many clients share:
/// random, so no client can answer one shown to another by guessing it.
pub const ASKED_PREFIX: &str = "mg-ask:";

/// The proxy's state for one upstream and one principal.
pub struct Engine<G> {
    gate: G,
    config: EngineConfig,
    ids: IdMinter,
    /// Gated requests sent upstream and not yet answered.
    in_flight: HashMap<RequestId, Call>,
    /// Calls whose last answer was an accepted round: their bindings are open in the gate.
    open_rounds: HashMap<RequestId, Call>,
    /// The server's own requests shown to a client and not yet answered, by the id the client
    /// was shown (as JSON): only those may be answered, by the principal they were shown to.
    asked: HashMap<String, Asked>,
    /// The client's ungated requests relayed upstream and not yet answered (their ids as
    /// JSON), one client per engine only: a response under any other id the client never
    /// waits on, and one under a gated call's own id would hand it a result the gate never
    /// judged.
    relayed: HashMap<String, Instant>,
    /// Many clients share this engine (the HTTP endpoint): a client's id names none of
    /// another's calls, so a `notifications/cancelled` is never mapped to a gated call (an
    /// HTTP client cancels by closing its exchange).
    shared: bool,
    /// What the registry reads of this engine ([`crate::metrics`]), set after every message.
    gauges: Arc<EngineGauges>,
    /// `--capture`: every gated call's params and answers, redacted ([`crate::capture`]).
    capture: Option<Arc<Capture>>,
}

impl<G> std::fmt::Debug for Engine<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("server", &self.config.server)
            .field("in_flight", &self.in_flight.len())
            .field("open_rounds", &self.open_rounds.len())
            .finish_non_exhaustive()
    }
}

impl<G: GateApi> Engine<G> {
    /// An engine over `gate`, minting with `ids`.
    pub fn new(gate: G, config: EngineConfig, ids: IdMinter) -> Self {
        Self {
            gate,
            config,
            ids,
            in_flight: HashMap::new(),
            open_rounds: HashMap::new(),
            asked: HashMap::new(),
            relayed: HashMap::new(),
            shared: false,
            gauges: metrics::global().engine(),
            capture: None,
        }
    }

    /// Record every gated call's params, retries and answers in `capture` (off by default).
    #[must_use]
    pub fn with_capture(mut self, capture: Option<Arc<Capture>>) -> Self {
        self.capture = capture;
        self
    }

    fn captured(&self, kind: capture::Kind, method: &str, id: &RequestId, text: &str) {
        if let Some(capture) = &self.capture {
            capture.record(kind, &self.config.server, method, id, text);
        }
    }

    /// The registry's view of this engine, after a message: the time it took, and what it
    /// holds now.
    fn observe(&self, client: bool, started: Instant) {
        metrics::global().handled(client, started.elapsed());
        self.gauges();
    }

    fn gauges(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        self.gauges
            .in_flight
            .store(len(self.in_flight.len()), Relaxed);
    }

    /// This engine serves many clients at once (the HTTP endpoint): see [`Engine::on_client`].
    pub fn shared_by_many_clients(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Gated requests awaiting their response.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Who calls are bound to when the transport names nobody.
    pub fn principal(&self) -> &Principal {
        &self.config.principal
    }

    /// The consent asked off the engine's thread, if any ([`EngineConfig::deferred_consent`]).
    pub fn deferred_consent(&self) -> Option<Arc<DeferredConsent>> {
        self.config.deferred_consent.clone()
    }

    /// Calls with an accepted round open.
    pub fn open_rounds(&self) -> usize {
        self.open_rounds.len()
    }

    /// A message from the client, whose calls are bound to the configured principal. On an
    /// engine [`shared_by_many_clients`](Engine::shared_by_many_clients), a client's
    /// `notifications/cancelled` that names a gated call is dropped: client ids collide across
    /// clients, and one client must never end another's call.
    pub fn on_client(&mut self, text: &str) -> Action {
        let principal = self.config.principal.clone();
        self.on_client_as(&principal, text)
    }

    /// A message from the client, whose calls are bound to `principal` (an HTTP front that
    /// authenticated the caller names it per request).
    pub fn on_client_as(&mut self, principal: &Principal, text: &str) -> Action {
        self.on_client_in(principal, None, text)
    }

    /// A message from the client of `principal` under the protocol session `session` (a
    /// 2025-era `Mcp-Session-Id`; `None`: none): an answer to a server's request is taken only
    /// on the session the request was shown on.
    pub fn on_client_in(
        &mut self,
        principal: &Principal,
        session: Option<&str>,
        text: &str,
    ) -> Action {
        let started = Instant::now();
        let action = self.client_message(principal, session, text);
        self.observe(true, started);
        action
    }

    fn client_message(
        &mut self,
        principal: &Principal,
        session: Option<&str>,
        text: &str,
    ) -> Action {
        match from_client(text) {
            Err((raw_id, refusal)) => Action::ToClient(refusal.response(&raw_id)),
            Ok(FromClient::Relay { raw_id })
                if !self.config.allow_ungated_input && carries_member(text, "inputResponses") =>
            {
                // Answers no round of the gate's asked for (a task's `tasks/update`): they would
                // reach the server unchecked and unconsented. Refused, and on record.
                let refusal = self.refuse_unbound(principal, &Unbound::InputResponses);
                match raw_id {
                    Some(raw_id) => Action::ToClient(refusal.response(raw_id)),
                    None => {
                        refusal.record();
                        Action::Drop("a notification carrying inputResponses")
                    }
                }
            }
            Ok(FromClient::Relay { raw_id }) => self.relay(raw_id, text),
            // Only an answer to a request the client was shown: the proxy refuses some of the
            // server's requests itself, and the client must not answer those in their stead.
            Ok(FromClient::Answer { raw_id }) => self.answer(principal, session, raw_id, text),
            Ok(FromClient::Cancelled { params }) => self.cancelled(text, params),
            Ok(FromClient::Gated {
                raw_id,
                method,
                params,
            }) => match params {
                Some(params) if is_retry(params) => self.retry(principal, raw_id, method, params),
                _ => self.register(principal, raw_id, method, params),
            },
        }
    }

    /// An ungated message goes upstream as it came; a request's id is kept until its answer
    /// (one client per engine: over HTTP each answer comes on its own request's exchange).
    fn relay(&mut self, raw_id: Option<&str>, text: &str) -> Action {
        if let (false, Some(id)) = (self.shared, raw_id.and_then(id_text)) {
            if self.relayed.len() >= MAX_RELAYED && !self.relayed.contains_key(&id) {
                let refusal = Refusal::message(
                    "too_many_in_flight",
                    format!("more than {MAX_RELAYED} requests wait for their answer"),
                );
                return Action::ToClient(refusal.response(raw_id.unwrap_or("null")));
            }
            self.relayed.insert(id, Instant::now());
        }
        Action::ToServer(text.to_owned())
    }

    fn register(
        &mut self,
        principal: &Principal,
        raw_id: &str,
        method: String,
        params: Option<&str>,
    ) -> Action {
        let minted = self.ids.mint();
        let trace = CallTrace::start(&method, params, &minted);
        let step = trace.step("mrtr_gate.register");
        let registration_method = method.clone();
        let registration = Registration {
            request_id: minted.clone(),
            server: self.config.server.clone(),
            user: principal.user.clone(),
            tenant: principal.tenant.clone(),
            method,
            // No params is no params: the gate refuses the request, it is not made up.
            params_json: params.unwrap_or("null").to_owned(),
            policy: self.config.policy.clone(),
        };
        match self.gate.register(registration) {
            Ok(registered) => {
                let call = Call {
                    client_id: raw_id.to_owned(),
                    principal: principal.clone(),
                    method: registration_method,
                    params: params.unwrap_or("null").to_owned(),
                    since: Instant::now(),
                    filed: None,
                    view: None,
                    trace: trace.clone(),
                    retry: false,
                };
                step.outcome(Outcome::Done, None);
                metrics::global().sent(&call.method, Sent::Call);
                self.captured(capture::Kind::Request, &call.method, &minted, &call.params);
                self.in_flight.insert(minted.clone(), call);
                Action::Gated {
                    text: registered.request_json,
                    upstream_id: minted,
                    trace,
                }
            }
            Err(d) => {
                let refusal = Refusal::from_denial(&d);
                step.outcome(Outcome::Refused, Some(&refusal.code));
                step.end();
                trace.end(Outcome::Refused, Some(&refusal.code));
                Action::ToClient(refusal.response(raw_id))
            }
        }
    }

    /// A message from the server.
    pub fn on_server(&mut self, text: &str) -> Action {
        let principal = self.config.principal.clone();
        self.on_server_as(&principal, text)
    }

    /// A message from the server on a stream a client opened as `principal` (an HTTP front
    /// that names each request's user and tenant): a 2025-era input request refused there is
    /// audited under that client's principal, the one the request would have reached.
    pub fn on_server_as(&mut self, principal: &Principal, text: &str) -> Action {
        self.on_server_in(principal, None, text)
    }

    /// A message from the server on a stream a client of `principal` opened under the
    /// protocol session `session`: a request of the server's shown there is answerable only
    /// by that principal, on that session.
    pub fn on_server_in(
        &mut self,
        principal: &Principal,
        session: Option<&str>,
        text: &str,
    ) -> Action {
        let started = Instant::now();
        let action = self.server_message(principal, session, text);
        self.observe(false, started);
        action
    }

    fn server_message(
        &mut self,
        principal: &Principal,
        session: Option<&str>,
        text: &str,
    ) -> Action {
        match from_server(text) {
            FromServer::Response { id: Some(id), .. } if self.in_flight.contains_key(&id) => {
                self.judge(id, text)
            }
            // A minted id no call waits on: a second answer to a call already answered (or
            // one made up). The client never sent that id; only the gate's one answer counts.
            FromServer::Response {
                id: Some(RequestId::Text(id)),
                ..
            } if id.starts_with(MINTED_PREFIX) => {
                Action::Drop("a response to no gated request in flight")
            }
            FromServer::Response { raw_id, result, .. } => {
                self.relayed_response(principal, text, raw_id, result)
            }
            FromServer::Notification
                if !self.config.allow_ungated_input && carries_member(text, "inputRequests") =>
            {
                let refusal = self.refuse_unbound(principal, &Unbound::InputRequestsNotified);
                refusal.record();
                Action::Drop("a notification carrying inputRequests (a task's): no round binds it")
            }
            FromServer::Notification => Action::ToClient(text.to_owned()),
            FromServer::Request(raw_id, method) => {
                if LEGACY_SERVER_REQUESTS.contains(&method.as_str())
                    && !self.config.allow_legacy_server_requests
                {
                    let refusal = self.refuse_unbound(principal, &Unbound::ServerRequest(method));
                    refusal.record();
                    Action::ToServer(mrtr_gate_host::wire::input_request_refused(&raw_id))
                } else {
                    self.show_request(principal, session, raw_id, text)
                }
            }
            FromServer::Unreadable => match self.only_in_flight() {
                // With one gated request outstanding nobody else can the message be for: the
                // gate names what is wrong with it, and the call ends.
                Some(id) => self.judge(id, text),
                None => Action::Drop("an unreadable message from the server"),
            },
        }
    }

    /// A response under an id the proxy did not mint: the answer to a request relayed as it
    /// came, which carries the client's own id. With one client per engine it reaches the
    /// client only if the client waits on that id; one under the client's id of a gated call
    /// (a server going around the gate: the client would take a result nobody judged) goes to
    /// the gate, which finds no binding under it and audits the refusal. Only the three gated
    /// methods may be answered with a round: one on any other answer would reach the client
    /// with no binding behind it.
    fn relayed_response(
        &mut self,
        principal: &Principal,
        text: &str,
        raw_id: &str,
        result: Option<&str>,
    ) -> Action {
        if !self.shared {
            let id = id_text(raw_id);
            let waited_on = id
                .as_ref()
                .is_some_and(|id| self.relayed.remove(id).is_some());
            if !waited_on {
                if id.as_ref().is_some_and(|id| self.names_gated_call(id)) {
                    // Refused `no_live_request` and audited: the trail shows the attempt.
                    let _ = self.gate.accept_response(&self.config.server, text);
                    return Action::Drop(
                        "a response under the client's id of a gated call (refused by the gate, audited)",
                    );
                }
                return Action::Drop("a response to no request of the client's in flight");
            }
        }
        let asks_for_input = match result {
            Some(result) => {
                is_input_required(result)
                    || (!self.config.allow_ungated_input && carries_member(result, "inputRequests"))
            }
            None => !self.config.allow_ungated_input && is_url_elicitation_error(text),
        };
        if asks_for_input {
            let refusal = self.refuse_unbound(principal, &Unbound::InputRequired);
            return Action::ToClient(refusal.response(raw_id));
        }
        Action::ToClient(text.to_owned())
    }

    /// The gate records the refusal of a message no binding judges, under the principal it
    /// came from or was for; the message is refused whether or not the sink took the record
    /// (the refusal says which).
    fn refuse_unbound(&mut self, principal: &Principal, refusal: &Unbound) -> Refusal {
        let denial = self.gate.refuse_unbound(
            &self.config.server,
            &principal.user,
            &principal.tenant,
            refusal,
        );
        Refusal::from_denial(&denial)
    }

    /// Whether `id` (an id's JSON text, [`id_text`]) is the client's id of a gated call in
    /// flight or holding an open round.
    fn names_gated_call(&self, id: &str) -> bool {
        self.in_flight
            .values()
            .chain(self.open_rounds.values())
            .any(|call| id_text(&call.client_id).as_deref() == Some(id))
    }

    /// A server's request goes to the client it came on the stream of. Many clients sharing
    /// the endpoint each see it under a fresh random id ([`ASKED_PREFIX`]), so none can answer
    /// another's by guessing the server's (SDK servers number from 0); one client sees the
    /// server's own id.
    fn show_request(
        &mut self,
        principal: &Principal,
        session: Option<&str>,
        server_id: String,
        text: &str,
    ) -> Action {
        let asked = Asked {
            server_id,
            principal: principal.clone(),
            session: session.map(str::to_owned),
            since: Instant::now(),
        };
        if !self.shared {
            if let Some(id) = id_text(&asked.server_id) {
                self.asked.insert(id, asked);
            }
            return Action::ToClient(text.to_owned());
        }
        let mut random = [0u8; 16];
        if getrandom::fill(&mut random).is_err() {
            return Action::Drop("a server request: no randomness for its id");
        }
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let shown = format!("\"{ASKED_PREFIX}{hex}\"");
        match splice_id(text, &shown) {
            Ok(text) => {
                self.asked.insert(shown, asked);
                Action::ToClient(text)
            }
            Err(_) => Action::Drop("a server request whose id cannot be replaced"),
        }
    }

    /// The client's answer to a server's request: only to one shown to this principal, once,
    /// under the server's own id upstream. An answer for one shown to another client is
    /// dropped and that client may still answer it.
    fn answer(
        &mut self,
        principal: &Principal,
        session: Option<&str>,
        raw_id: &str,
        text: &str,
    ) -> Action {
        let Some(id) = id_text(raw_id) else {
            return Action::Drop("an answer whose id is no json");
        };
        // Shown to another client, or on another session: left for that one to answer.
        let asked = match self.asked.remove(&id) {
            Some(asked) if asked.principal == *principal && asked.session.as_deref() == session => {
                asked
            }
            Some(other) => {
                self.asked.insert(id, other);
                return Action::Drop("an answer to a server request shown to another client");
            }
            None => {
                return Action::Drop(
                    "an answer to no request of the server's the client was shown",
                );
            }
        };
        if !self.shared {
            return Action::ToServer(text.to_owned());
        }
        match splice_id(text, &asked.server_id) {
            Ok(text) => Action::ToServer(text),
            Err(_) => Action::Drop("an answer whose id cannot be replaced"),
        }
    }

    fn only_in_flight(&self) -> Option<RequestId> {
        let mut ids = self.in_flight.keys();
        match (ids.next(), ids.next()) {
            (Some(id), None) => Some(id.clone()),
            _ => None,
        }
    }

    /// The gate judges the response to the gated request `id`.
    fn judge(&mut self, id: RequestId, text: &str) -> Action {
        let Some(call) = self.in_flight.remove(&id) else {
            return Action::Drop("a response to no request in flight");
        };
        self.captured(capture::Kind::Answer, &call.method, &id, text);
        let trace = call.trace.clone();
        let step = trace.step("mrtr_gate.accept");
        // What came of it, on the step and (unless a round keeps it going) on the call.
        let closed = |outcome: Outcome, code: Option<&str>| {
            step.outcome(outcome, code);
            step.end();
            if outcome != Outcome::InputRequired {
                trace.end(outcome, code);
            }
        };
        let refused = |refusal: Refusal, client_id: &str| {
            closed(Outcome::Refused, Some(&refusal.code));
            Action::ToClient(refusal.response(client_id))
        };
        let verdict = self.gate.accept_response(&self.config.server, text);
        let took = call.since.elapsed();
        let counted = match &verdict {
            Ok(ResponseVerdict::InputRequired(_)) => Verdict::InputRequired,
            Ok(ResponseVerdict::Complete) => Verdict::Result,
            Ok(ResponseVerdict::Error(_)) => Verdict::Error,
            Err(_) => Verdict::Refused,
        };
        metrics::global().answered(&call.method, counted, took);
        match verdict {
            Ok(verdict) => match splice_id(text, &call.client_id) {
                Ok(judged) => {
                    let round = match verdict {
                        ResponseVerdict::InputRequired(round) => round,
                        ResponseVerdict::Complete => {
                            closed(Outcome::Result, None);
                            if call.retry {
                                return Action::ToClient(no_cache::uncacheable(&judged));
                            }
                            return Action::ToClient(judged);
                        }
                        _ => {
                            closed(Outcome::Error, None);
                            return Action::ToClient(judged);
                        }
                    };
                    // A principal's rounds it never retries stay until they expire: past
                    // the cap, its next one is given up rather than kept. Rounds retried
                    // through another engine or replica are not counted.
                    if self.open_rounds_of(&call.principal) >= MAX_OPEN_ROUNDS {
                        self.forget_retried_elsewhere(Some(&call.principal));
                    }
                    if self.open_rounds_of(&call.principal) >= MAX_OPEN_ROUNDS {
                        self.end(
                            &id,
                            &call,
                            CallerOutcome::Error("too_many_open_rounds".into()),
                        );
                        let refusal = Refusal::message(
                            "too_many_open_rounds",
                            format!(
                                "{MAX_OPEN_ROUNDS} rounds of this principal are open already: answer or cancel one first"
                            ),
                        );
                        return refused(refusal, &call.client_id);
                    }
                    // The operator's policies, before anyone sees the round: a deny or a
                    // failure ends it here, on record.
                    if let Some((refusal, ending)) =
                        self.by_policy(&call, &round.view_json, &round.view_sha256)
                    {
                        self.end(&id, &call, ending);
                        return refused(refusal, &call.client_id);
                    }
                    // Filed before it is delivered: a retry can come as soon as the client
                    // has it. A round that cannot be filed could never be retried.
                    let filed = match self.file(&id, &call, round.request_state_sha256.as_deref()) {
                        Ok(key) => key,
                        Err(refusal) => {
                            self.end(&id, &call, CallerOutcome::Error("proxy_fault".into()));
                            return refused(refusal, &call.client_id);
                        }
                    };
                    // A state-only round asks the user nothing: no prompt.
                    let view = (!round.input_keys.is_empty())
                        .then_some((round.view_json, round.view_sha256));
                    metrics::global().round_opened(&id);
                    trace::hold(&id, &trace);
                    closed(Outcome::InputRequired, None);
                    self.open_rounds.insert(
                        id,
                        Call {
                            since: Instant::now(),
                            filed: Some(filed),
                            view,
                            ..call
                        },
                    );
                    Action::ToClient(judged)
                }
                // The gate accepted a message whose id it read; the proxy reads the same
                // text with the same parser, so this is a fault of the proxy's, not the
                // server's, and the call cannot go on.
                Err(_) => {
                    self.end(&id, &call, CallerOutcome::Error("proxy_fault".into()));
                    let refusal = Refusal::upstream(
                        "invalid_message",
                        "the answer's id could not be replaced",
                    );
                    refused(refusal, &call.client_id)
                }
            },
            Err(denial) => {
                // Most refusals end the binding in the gate; the rest (a duplicate round)
                // keep it, and the proxy gives it up here. Either way nothing more is sent.
                self.end(&id, &call, CallerOutcome::Error("gate_refused".into()));
                refused(Refusal::from_denial(&denial), &call.client_id)
            }
        }
    }

    /// What the policies say of the round `view_json` of `call`, when they refuse it: the
    /// refusal (the policy's id in the message; logged with it) and how its binding ends (a
    /// deny names the policy in the trail).
    fn by_policy(
        &self,
        call: &Call,
        view_json: &str,
        view_sha256: &str,
    ) -> Option<(Refusal, CallerOutcome)> {
        let decider = self.config.policies.as_ref()?;
        let step = call.trace.step("mrtr_gate.policy");
        let decision = decider.judge(&call.principal, view_json, view_sha256);
        let code = decision.code().unwrap_or_default();
        let message = decision.refusal_message().unwrap_or_default();
        match &decision {
            Decision::Deny { .. } => {
                step.outcome(Outcome::Refused, Some(code));
                Some((
                    Refusal::peer(code, message),
                    CallerOutcome::PolicyDenied(decision.receipt_id().unwrap_or_default()),
                ))
            }
            Decision::Failed { .. } => {
                step.outcome(Outcome::Refused, Some(code));
                Some((
                    Refusal::host(code, message),
                    CallerOutcome::Error(code.to_owned()),
                ))
            }
            _ => {
                step.outcome(Outcome::Done, None);
                None
            }
        }
    }

    /// File the round the binding `live_id` of `call` now waits on.
    fn file(
        &self,
        live_id: &RequestId,
        call: &Call,
        state_sha256: Option<&str>,
    ) -> Result<String, Refusal> {
        let key = match state_sha256 {
            Some(sha) => self.round_key(&call.principal, &call.method, Filed::State(sha)),
            None => {
                let params = params_object(&call.params).ok_or_else(|| {
                    Refusal::host("proxy_fault", "the registered params are not an object")
                })?;
                self.round_key(&call.principal, &call.method, Filed::Params(&params))
            }
        };
        self.config.rounds.file(&key, live_id).map_err(|e| {
            Refusal::host(
                "storage_failed",
                format!("the round could not be filed: {}", e.0),
            )
        })?;
        Ok(key)
    }

    /// A delivered round ended another way than by its retry: its index entry goes too, so
    /// no later retry is matched to it first. (An entry that stays, a replica's that died,
    /// only costs a refused attempt: see [`Engine::retry`].)
    fn unfile(&self, live_id: &RequestId, call: &Call) {
        if let Some(key) = &call.filed {
            let _ = self.config.rounds.remove(key, live_id);
        }
    }

    fn round_key(&self, principal: &Principal, method: &str, filed: Filed<'_>) -> String {
        // One client per engine (stdio): its rounds are its own, never another replica's.
        let scope = if self.shared { "" } else { self.ids.nonce() };
        rounds::key(scope, &self.config.server, principal, method, filed)
    }

    /// A client's retry: the round it names by its state or its params is taken from the
    /// index, and the gate checks the retry against it and builds what goes upstream.
    fn retry(
        &mut self,
        principal: &Principal,
        raw_id: &str,
        method: String,
        params: &str,
    ) -> Action {
        // What cannot be read names no round; the gate says what is wrong with it.
        let key = params_object(params).and_then(|p| match rounds::named_by(&p) {
            Named::ByState(sha) => Some(self.round_key(principal, &method, Filed::State(&sha))),
            Named::ByParams => Some(self.round_key(principal, &method, Filed::Params(&p))),
            Named::Nothing => None,
        });
        let Some(key) = key else {
            return self.retry_round(principal, raw_id, method, params, None);
        };
        // The oldest round filed under the key first. A round the gate finds used, ended or
        // answered for another (parallel identical calls without state, a replica that died
        // with its entry) costs one refused attempt (audited) and the next is tried; the
        // rounds refused for these answers are filed again for a retry that fits them.
        let mut kept = Vec::new();
        let mut last = None;
        for _ in 0..MATCH_ATTEMPTS {
            let live = match self.config.rounds.take(&key) {
                Ok(Some(live)) => live,
                Ok(None) => break,
                Err(e) => {
                    self.refile(&key, &kept);
                    let refusal = Refusal::host(
                        "storage_failed",
                        format!("the open rounds could not be read: {}", e.0),
                    );
                    return Action::ToClient(refusal.response(raw_id));
                }
            };
            match self.try_retry(principal, raw_id, &method, params, Some(live.clone())) {
                // Nothing was decided: the round stays filed for the same message again.
                Ok(action @ Action::AskConsent(..)) => {
                    kept.push(live);
                    self.refile(&key, &kept);
                    return action;
                }
                Ok(action) => {
                    self.refile(&key, &kept);
                    return action;
                }
                Err(denial) => {
                    if is_dead(&denial) {
                        round_closed(&live);
                        self.open_rounds.remove(&live);
                    } else if fits_another(&denial) {
                        kept.push(live);
                    } else {
                        self.refile(&key, &kept);
                        self.after_refused_retry(&key, &live, principal, &denial);
                        return Action::ToClient(Refusal::from_denial(&denial).response(raw_id));
                    }
                    last = Some(denial);
                }
            }
        }
        self.refile(&key, &kept);
        match last {
            Some(denial) => Action::ToClient(Refusal::from_denial(&denial).response(raw_id)),
            // Nothing was filed under the key: the gate refuses (and audits) a retry of no round.
            None => self.retry_round(principal, raw_id, method, params, None),
        }
    }

    /// File again the rounds a retry was refused for (its answers or arguments did not fit
    /// them): they stay open for a retry that does.
    fn refile(&self, key: &str, kept: &[RequestId]) {
        for live in kept {
            let _ = self.config.rounds.file(key, live);
        }
    }

    /// [`Engine::try_retry`] as an action: the refusal goes to the client.
    fn retry_round(
        &mut self,
        principal: &Principal,
        raw_id: &str,
        method: String,
        params: &str,
        live: Option<RequestId>,
    ) -> Action {
        match self.try_retry(principal, raw_id, &method, params, live) {
            Ok(action) => action,
            Err(denial) => Action::ToClient(Refusal::from_denial(&denial).response(raw_id)),
        }
    }

    /// The gate checks the retry against the round `live` and builds it: on success the
    /// gate's text goes upstream under a new minted id.
    fn try_retry(
        &mut self,
        principal: &Principal,
        raw_id: &str,
        method: &str,
        params: &str,
        live: Option<RequestId>,
    ) -> Result<Action, GateDenial> {
        // The round's call, when an engine of this process delivered it: the retry goes on
        // under its span.
        let round_trace = live.as_ref().and_then(trace::held);
        if let Some(prompt) = live
            .as_ref()
            .and_then(|live| self.undecided_prompt(live, params))
        {
            return Ok(Action::AskConsent(prompt, round_trace.unwrap_or_default()));
        }
        let retry_id = self.ids.mint();
        let (trace, own) = match round_trace {
            Some(trace) => (trace, false),
            None => (CallTrace::start(method, Some(params), &retry_id), true),
        };
        let step = trace.step("mrtr_gate.retry");
        let asked = ClientRetry {
            server: self.config.server.clone(),
            request_id: live.clone(),
            retry_id: retry_id.clone(),
            user: principal.user.clone(),
            tenant: principal.tenant.clone(),
            method: method.to_owned(),
            params_json: params.to_owned(),
        };
        // A consent asked inline hangs its span under the retry's.
        let built = {
            let _current = step.attach();
            self.gate.retry_from_client(asked)
        };
        let retry = match built {
            Ok(retry) => retry,
            Err(denial) => {
                step.outcome(Outcome::Refused, Some(denial.code.as_str()));
                step.end();
                // A call whose round this process holds ends (or stays open) as the caller
                // decides.
                if own {
                    trace.end(Outcome::Refused, Some(denial.code.as_str()));
                }
                return Err(denial);
            }
        };
        step.outcome(Outcome::Done, None);
        metrics::global().sent(method, Sent::Retry);
        self.captured(capture::Kind::Retry, method, &retry_id, params);
        if let Some(live) = &live {
            // Whichever engine delivered it: the round is used.
            round_closed(live);
            self.open_rounds.remove(live);
        }
        let call = Call {
            client_id: raw_id.to_owned(),
            principal: principal.clone(),
            method: method.to_owned(),
            params: params.to_owned(),
            since: Instant::now(),
            filed: None,
            view: None,
            trace: trace.clone(),
            retry: true,
        };
        self.in_flight.insert(retry_id.clone(), call);
        Ok(Action::Gated {
            text: retry.request_json,
            upstream_id: retry_id,
            trace,
        })
    }

    /// Drop the open rounds (of `principal`, or everyone's) that the shared index no longer
    /// holds: another engine of the pool, or another replica, took them for a retry (the
    /// engine that delivered a round hears nothing of that; its entry would stay until the
    /// sweep, count against the cap, and be ended a second time when the client goes). One
    /// index read per open round, only when a principal is at the cap or the clients are
    /// gone. A round the index cannot be asked about stays.
    fn forget_retried_elsewhere(&mut self, principal: Option<&Principal>) {
        let rounds = &self.config.rounds;
        self.open_rounds.retain(|live, call| {
            let kept = principal.is_some_and(|p| call.principal != *p)
                || call
                    .filed
                    .as_deref()
                    .is_none_or(|key| rounds.holds(key, live).unwrap_or(true));
            if !kept {
                round_closed(live);
            }
            kept
        });
    }

    /// How many rounds of `principal`'s are open.
    fn open_rounds_of(&self, principal: &Principal) -> usize {
        self.open_rounds
            .values()
            .filter(|call| call.principal == *principal)
            .count()
    }

    /// The consent prompt a retry of the round `live` with `params` will need, when consent is
    /// deferred and nobody has decided on it yet. Built as the gate builds it: the round's own
    /// view and the client's `inputResponses` (absent: `{}`) in their canonical text. Answers
    /// the gate would refuse make no prompt: the gate refuses them before it asks.
    fn undecided_prompt(&self, live: &RequestId, params: &str) -> Option<ConsentPrompt> {
        let deferred = self.config.deferred_consent.as_ref()?;
        let (view_json, view_sha256) = self.open_rounds.get(live)?.view.clone()?;
        // A round a policy allowed needs nobody's decision.
        if self
            .config
            .policies
            .as_ref()
            .is_some_and(|p| p.allows(&view_sha256))
        {
            return None;
        }
        let members = parse_members(params, limits::CLIENT_RETRY.max_bytes).ok()?;
        let responses = members.get("inputResponses").map_or("{}", |raw| raw.get());
        let responses_json = canonical_responses(responses).ok()?;
        let prompt = ConsentPrompt {
            view_json,
            view_sha256,
            responses_sha256: digest::sha256_hex(responses_json.as_bytes()),
            responses_json,
        };
        (!deferred.decided(&prompt)).then_some(prompt)
    }

    /// A refused retry for the round `live`: a round the gate keeps open (the answers or the
    /// arguments were wrong, the user said no) is filed again for a retry that gets it right;
    /// one the gate could not judge is ended, so nothing is left half decided.
    fn after_refused_retry(
        &mut self,
        key: &str,
        live: &RequestId,
        principal: &Principal,
        denial: &GateDenial,
    ) {
        let still_open = denial.cause == ErrorCause::Caller
            && !denial.is(ErrorCode::InactiveRound)
            && !denial.is(ErrorCode::RetryIdNotNew);
        if still_open {
            if self.config.rounds.file(key, live).is_ok() {
                return;
            }
        } else if denial.cause != ErrorCause::Host {
            // The round is gone (used, expired, ended): nothing to end.
            round_closed(live);
            if let Some(call) = self.open_rounds.remove(live) {
                call.trace.end(Outcome::Refused, Some(denial.code.as_str()));
            }
            return;
        }
        round_closed(live);
        let call = self.open_rounds.remove(live).unwrap_or_else(|| Call {
            // A round another engine delivered: its binding is ended all the same.
            client_id: String::new(),
            principal: principal.clone(),
            method: String::new(),
            params: String::new(),
            since: Instant::now(),
            filed: None,
            view: None,
            trace: CallTrace::default(),
            retry: false,
        });
        self.end(live, &call, CallerOutcome::Error("retry_refused".into()));
        call.trace.end(Outcome::Refused, Some(denial.code.as_str()));
    }

    /// `notifications/cancelled` from the client: a gated call in flight is cancelled under
    /// its minted id upstream and its binding ends `cancelled`; any other is relayed as it
    /// came (a relayed request went upstream under the client's own id).
    fn cancelled(&mut self, text: &str, params: Option<&str>) -> Action {
        let Some(mut params) = params.and_then(params_object) else {
            return Action::ToServer(text.to_owned());
        };
        let Some(asked) = params.get("requestId").cloned() else {
            return Action::ToServer(text.to_owned());
        };
        // A minted id is the proxy's own: no client names it.
        if asked
            .as_str()
            .is_some_and(|id| id.starts_with(MINTED_PREFIX))
        {
            return Action::Drop("a cancel naming an id the proxy minted");
        }
        let found = self.in_flight.iter().find_map(|(id, call)| {
            let client_id: Value = serde_json::from_str(&call.client_id).ok()?;
            (client_id == asked).then(|| id.clone())
        });
        let Some(upstream_id) = found else {
            return Action::ToServer(text.to_owned());
        };
        if self.shared {
            return Action::Drop("a cancel over a shared endpoint may name another client's call");
        }
        self.on_cancel(&upstream_id);
        params.insert("requestId".into(), upstream_id.to_json());
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": Value::Object(params),
        });
        Action::ToServer(note.to_string())
    }

    /// The client abandoned the call sent upstream as `upstream_id` (it closed the exchange,
    /// or cancelled it): its binding ends `cancelled`. Nothing is sent to anyone.
    pub fn on_cancel(&mut self, upstream_id: &RequestId) {
        let call = match self.in_flight.remove(upstream_id) {
            Some(call) => call,
            None => match self.open_rounds.remove(upstream_id) {
                Some(call) => {
                    round_closed(upstream_id);
                    self.unfile(upstream_id, &call);
                    call
                }
                None => return,
            },
        };
        self.end(upstream_id, &call, CallerOutcome::Cancelled);
        call.trace.end(Outcome::Cancelled, None);
        metrics::global().ended(metrics::Ended::Cancelled);
        self.gauges();
    }

    /// How often [`Engine::sweep`] should run: a quarter of a round's lifetime, between 1 s
    /// and 30 s, so a round not retried ends `expired` soon after its lifetime.
    pub fn sweep_every(&self) -> Duration {
        Duration::from_millis(self.config.policy.round_trip_lifetime_ms / 4)
            .clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    /// Housekeeping, every little while: the gate ends the bindings whose lifetime has passed
    /// (`expired` in the trail, whichever replica holds them), and the engine forgets the
    /// rounds it delivered that can no longer be retried. A failure is the next sweep's to
    /// retry; the gate refuses a retry of an expired round whatever happens here.
    pub fn sweep(&mut self) {
        if let Ok(expired) = self.gate.expire_stale() {
            for _ in 0..expired {
                metrics::global().ended(metrics::Ended::Expired);
            }
        }
        let lifetime = Duration::from_millis(
            self.config
                .policy
                .round_trip_lifetime_ms
                .saturating_add(EXPIRY_GRACE_MS),
        );
        self.open_rounds.retain(|live, call| {
            let kept = call.since.elapsed() < lifetime;
            if !kept {
                round_closed(live);
                call.trace.end(Outcome::Expired, None);
            }
            kept
        });
        // A server request nobody answered within a round's lifetime is not waited on.
        self.asked
            .retain(|_, asked| asked.since.elapsed() < lifetime);
        self.gauges();
    }

    /// The client went away: every call of its ends `cancelled`.
    pub fn on_client_gone(&mut self) {
        // Not those whose retry another engine or replica took: they are its to end.
        self.forget_retried_elsewhere(None);
        let calls: Vec<(RequestId, Call)> = self
            .in_flight
            .drain()
            .chain(self.open_rounds.drain())
            .collect();
        for (id, call) in calls {
            round_closed(&id);
            self.unfile(&id, &call);
            self.end(&id, &call, CallerOutcome::Cancelled);
            call.trace.end(Outcome::Cancelled, None);
            metrics::global().ended(metrics::Ended::Cancelled);
        }
        self.gauges();
    }

    /// The server went away: every call in flight gets an error (a call whose round the
    /// client holds was answered already), every binding ends.
    pub fn on_server_gone(&mut self) -> Vec<String> {
        let rounds: Vec<(RequestId, Call)> = self.open_rounds.drain().collect();
        for (id, call) in rounds {
            round_closed(&id);
            self.unfile(&id, &call);
            self.end(&id, &call, CallerOutcome::Error("server_closed".into()));
            call.trace.end(Outcome::Failed, Some("server_closed"));
            metrics::global().ended(metrics::Ended::Failed);
        }
        let calls: Vec<(RequestId, Call)> = self.in_flight.drain().collect();
        let refusal = Refusal::upstream("server_closed", "the server went away");
        // The client's ungated requests will not be answered either.
        let mut replies: Vec<String> = self
            .relayed
            .drain()
            .map(|(id, _)| refusal.response(&id))
            .collect();
        for (id, call) in calls {
            self.end(&id, &call, CallerOutcome::Error("server_closed".into()));
            call.trace.end(Outcome::Failed, Some("server_closed"));
            metrics::global().ended(metrics::Ended::Failed);
            replies.push(refusal.response(&call.client_id));
        }
        self.gauges();
        replies
    }

    fn end(&mut self, id: &RequestId, call: &Call, outcome: CallerOutcome) {
        let step = call.trace.step("mrtr_gate.finish");
        // A binding the gate already ended answers `unknown_request`: nothing is left to end.
        let finished = self.gate.finish(FinishRequest {
            server: self.config.server.clone(),
            request_id: id.clone(),
            user: call.principal.user.clone(),
            tenant: call.principal.tenant.clone(),
            outcome,
        });
        match finished {
            Ok(_) => step.outcome(Outcome::Done, None),
            Err(d) => step.outcome(Outcome::Refused, Some(d.code.as_str())),
        }
    }
}

/// A round delivered by this process is no longer open: counted so, and its call's span no
/// longer held for its retry.
fn round_closed(live: &RequestId) {
    metrics::global().round_closed(live);
    trace::release(live);
}

/// An id's JSON text as one spelling (`1.0` and `1` apart, as JSON-RPC peers echo ids as
/// they were sent); `None` when it is no JSON.
fn id_text(raw: &str) -> Option<String> {
    serde_json::from_str::<Value>(raw)
        .ok()
        .map(|v| v.to_string())
}

/// How many of the client's ungated requests may wait for their answer at once (stdio): past
/// it a new one is refused `too_many_in_flight`, so a client that never reads cannot grow the
/// proxy without bound.
const MAX_RELAYED: usize = 4096;

/// How many rounds of one principal's may be open at once: past it a new round is given up
/// (its binding ended `too_many_open_rounds`), so a client that never retries, or a server that
/// answers every call with a round, cannot grow the proxy (and the shared index) without bound.
pub const MAX_OPEN_ROUNDS: usize = 1024;

/// How many rounds filed under one key a retry is tried against.
const MATCH_ATTEMPTS: usize = 4;

/// The round is gone (used, ended, expired): its entry was stale.
fn is_dead(denial: &GateDenial) -> bool {
    denial.is(ErrorCode::InactiveRound) || denial.is(ErrorCode::StateAlreadyUsed)
}

/// The retry did not fit this round but may fit another filed under the same key (parallel
/// identical calls whose rounds ask different things). Never a consent refusal: the user is
/// asked once per retry.
fn fits_another(denial: &GateDenial) -> bool {
    [
        ErrorCode::IdentityOrArgumentMismatch,
        ErrorCode::ResponsePopulationMismatch,
        ErrorCode::InvalidInputResponse,
        ErrorCode::ResponseSchemaMismatch,
        ErrorCode::NonAcceptResponseHadContent,
        ErrorCode::UrlResponseHadContent,
    ]
    .into_iter()
    .any(|code| denial.is(code))
}

/// Whether a gated request's params carry a round's answers or state: a retry.
fn is_retry(params: &str) -> bool {
    match parse_members(params, crate::ids::MAX_MESSAGE_BYTES) {
        Ok(members) => {
            members.contains_key("inputResponses") || members.contains_key("requestState")
        }
        // Unreadable params go to the gate as a new request, which refuses them.
        Err(_) => false,
    }
}

/// Params as an object, when they are one.
fn params_object(params: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(params) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// Whether the message or result `text` holds a member named `key` (in any spelling of case a
/// lenient reader might honour) where an input channel puts one: at its top, in its `params`,
/// or one object below (a task's `{"task": {"inputRequests": …}}`). Deeper it is data (a
/// tool's schema may name a property so), not a channel. Text that cannot be read is taken to
/// hold one.
fn carries_member(text: &str, key: &str) -> bool {
    fn near(value: &Value, key: &str, depth: u8) -> bool {
        match value {
            Value::Object(map) => map.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case(key) || (depth < CHANNEL_DEPTH && near(v, key, depth + 1))
            }),
            _ => false,
        }
    }
    serde_json::from_str::<Value>(text).map_or(true, |v| near(&v, key, 0))
}

/// How many objects down from a message an input channel's member is looked for: the
/// message, its `params` or `result`, and one object in them.
const CHANNEL_DEPTH: u8 = 2;

/// A 2025-11-25 `URLElicitationRequiredError` (`-32042`): a URL elicitation carried in an error,
/// which reaches the user around the rounds the gate judges.
fn is_url_elicitation_error(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| {
        v.get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64)
            == Some(URL_ELICITATION_REQUIRED)
    })
}

/// Whether a result's `resultType` asks for input, in any spelling of case a lenient client
/// might honour, or the result cannot be read for sure.
fn is_input_required(result: &str) -> bool {
    // A result whose members cannot be told apart (a key twice: parsers keeping the last one
    // may read a round) is refused like one.
    let Ok(members) = parse_members(result, crate::ids::MAX_MESSAGE_BYTES) else {
        return true;
    };
    members.iter().any(|(key, value)| {
        key.eq_ignore_ascii_case("resultType")
            && serde_json::from_str::<String>(value.get())
                .is_ok_and(|t| t.eq_ignore_ascii_case("input_required"))
    })
}

/// The answer to a server's request the client must not see: unknown method, as the
/// 2026-07-28 client the proxy speaks for answers it.
mod transport;

#[cfg(test)]
mod tests;
