//! The round loop: register before send, gate the raw result, collect the answers, let the
//! gate build the retry (it asks for consent), send it, repeat. Every exit ends the binding
//! in the gate: complete, a server error, a refusal, a transport failure or a cancellation
//! each leave exactly one terminal event in the audit trail.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::PROTOCOL_VERSION;
use crate::answers::{Answer, Answerer};
use crate::error::ClientError;
use crate::transport::{Outgoing, Transport, TransportCode, Waiting};
use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{
    AcceptedRound, CallerOutcome, ConsentView, FinishRequest, MRTR_METHODS, Policy, Registration,
    RequestId, ResponseVerdict, RetryRequest, ServerIdentity, Unbound,
};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Who calls, and what every request declares.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The user the gate binds every request to.
    pub user: String,
    /// The tenant.
    pub tenant: String,
    /// The policy of each binding (lifetime, round cap, state size).
    pub policy: Policy,
    /// `io.modelcontextprotocol/clientCapabilities` on every request: what the server may
    /// ask for. The default declares form and URL elicitation, nothing deprecated.
    pub capabilities: Value,
    /// `io.modelcontextprotocol/clientInfo` on every request.
    pub client_info: Value,
}

impl ClientConfig {
    /// The defaults for `user` in `tenant`.
    pub fn new(user: impl Into<String>, tenant: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            tenant: tenant.into(),
            policy: Policy::default(),
            capabilities: json!({"elicitation": {"form": {}, "url": {}}}),
            client_info: json!({"name": "mrtr-gate", "version": env!("CARGO_PKG_VERSION")}),
        }
    }
}

/// What the client tells its user while it works. Every method has a default that does
/// nothing (and never cancels).
pub trait Observer {
    /// Called about every quarter second while a response is awaited; `false` cancels.
    fn waiting(&mut self, _method: &str, _round: u32, _waited: Duration) -> bool {
        true
    }
    /// The gate accepted a round; its answers are about to be collected.
    fn round(&mut self, _round: &OpenRound) {}
    /// The user accepted a URL input and the gate built the retry on a granted receipt:
    /// now is the moment to open `url` (the view's `url.full`) outside the client.
    fn open_url(&mut self, _url: &str) {}
    /// Whether the user has asked to stop (checked between steps).
    fn cancelled(&mut self) -> bool {
        false
    }
}

/// A rule of the host's over each round the gate accepted, judged before the round is shown
/// or answered: the operator's policies (`mrtr-gate call --policy`, docs/policy.md). A round
/// it refuses ends the call; one it lets through goes on to the answers and the consent (a
/// rule that grants consent does so through the consent provider, not here).
pub trait RoundRule {
    /// Whether `round` of a call bound to `user` in `tenant` (the gate's principal) may go on.
    fn judge(&self, user: &str, tenant: &str, round: &OpenRound) -> Result<(), RuleRefusal>;
}

/// Why a [`RoundRule`] refused a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRefusal {
    /// `policy_denied` (a rule refused the round) or `policy_failed` (the rules could not
    /// judge it): docs/errors.md.
    pub code: &'static str,
    /// The refusing rule, as a consent receipt id would name it (`policy:<id>`): the trail's
    /// `terminal` event names it. `None` when no rule refused (a failure).
    pub receipt_id: Option<String>,
    /// What happened, for the user (no value of the round's).
    pub message: String,
}

/// An observer that shows nothing.
pub struct Silent;
impl Observer for Silent {}

/// A call in progress: the binding's live id and the next text to send.
#[derive(Clone, Debug)]
pub struct Call {
    method: String,
    name: Option<String>,
    original: RequestId,
    live: RequestId,
    request_json: String,
    rounds: u32,
    ended: bool,
}

impl Call {
    /// The id `register` bound.
    pub fn original_id(&self) -> &RequestId {
        &self.original
    }
    /// The id the next message goes out with.
    pub fn live_id(&self) -> &RequestId {
        &self.live
    }
    /// Rounds answered so far.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }
}

/// A complete result.
#[derive(Clone, Debug)]
pub struct Completed {
    /// The response exactly as received.
    pub response_json: String,
    /// Its `result` member.
    pub result: Value,
    /// How many `input_required` rounds it took.
    pub rounds: u32,
}

/// A round the gate accepted, its consent view read once: the form, the screen and the
/// client all read [`OpenRound::view`], never the text again.
#[derive(Clone, Debug)]
pub struct OpenRound {
    /// What the gate returned: the view's exact text (what a receipt binds), its digest,
    /// the round's number and keys.
    pub accepted: AcceptedRound,
    /// The view, typed (shared: a consent screen of the round may render it,
    /// [`mrtr_gate_host::consent_screen::LastView`]).
    pub view: Arc<ConsentView>,
}

impl OpenRound {
    /// Read the view of `accepted` (strictly: a view that does not parse is refused).
    pub fn read(accepted: AcceptedRound) -> Result<Self, ClientError> {
        let view = ConsentView::parse(&accepted.view_json).map_err(ClientError::UnreadableView)?;
        Ok(Self {
            accepted,
            view: Arc::new(view),
        })
    }
}

/// What one exchange of a call brought back.
#[derive(Clone, Debug)]
pub enum Turn {
    /// The call is done.
    Complete(Completed),
    /// The gate accepted a round: answer it with [`Client::answer`].
    InputRequired(OpenRound),
}

/// An MCP client whose every `tools/call`, `prompts/get` and `resources/read` goes through
/// the gate.
pub struct Client<G: GateApi> {
    gate: G,
    transport: Box<dyn Transport>,
    config: ClientConfig,
    answers: Box<dyn Answerer>,
    observer: Box<dyn Observer>,
    rule: Option<Box<dyn RoundRule>>,
    next_id: i64,
}

struct Waiter<'a> {
    observer: &'a mut dyn Observer,
    method: &'a str,
    round: u32,
}

impl Waiting for Waiter<'_> {
    fn tick(&mut self, waited: Duration) -> bool {
        !self.observer.cancelled() && self.observer.waiting(self.method, self.round, waited)
    }
}

/// How long the client waits before retrying round `round` of a state-only exchange: the
/// server asked for nothing but time, so the retry is paced (50 ms, doubling, at most 2 s).
pub fn state_only_pause(round: u32) -> Duration {
    let exp = round.saturating_sub(1).min(6);
    Duration::from_millis((50u64 << exp).min(2000))
}

impl<G: GateApi> Client<G> {
    /// A client over `gate` (built on the host services the application chose: its consent
    /// prompt, its audit sink) talking to `transport`.
    pub fn new(
        gate: G,
        transport: Box<dyn Transport>,
        config: ClientConfig,
        answers: Box<dyn Answerer>,
    ) -> Self {
        Self {
            gate,
            transport,
            config,
            answers,
            observer: Box::new(Silent),
            rule: None,
            next_id: 0,
        }
    }

    /// Judge every round the gate accepts by `rule` before it is shown or answered.
    pub fn with_rule(mut self, rule: Box<dyn RoundRule>) -> Self {
        self.rule = Some(rule);
        self
    }

    /// Tell `observer` what happens (progress, rounds, URLs to open, cancellation).
    pub fn with_observer(mut self, observer: Box<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// The server every round is bound to.
    pub fn server(&self) -> &ServerIdentity {
        self.transport.server()
    }

    /// The gate (for `expire_stale`, or a test's look at it).
    pub fn gate_mut(&mut self) -> &mut G {
        &mut self.gate
    }

    fn id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId::Number(self.next_id)
    }

    /// The `_meta` envelope every request carries.
    pub fn meta(&self) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": self.config.capabilities,
            "io.modelcontextprotocol/clientInfo": self.config.client_info,
        })
    }

    fn with_meta(&self, params: Value) -> Result<Map<String, Value>, ClientError> {
        let mut params = match params {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            _ => return Err(ClientError::Usage("params must be a JSON object".into())),
        };
        let mut meta = match params.remove("_meta") {
            Some(Value::Object(m)) => m,
            None => Map::new(),
            Some(_) => return Err(ClientError::Usage("`_meta` must be an object".into())),
        };
        if let Value::Object(ours) = self.meta() {
            meta.extend(ours);
        }
        params.insert("_meta".into(), Value::Object(meta));
        Ok(params)
    }

    /// Send a request the gate does not bind (`server/discover`, `tools/list`, …) and return
    /// its `result`. A result that is not complete is refused: only the gate's three methods
    /// may take input rounds, and those go through [`Client::call`].
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        if MRTR_METHODS.contains(&method) {
            return Err(ClientError::Usage(format!("{method} goes through `call`")));
        }
        let params = self.with_meta(params)?;
        let id = self.id();
        let text =
            json!({"jsonrpc": "2.0", "id": id.to_json(), "method": method, "params": params})
                .to_string();
        let mut waiter = Waiter {
            observer: &mut *self.observer,
            method,
            round: 0,
        };
        let raw = self
            .transport
            .request(
                Outgoing {
                    id: &id,
                    method,
                    name: None,
                    protocol_version: PROTOCOL_VERSION,
                    json: &text,
                },
                &mut waiter,
            )
            .map_err(|e| {
                if e.code == TransportCode::Cancelled {
                    ClientError::Cancelled
                } else {
                    ClientError::Transport(e)
                }
            })?;
        let response: Value = serde_json::from_str(&raw).map_err(|_| ClientError::Peer {
            code: "malformed_response",
            message: "the response is not json".into(),
        })?;
        if let Some(error) = response.get("error") {
            return Err(server_error(error));
        }
        let result = response
            .get("result")
            .cloned()
            .ok_or_else(|| ClientError::Peer {
                code: "malformed_response",
                message: "the response has neither `result` nor `error`".into(),
            })?;
        match result.get("resultType") {
            None => Ok(result),
            Some(Value::String(t)) if t == "complete" => Ok(result),
            // Only the gate's three methods may take input rounds: refused, and on record.
            Some(Value::String(t)) if t == "input_required" => {
                let server = self.transport.server().clone();
                Err(ClientError::Refused(self.gate.refuse_unbound(
                    &server,
                    &self.config.user,
                    &self.config.tenant,
                    &Unbound::InputRequired,
                )))
            }
            Some(_) => Err(ClientError::Peer {
                code: "invalid_result_type",
                message: format!(
                    "the server answered `{method}` with a resultType this client does not know"
                ),
            }),
        }
    }

    /// `server/discover`, with the version negotiation of SEP-2575: when the server refuses
    /// the version (`-32022`) and lists this client's among those it supports, ask once
    /// more; when it does not, fail with the versions it named. A server that does not know
    /// `server/discover` (`-32601`) is taken as it is (`Ok(None)`).
    pub fn discover(&mut self) -> Result<Option<Value>, ClientError> {
        for _ in 0..2 {
            match self.request("server/discover", json!({})) {
                Ok(result) => return Ok(Some(result)),
                Err(ClientError::Server { code: -32601, .. }) => return Ok(None),
                Err(ClientError::Server {
                    code: -32022, data, ..
                }) => {
                    let supported = supported_versions(&data);
                    if !supported.iter().any(|v| v == PROTOCOL_VERSION) {
                        return Err(ClientError::UnsupportedVersion(supported));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(ClientError::UnsupportedVersion(vec![]))
    }

    /// Run `method` with `params` (without `_meta`: the client adds it) to the end: every
    /// round through the gate, answers from the answer source.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Completed, ClientError> {
        let mut call = self.start(method, params)?;
        loop {
            match self.exchange(&mut call)? {
                Turn::Complete(done) => return Ok(done),
                Turn::InputRequired(round) => self.answer(&mut call, &round)?,
            }
        }
    }

    /// Register a call with the gate (nothing is sent yet).
    pub fn start(&mut self, method: &str, params: Value) -> Result<Call, ClientError> {
        if !MRTR_METHODS.contains(&method) {
            return Err(ClientError::Usage(format!(
                "`{method}` is not one of tools/call, prompts/get, resources/read; use `request`"
            )));
        }
        let params = self.with_meta(params)?;
        let name = ["name", "uri"]
            .iter()
            .find_map(|k| params.get(*k).and_then(Value::as_str))
            .map(str::to_owned);
        let id = self.id();
        let registered = self
            .gate
            .register(Registration {
                request_id: id.clone(),
                server: self.transport.server().clone(),
                user: self.config.user.clone(),
                tenant: self.config.tenant.clone(),
                method: method.into(),
                params_json: Value::Object(params).to_string(),
                policy: self.config.policy.clone(),
            })
            .map_err(ClientError::Refused)?;
        Ok(Call {
            method: method.into(),
            name,
            original: id.clone(),
            live: id,
            request_json: registered.request_json,
            rounds: 0,
            ended: false,
        })
    }

    /// Send the call's next message and judge what comes back.
    pub fn exchange(&mut self, call: &mut Call) -> Result<Turn, ClientError> {
        if call.ended {
            return Err(ClientError::Usage("the call has ended".into()));
        }
        let mut waiter = Waiter {
            observer: &mut *self.observer,
            method: &call.method,
            round: call.rounds,
        };
        let sent = self.transport.request(
            Outgoing {
                id: &call.live,
                method: &call.method,
                name: call.name.as_deref(),
                protocol_version: PROTOCOL_VERSION,
                json: &call.request_json,
            },
            &mut waiter,
        );
        let raw = match sent {
            Ok(raw) => raw,
            Err(e) if e.code == TransportCode::Cancelled => {
                self.end(call, CallerOutcome::Cancelled);
                self.cancel_on_server(call);
                return Err(ClientError::Cancelled);
            }
            Err(e) => {
                self.end(call, CallerOutcome::Error(e.code.as_str().into()));
                return Err(ClientError::Transport(e));
            }
        };
        let server = self.transport.server().clone();
        match self.gate.accept_response(&server, &raw) {
            Ok(ResponseVerdict::InputRequired(accepted)) => {
                call.rounds = accepted.round;
                let round = match OpenRound::read(accepted) {
                    Ok(round) => round,
                    Err(e) => {
                        // Nothing can be shown of a round whose view does not read: give it up.
                        self.end(call, CallerOutcome::Error(e.code().into()));
                        return Err(e);
                    }
                };
                // The host's rule, before anyone sees the round: a refusal ends the binding,
                // on record (a denial names its rule in the trail).
                let judged = self.rule.as_ref().map_or(Ok(()), |rule| {
                    rule.judge(&self.config.user, &self.config.tenant, &round)
                });
                if let Err(refusal) = judged {
                    let outcome = match &refusal.receipt_id {
                        Some(id) => CallerOutcome::PolicyDenied(id.clone()),
                        None => CallerOutcome::Error(refusal.code.into()),
                    };
                    self.end(call, outcome);
                    return Err(ClientError::Policy(refusal));
                }
                self.observer.round(&round);
                Ok(Turn::InputRequired(round))
            }
            Ok(ResponseVerdict::Complete) => {
                call.ended = true;
                let result = serde_json::from_str::<Value>(&raw)
                    .ok()
                    .and_then(|mut v| v.get_mut("result").map(Value::take))
                    .unwrap_or(Value::Null);
                Ok(Turn::Complete(Completed {
                    response_json: raw,
                    result,
                    rounds: call.rounds,
                }))
            }
            Ok(ResponseVerdict::Error(code)) => {
                call.ended = true;
                let error = serde_json::from_str::<Value>(&raw)
                    .ok()
                    .and_then(|mut v| v.get_mut("error").map(Value::take))
                    .unwrap_or(Value::Null);
                let mut e = server_error(&error);
                if let ClientError::Server { code: c, .. } = &mut e {
                    *c = code;
                }
                Err(e)
            }
            Err(denial) => {
                // Most refusals end the binding in the gate; the rest (a duplicate round) keep
                // it, and the client gives it up here. Either way nothing more is sent.
                self.end(call, CallerOutcome::Error("gate_refused".into()));
                Err(ClientError::Refused(denial))
            }
        }
    }

    /// Answer `round` of `call`: collect the answers (none for a state-only round, which is
    /// paced instead), let the gate validate them, ask for consent and build the retry.
    /// Afterwards [`Client::exchange`] sends it.
    pub fn answer(&mut self, call: &mut Call, round: &OpenRound) -> Result<(), ClientError> {
        let accepted = &round.accepted;
        if self.observer.cancelled() {
            self.end(call, CallerOutcome::Cancelled);
            return Err(ClientError::Cancelled);
        }
        let responses = if accepted.input_keys.is_empty() {
            let pause = state_only_pause(accepted.round);
            let step = Duration::from_millis(50);
            let mut slept = Duration::ZERO;
            while slept < pause {
                if self.observer.cancelled() {
                    self.end(call, CallerOutcome::Cancelled);
                    return Err(ClientError::Cancelled);
                }
                std::thread::sleep(step.min(pause.saturating_sub(slept)));
                slept += step;
            }
            "{}".to_owned()
        } else {
            match self.answers.answer(round) {
                Ok(Answer::Send(json)) => json,
                Ok(Answer::Cancel) => {
                    self.end(call, CallerOutcome::Cancelled);
                    return Err(ClientError::Cancelled);
                }
                Err(why) => {
                    self.end(call, CallerOutcome::Error("no_answer".into()));
                    return Err(ClientError::NoAnswer(why.0));
                }
            }
        };
        let retry_id = self.id();
        let built = self.gate.build_retry(RetryRequest {
            server: self.transport.server().clone(),
            request_id: call.live.clone(),
            retry_id: retry_id.clone(),
            user: self.config.user.clone(),
            tenant: self.config.tenant.clone(),
            responses_json: responses.clone(),
        });
        match built {
            Ok(retry) => {
                call.live = retry_id;
                call.request_json = retry.request_json;
                // The answers the gate just accepted: a JSON object (its strict parse passed).
                let sent: Value = serde_json::from_str(&responses).unwrap_or(Value::Null);
                for url in round.view.accepted_urls(&sent) {
                    self.observer.open_url(url);
                }
                Ok(())
            }
            Err(denial) => {
                let outcome = if denial.user_refused() {
                    // The user said no at the consent prompt: the request is abandoned.
                    CallerOutcome::Cancelled
                } else {
                    CallerOutcome::Error("gate_refused".into())
                };
                self.end(call, outcome);
                Err(ClientError::Refused(denial))
            }
        }
    }

    /// Abandon `call` (the user cancelled it while its round was open).
    pub fn cancel(&mut self, call: &mut Call) {
        self.end(call, CallerOutcome::Cancelled);
    }

    fn end(&mut self, call: &mut Call, outcome: CallerOutcome) {
        if call.ended {
            return;
        }
        call.ended = true;
        // A binding the gate already ended answers `unknown_request`: nothing is left to end.
        let _ = self.gate.finish(FinishRequest {
            server: self.transport.server().clone(),
            request_id: call.live.clone(),
            user: self.config.user.clone(),
            tenant: self.config.tenant.clone(),
            outcome,
        });
    }

    fn cancel_on_server(&mut self, call: &Call) {
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call.live.to_json(), "reason": "cancelled by the user", "_meta": self.meta()},
        });
        let _ = self
            .transport
            .notify("notifications/cancelled", &note.to_string());
    }
}

fn server_error(error: &Value) -> ClientError {
    ClientError::Server {
        code: error["code"].as_i64().unwrap_or(0),
        message: error["message"].as_str().unwrap_or_default().to_owned(),
        data: error.get("data").cloned().unwrap_or(Value::Null),
    }
}

fn supported_versions(data: &Value) -> Vec<String> {
    data.get("supported")
        .cloned()
        .and_then(|s| serde_json::from_value::<Vec<String>>(s).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_only_rounds_are_paced_and_bounded() {
        assert_eq!(state_only_pause(1), Duration::from_millis(50));
        assert_eq!(state_only_pause(2), Duration::from_millis(100));
        assert_eq!(state_only_pause(6), Duration::from_millis(1600));
        assert_eq!(state_only_pause(7), Duration::from_millis(2000));
        assert_eq!(state_only_pause(u32::MAX), Duration::from_millis(2000));
        assert_eq!(state_only_pause(0), Duration::from_millis(50));
    }

    /// A server that answers every request with one JSON-RPC error; what was sent is kept
    /// (the `MCP-Protocol-Version` header and the message).
    struct Refusing {
        server: ServerIdentity,
        error: Value,
        sent: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    }

    impl Transport for Refusing {
        fn server(&self) -> &ServerIdentity {
            &self.server
        }
        fn request(
            &mut self,
            request: Outgoing<'_>,
            _: &mut dyn Waiting,
        ) -> Result<String, crate::TransportError> {
            let message: Value = serde_json::from_str(request.json).unwrap();
            let id = message["id"].clone();
            self.sent
                .lock()
                .unwrap()
                .push((request.protocol_version.to_owned(), message));
            Ok(json!({"jsonrpc": "2.0", "id": id, "error": self.error}).to_string())
        }
        fn notify(&mut self, _: &str, _: &str) -> Result<(), crate::TransportError> {
            Ok(())
        }
    }

    struct NoAnswers;

    impl Answerer for NoAnswers {
        fn answer(&mut self, _: &OpenRound) -> Result<Answer, crate::answers::NoAnswer> {
            Err(crate::answers::NoAnswer("none".into()))
        }
    }

    fn refused_with(supported: Value) -> (ClientError, Vec<(String, Value)>) {
        use mrtr_gate_host::core::memory::{
            ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
        };
        let clock = std::sync::Arc::new(ManualClock::new(1_700_000_000_000));
        let services = mrtr_gate_host::HostServices {
            clock: clock.clone(),
            storage: std::sync::Arc::new(MemoryStorage::new(clock)),
            consent: std::sync::Arc::new(ScriptedConsent::new(ScriptedAnswer::Refuse)),
            audit: std::sync::Arc::new(MemoryAudit::new()),
        };
        let sent = std::sync::Arc::default();
        let transport = Refusing {
            server: ServerIdentity::origin("https://old.example/mcp").unwrap(),
            error: json!({"code": -32022, "message": "unsupported protocol version",
                "data": {"supported": supported}}),
            sent: std::sync::Arc::clone(&sent),
        };
        let mut client = Client::new(
            mrtr_gate_host::NativeGate::new(services),
            Box::new(transport),
            ClientConfig::new("alice", "acme"),
            Box::new(NoAnswers),
        );
        let e = client.discover().unwrap_err();
        let sent = sent.lock().unwrap().clone();
        (e, sent)
    }

    /// AISVS C10 10.3.4 (minimum protocol version, no downgrade): a server that refuses
    /// 2026-07-28 and offers only older versions is refused, never followed down; one that
    /// lists 2026-07-28 is asked again with it, once. Every request names 2026-07-28 in its
    /// header and its `_meta`.
    #[test]
    fn a_server_offering_only_older_versions_is_refused_never_followed_down() {
        let (e, sent) = refused_with(json!(["2025-11-25", "2025-06-18"]));
        assert_eq!(e.code(), "unsupported_protocol_version");
        assert!(
            matches!(&e, ClientError::UnsupportedVersion(v) if v == &["2025-11-25", "2025-06-18"])
        );
        assert_eq!(sent.len(), 1, "no request on an older version: {sent:?}");
        let (e, again) = refused_with(json!(["2025-11-25", PROTOCOL_VERSION]));
        assert_eq!(e.code(), "unsupported_protocol_version");
        assert_eq!(
            again.len(),
            2,
            "asked once more, on the same version: {again:?}"
        );
        for (header, message) in sent.iter().chain(&again) {
            assert_eq!(header, PROTOCOL_VERSION);
            assert_eq!(
                message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                PROTOCOL_VERSION
            );
        }
    }

    /// A gate that accepts every response as a round whose view is `view_json`, and counts
    /// the bindings the client ends.
    struct ViewGate {
        view_json: String,
        finished: std::sync::Arc<std::sync::Mutex<Vec<CallerOutcome>>>,
    }

    impl GateApi for ViewGate {
        fn register(
            &mut self,
            r: Registration,
        ) -> Result<mrtr_gate_host::core::Registered, mrtr_gate_host::GateDenial> {
            Ok(mrtr_gate_host::core::Registered {
                request_json: json!({"jsonrpc": "2.0", "id": r.request_id.to_json(),
                    "method": r.method, "params": {}})
                .to_string(),
                params_sha256: String::new(),
                expires_at_ms: 0,
            })
        }
        fn accept_response(
            &mut self,
            _: &ServerIdentity,
            _: &str,
        ) -> Result<ResponseVerdict, mrtr_gate_host::GateDenial> {
            Ok(ResponseVerdict::InputRequired(AcceptedRound {
                view_json: self.view_json.clone(),
                view_sha256: String::new(),
                round: 1,
                input_keys: vec!["pay".into()],
                request_state_sha256: None,
            }))
        }
        fn build_retry(
            &mut self,
            _: RetryRequest,
        ) -> Result<mrtr_gate_host::core::Retry, mrtr_gate_host::GateDenial> {
            panic!("nothing is answered on an unreadable view")
        }
        fn retry_from_client(
            &mut self,
            _: mrtr_gate_host::core::ClientRetry,
        ) -> Result<mrtr_gate_host::core::Retry, mrtr_gate_host::GateDenial> {
            panic!("the client library sends no client's retry")
        }
        fn refuse_unbound(
            &mut self,
            _: &ServerIdentity,
            _: &str,
            _: &str,
            _: &mrtr_gate_host::core::Unbound,
        ) -> mrtr_gate_host::GateDenial {
            panic!("the client library answers a server's request itself")
        }
        fn finish(
            &mut self,
            r: FinishRequest,
        ) -> Result<mrtr_gate_host::core::TerminalOutcome, mrtr_gate_host::GateDenial> {
            self.finished.lock().unwrap().push(r.outcome);
            Ok(mrtr_gate_host::core::TerminalOutcome::Error)
        }
        fn expire_stale(&mut self) -> Result<u32, mrtr_gate_host::GateDenial> {
            Ok(0)
        }
    }

    /// A client whose gate takes every response as a round with `view_json`, and the
    /// bindings it ends.
    fn over_view(
        view_json: &str,
    ) -> (
        Client<ViewGate>,
        std::sync::Arc<std::sync::Mutex<Vec<CallerOutcome>>>,
    ) {
        let finished = std::sync::Arc::default();
        let gate = ViewGate {
            view_json: view_json.into(),
            finished: std::sync::Arc::clone(&finished),
        };
        let transport = Refusing {
            server: ServerIdentity::origin("https://a.example/mcp").unwrap(),
            error: json!({"code": -1, "message": "unused"}),
            sent: std::sync::Arc::default(),
        };
        let client = Client::new(
            gate,
            Box::new(transport),
            ClientConfig::new("alice", "acme"),
            Box::new(NoAnswers),
        );
        (client, finished)
    }

    /// A round whose view does not read as a view (here: text that merely contains a URL
    /// input's spelling) is never answered, shown or opened: the call stops and its binding
    /// is ended.
    #[test]
    fn a_round_whose_view_does_not_read_is_refused_and_ended() {
        for view_json in [
            r#"{"inputs":[{"key":"pay","kind":"url","url":{"full":"https://a.example/"}}]}"#,
            "",
            "null",
        ] {
            let (mut client, finished) = over_view(view_json);
            let e = client
                .call("tools/call", json!({"name": "t", "arguments": {}}))
                .unwrap_err();
            assert_eq!(e.code(), "unreadable_consent_view", "{view_json}");
            assert!(matches!(e, ClientError::UnreadableView(_)));
            assert_eq!(
                *finished.lock().unwrap(),
                [CallerOutcome::Error("unreadable_consent_view".into())]
            );
        }
    }

    /// A state-only round's view as the gate writes it.
    const STATE_VIEW: &str = r#"{"effects":["then tools/call `tool` is retried at https://server.example/mcp with the server's saved state"],"inputs":[],"max_rounds":10,"request":{"arguments":{"bytes":2,"value":{}},"binding_version":3,"id":2,"method":"tools/call","name":"tool","original_id":2,"params_sha256":"dc8c839716ba3dd331206b6ea178b40b946d8d6f021917672da867905de22166","tenant_sha256":"eb737e40d6ac063f0352520f443534d3300ad596c69ed775c6962b488b001f8f","user_sha256":"0a50500b2a3435fe7472877eb22d48d47a228e946b0b991ab7402a8d00f6b32d"},"round":1,"server":"https://server.example/mcp","state":{"bytes":1,"present":true,"sha256":"0f4657778ae14ff7aeeb2c2190ede79099aa9c4e8a9e54829462f0e92af659e5"},"view":"mrtr-gate/consent-view/v2"}"#;

    /// A rule that refuses every round, naming `receipt_id` (a deny) or nothing (a failure).
    struct RefuseAll(Option<String>);

    impl RoundRule for RefuseAll {
        fn judge(&self, user: &str, tenant: &str, round: &OpenRound) -> Result<(), RuleRefusal> {
            assert_eq!((user, tenant), ("alice", "acme"));
            assert_eq!(round.view.request.name, "tool");
            Err(RuleRefusal {
                code: if self.0.is_some() {
                    "policy_denied"
                } else {
                    "policy_failed"
                },
                receipt_id: self.0.clone(),
                message: "refused".into(),
            })
        }
    }

    /// An observer that fails the test if a round is shown.
    struct NothingShown;

    impl Observer for NothingShown {
        fn round(&mut self, _: &OpenRound) {
            panic!("a round the rule refused was shown");
        }
    }

    /// A round the host's rule refuses is never shown or answered: the call stops with the
    /// rule's code and its binding ends naming the rule (a deny) or with the code (a failure).
    #[test]
    fn a_round_the_rule_refuses_is_never_shown_and_its_binding_ends_naming_the_rule() {
        for (rule, ended) in [
            (
                Some("policy:no".to_owned()),
                CallerOutcome::PolicyDenied("policy:no".into()),
            ),
            (None, CallerOutcome::Error("policy_failed".into())),
        ] {
            let (client, finished) = over_view(STATE_VIEW);
            let mut client = client
                .with_observer(Box::new(NothingShown))
                .with_rule(Box::new(RefuseAll(rule.clone())));
            let e = client
                .call("tools/call", json!({"name": "tool", "arguments": {}}))
                .unwrap_err();
            assert!(
                matches!(&e, ClientError::Policy(r) if r.receipt_id == rule),
                "{e}"
            );
            assert_eq!(*finished.lock().unwrap(), [ended]);
        }
    }

    #[test]
    fn supported_versions_come_from_the_error_data() {
        let data = json!({"supported": ["2026-07-28", "2025-11-25"]});
        assert_eq!(supported_versions(&data), vec!["2026-07-28", "2025-11-25"]);
        assert!(supported_versions(&json!(null)).is_empty());
        assert!(supported_versions(&json!({"supported": [1]})).is_empty());
    }
}
