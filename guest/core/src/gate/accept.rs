//! `accept-response`: judge what a server sent for a live binding. A complete or error
//! result ends the binding; an `input_required` round is checked ([`super::round`]), stored
//! as the binding's open round, audited as `received`, and returned as its consent view.

use super::consent_view::RoundView;
use super::record::{Binding, OpenRound};
use super::round::{self, Round};
use super::{ConsentView, Gate, ResponseVerdict, TerminalOutcome, peer};
use crate::audit::{Event, EventKind, Field};
use crate::digest;
use crate::error::{Denial, GateError, PeerMisbehaved};
use crate::host::Host;
use crate::ids::{RequestId, ServerIdentity};
use crate::json::{self, JsonError, quoted};
use crate::policy::limits;
use crate::schema::SchemaCache;
use serde_json::{Map, Value};
use std::rc::Rc;

/// What a response from the bound server means.
enum Judged {
    Complete,
    Error(i64),
    Round(Round),
}

/// Why a response from the bound server is refused.
enum Refusal {
    /// Deny, leave the binding as it is.
    Ignore(GateError),
    /// Deny and end the binding: the bound server misbehaved (fail closed).
    End(GateError),
}

fn peer_json(e: JsonError) -> GateError {
    match e {
        JsonError::Syntax(why) => peer(PeerMisbehaved::ServerSentMalformedResponse(why)),
        JsonError::DuplicateKey(k) => peer(PeerMisbehaved::ServerSentDuplicateJsonKey(k)),
        JsonError::Limit(why) => peer(PeerMisbehaved::ServerExceededLimit(why)),
    }
}

impl<H: Host> Gate<H> {
    pub(super) fn judge_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, Denial> {
        let unbound = || Event::new(EventKind::Rejected).set(Field::Server, server.audited());
        let message = match json::parse_strict(response_json, limits::RESPONSE) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                let e = peer(PeerMisbehaved::ServerSentMalformedResponse(
                    "a json-rpc response must be an object".into(),
                ));
                return Err(self.deny(e, unbound()));
            }
            Err(e) => return Err(self.deny(peer_json(e), unbound())),
        };
        let id = match message.get("id").and_then(RequestId::from_json) {
            Some(id) => id,
            None => {
                let e = peer(PeerMisbehaved::ServerSentMalformedResponse(
                    "the response has no integer or string `id`".into(),
                ));
                return Err(self.deny(e, unbound()));
            }
        };
        let unbound_id = || unbound().set(Field::LiveId, id.to_json());
        let (binding, version) = match self.store.load(self.host.storage(), &id) {
            Ok(Some(found)) => found,
            Ok(None) => {
                let e = peer(PeerMisbehaved::ServerSentUnsolicitedResponse);
                return Err(self.deny(e, unbound_id()));
            }
            Err(e) => return Err(self.deny(e, unbound_id())),
        };
        if binding.fixed.server != *server {
            // Another server may not touch this binding, nor end it.
            let e = peer(PeerMisbehaved::ServerIdentityChanged);
            let event = binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, id.to_json())
                .set(Field::Server, server.audited());
            return Err(self.deny(e, event));
        }
        if binding.live_id != id {
            // A response for an id this binding has moved on from: late or replayed.
            let e = peer(PeerMisbehaved::ServerSentUnsolicitedResponse);
            let event = binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, id.to_json());
            return Err(self.deny(e, event));
        }
        if self.expired(&binding) {
            let e = peer(PeerMisbehaved::ServerSentUnsolicitedResponse);
            return Err(self.fail_binding(binding, version, e, TerminalOutcome::Expired));
        }
        match judge(&binding, &message, &mut self.schemas) {
            Ok(Judged::Complete) => self
                .end(&binding, version, TerminalOutcome::Complete, None)
                .map(|()| ResponseVerdict::Complete)
                .map_err(Denial::unaudited),
            Ok(Judged::Error(code)) => self
                .end(
                    &binding,
                    version,
                    TerminalOutcome::Error,
                    Some("server_error"),
                )
                .map(|()| ResponseVerdict::Error(code))
                .map_err(Denial::unaudited),
            Ok(Judged::Round(round)) => {
                // The checked fields are the compiled form of each schema: nothing more
                // to compile, and the retry validates against exactly what was shown.
                self.open_round(binding, version, round)
            }
            Err(Refusal::Ignore(e)) => {
                let event = binding.event(EventKind::Rejected);
                Err(self.deny(e, event))
            }
            Err(Refusal::End(e)) => {
                Err(self.fail_binding(binding, version, e, TerminalOutcome::Error))
            }
        }
    }

    fn open_round(
        &mut self,
        binding: Rc<Binding>,
        version: u64,
        round: Round,
    ) -> Result<ResponseVerdict, Denial> {
        let number = binding.rounds.saturating_add(1);
        let binding_version = binding.binding_version.unwrap_or(version);
        let state_sha256 = round.state.as_deref().map(digest::digest_str);
        let view_json = RoundView {
            binding: &binding,
            binding_version,
            number,
            inputs: &round.views,
            state: round.state.as_deref().zip(state_sha256.as_deref()),
        }
        .write();
        let view_sha256 = digest::sha256_hex(view_json.as_bytes());
        let input_keys: Vec<String> = round.inputs.keys().cloned().collect();
        let mut binding = self.store.take(binding);
        binding.rounds = number;
        binding.binding_version = Some(binding_version);
        binding.audited = true;
        let mut open = OpenRound {
            number,
            state: round.state,
            state_sha256: state_sha256.clone(),
            inputs: round.inputs,
            view_json: view_json.clone(),
            view_sha256: view_sha256.clone(),
            received_seq: 0,
            rendered: std::cell::OnceCell::new(),
        };
        // Audited first, stored second: a round that storage holds always rests on a
        // `received` event the sink confirmed, whatever fails afterwards.
        let received = binding
            .event_with(EventKind::Received, Some(&open))
            .set_str(Field::Outcome, "accepted");
        open.received_seq = match self.audit(received) {
            Ok(seq) => seq,
            Err(e) => {
                // Nothing may rest on a round the audit trail does not hold: end the binding.
                let _ = self.store.remove(self.host.storage(), &binding, version);
                return Err(Denial::unaudited(e));
            }
        };
        binding.open = Some(open);
        let now = self.now();
        if let Err((e, binding)) =
            self.store
                .store(self.host.storage(), now, binding, Some(version))
        {
            let event = binding.event(EventKind::Rejected);
            return Err(self.deny(e, event));
        }
        Ok(ResponseVerdict::InputRequired(ConsentView {
            view_json,
            view_sha256,
            round: number,
            input_keys,
            request_state_sha256: state_sha256,
        }))
    }
}

/// What a response from the bound server means, or why it is refused.
fn judge(
    binding: &Binding,
    message: &Map<String, Value>,
    schemas: &mut SchemaCache,
) -> Result<Judged, Refusal> {
    let end = |e| Refusal::End(peer(e));
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(end(PeerMisbehaved::ServerSentMalformedResponse(
            "`jsonrpc` must be \"2.0\"".into(),
        )));
    }
    if let Some(k) = json::unexpected_key(message, &["jsonrpc", "id", "result", "error"]) {
        return Err(end(PeerMisbehaved::ServerSentMalformedResponse(format!(
            "the response carries the unexpected member `{}`",
            quoted(k)
        ))));
    }
    match (message.get("result"), message.get("error")) {
        (None, Some(error)) => {
            let code = error.get("code").and_then(Value::as_i64).ok_or_else(|| {
                end(PeerMisbehaved::ServerSentMalformedResponse(
                    "`error.code` must be an integer".into(),
                ))
            })?;
            Ok(Judged::Error(code))
        }
        (Some(Value::Object(result)), None) => {
            // Exact wire casing: a key that is `resultType` (or the MRTR fields) in any
            // other spelling is a smuggling attempt, not an absent field.
            for k in result.keys() {
                let lower = k.to_ascii_lowercase();
                let exact = matches!(k.as_str(), "resultType" | "inputRequests" | "requestState");
                if !exact
                    && matches!(
                        lower.as_str(),
                        "resulttype" | "inputrequests" | "requeststate"
                    )
                {
                    return Err(end(PeerMisbehaved::ServerSentInvalidResultType));
                }
            }
            match result.get("resultType") {
                None => Ok(Judged::Complete),
                Some(Value::String(t)) if t == "complete" => Ok(Judged::Complete),
                Some(Value::String(t)) if t == "input_required" => {
                    if binding.open.is_some() {
                        // A second answer on the same id: the open round stays as it was.
                        return Err(Refusal::Ignore(peer(
                            PeerMisbehaved::ServerSentDuplicateRound,
                        )));
                    }
                    if binding.rounds >= binding.fixed.policy.max_rounds {
                        return Err(end(PeerMisbehaved::ServerExceededRoundLimit));
                    }
                    round::check_round(
                        result,
                        &binding.fixed.policy,
                        binding.fixed.declared,
                        schemas,
                    )
                    .map(Judged::Round)
                    .map_err(Refusal::End)
                }
                Some(_) => Err(end(PeerMisbehaved::ServerSentInvalidResultType)),
            }
        }
        _ => Err(end(PeerMisbehaved::ServerSentMalformedResponse(
            "a response needs exactly one of `result` (an object) and `error`".into(),
        ))),
    }
}
