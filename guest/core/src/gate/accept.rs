//! `accept-response`: judge what a server sent for a live binding. A complete or error
//! result ends the binding; an `input_required` round is checked ([`super::round`]), stored
//! as the binding's open round, audited as `received`, and returned as its consent view.

use super::consent_view::RoundView;
use super::memo::SchemaCache;
use super::record::{Binding, OpenRound};
use super::round::{self, Round};
use super::store::Owned;
use super::{AcceptedRound, Gate, ResponseVerdict, TerminalOutcome};
use crate::audit::{Event, EventKind, Field};
use crate::digest;
use crate::error::{CallerMisuse, Denial, GateError, HostFault, PeerMisbehaved};
use crate::host::Host;
use crate::ids::{RequestId, ServerIdentity};
use crate::json::{self, JsonError, quoted};
use crate::policy::limits;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
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
        JsonError::Syntax(why) => GateError::from(PeerMisbehaved::ServerSentMalformedResponse(why)),
        JsonError::DuplicateKey(k) => {
            GateError::from(PeerMisbehaved::ServerSentDuplicateJsonKey(k))
        }
        JsonError::Limit(why) => GateError::from(PeerMisbehaved::ServerExceededLimit(why)),
    }
}

impl<H: Host> Gate<H> {
    pub(super) fn judge_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, Denial> {
        let digests = self.principals.server(server);
        let unbound = || {
            Event::new(EventKind::Rejected, Rc::clone(&digests.key))
                .set_raw(Field::Server, Rc::clone(&digests.audited))
        };
        let body = match read_message(response_json) {
            Ok(body) => body,
            Err(e) => return Err(self.deny(e, unbound())),
        };
        let id = match body.id.as_ref().and_then(RequestId::from_json) {
            Some(id) => id,
            None => {
                let e = GateError::from(PeerMisbehaved::ServerSentMalformedResponse(
                    "the response has no integer or string `id`".into(),
                ));
                return Err(self.deny(e, unbound()));
            }
        };
        if let Some(ended) = self.end_from_cache(server, &digests.key, &id, &body) {
            return ended;
        }
        let unbound_id = || unbound().set(Field::LiveId, id.to_json());
        let (binding, version) =
            match self
                .store
                .load(self.host.storage(), server, &digests.key, &id)
            {
                Ok(Some(found)) => found,
                Ok(None) => {
                    let e = GateError::from(PeerMisbehaved::ServerSentUnsolicitedResponse);
                    return Err(self.deny(e, unbound_id()));
                }
                Err(e) => return Err(self.deny(e, unbound_id())),
            };
        if binding.live_id != id || !binding.sent {
            // A response for an id this binding has moved on from (late or replayed), or
            // for a retry not handed out yet (early: nobody has sent it).
            let e = GateError::from(PeerMisbehaved::ServerSentUnsolicitedResponse);
            let event = binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, id.to_json());
            return Err(self.deny(e, event));
        }
        let rejected = || {
            binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, id.to_json())
        };
        if let Some(denied) = self.clock_behind(&binding, rejected) {
            return Err(denied);
        }
        if self.expired(&binding) {
            let e = GateError::from(PeerMisbehaved::ServerSentUnsolicitedResponse);
            return Err(self.fail_binding(binding, version, e, TerminalOutcome::Expired));
        }
        match judge(&binding, &body, &mut self.schemas) {
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

    /// A complete or error result for the binding this instance holds, ended with no read
    /// first: when the record is still the one held (the removal's compare-and-swap says
    /// so), what storage would have returned is what was judged. None when the response is
    /// not that (a round, a refusal, a binding not held, expired or ahead of the clock) or the
    /// record moved on: decided on what storage holds now, as every other response is.
    fn end_from_cache(
        &mut self,
        server: &ServerIdentity,
        server_key: &str,
        id: &RequestId,
        body: &Body,
    ) -> Option<Result<ResponseVerdict, Denial>> {
        // A round is judged once, after the read (its checks are the costly part).
        if matches!(&body.result_type, Some(Value::String(t)) if t == "input_required") {
            return None;
        }
        let (binding, version) = self.store.current(server, server_key, id)?;
        if binding.live_id != *id
            || !binding.sent
            || self.is_clock_behind(&binding)
            || self.expired(&binding)
        {
            return None;
        }
        let (outcome, reason, verdict) = match judge(&binding, body, &mut self.schemas) {
            Ok(Judged::Complete) => (TerminalOutcome::Complete, None, ResponseVerdict::Complete),
            Ok(Judged::Error(code)) => (
                TerminalOutcome::Error,
                Some("server_error"),
                ResponseVerdict::Error(code),
            ),
            _ => return None,
        };
        match self.end_if_current(&binding, version, outcome, reason, None) {
            Ok(true) => Some(Ok(verdict)),
            Ok(false) => None,
            Err(e) => Some(Err(Denial::unaudited(e))),
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
        let view_sha256 = digest::text_sha256_hex(&view_json);
        let input_keys: Vec<String> = round.inputs.keys().cloned().collect();
        let mut binding = self.store.take(binding);
        binding.rounds = number;
        binding.binding_version = Some(binding_version);
        binding.audited = true;
        let open = OpenRound {
            number,
            state: round.state,
            state_sha256: state_sha256.clone(),
            inputs: round.inputs,
            view_json: view_json.clone(),
            view_sha256: view_sha256.clone(),
            received_seq: 0,
            rendered: super::memo::Derived::new(),
        };
        // Audited first, stored second (one journal call): a round that storage holds always
        // rests on a `received` event the sink confirmed, whatever fails afterwards. Each time
        // another writer's event gets in first, the record is read again (as for the retry's
        // `submitted`): a binding ended meanwhile gets no `received` after its `terminal`.
        let received = binding
            .event_with(EventKind::Received, Some(&open))
            .set_str(Field::Outcome, "accepted");
        let key = binding.key();
        binding.open = Some(open);
        let now = self.now();
        // The record carries its `received` line's `seq`: made again for each head offered.
        let written = self.audit_then_write(received, Some((&key, version)), |seq| {
            if let Some(open) = binding.open.as_mut() {
                open.received_seq = seq;
            }
            Ok(vec![Owned::store(&binding, now, version)?])
        });
        let applied = match written {
            Ok((_, applied)) => applied,
            Err(GateError::Caller(CallerMisuse::InactiveRound)) => {
                // Ended by another (its `terminal` is in the trail): the response came after
                // the end, as one for an id no binding holds (nothing to end here).
                let e = GateError::from(PeerMisbehaved::ServerSentUnsolicitedResponse);
                binding.open = None;
                let event = binding.event(EventKind::Rejected);
                return Err(self.deny(e, event));
            }
            Err(e @ GateError::Host(HostFault::StateAlreadyUsed)) => {
                // Written by another since the read: theirs is the last word.
                binding.open = None;
                let event = binding.event(EventKind::Rejected);
                return Err(self.deny(e, event));
            }
            Err(e) => {
                // Nothing may rest on a round the audit trail does not hold: end the binding.
                // Moved on: a host that made both steps at once stored the round, its line
                // unconfirmed; that binding is ended instead.
                if self
                    .store
                    .remove(self.host.storage(), &binding, version)
                    .is_err()
                {
                    self.end_if_left(&binding, e.code(), |b| {
                        b.open
                            .as_ref()
                            .is_some_and(|o| o.view_sha256 == view_sha256)
                    });
                }
                return Err(Denial::unaudited(e));
            }
        };
        if let Err((e, binding)) = self.store.stored(binding, applied) {
            let event = binding.event(EventKind::Rejected);
            return Err(self.deny(e, event));
        }
        Ok(ResponseVerdict::InputRequired(AcceptedRound {
            view_json,
            view_sha256,
            round: number,
            input_keys,
            request_state_sha256: state_sha256,
        }))
    }
}

/// The members of a message or result, each kept as its text.
type Members<'a> = BTreeMap<String, &'a RawValue>;

/// The member `key` of `members`, read strictly (a scalar the gate decides on).
fn member(members: &Members<'_>, key: &str) -> Result<Option<Value>, JsonError> {
    members
        .get(key)
        .map(|raw| json::parse_strict(raw.get(), limits::RESPONSE))
        .transpose()
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// What the gate reads of a message, taken before the binding is looked at (a document the
/// parser refuses leaves the binding untouched).
struct Body {
    /// The first envelope member other than `jsonrpc`, `id`, `result` and `error`.
    unexpected: Option<String>,
    jsonrpc: Option<Value>,
    id: Option<Value>,
    has_result: bool,
    has_error: bool,
    /// Whether `result` is an object.
    result_object: bool,
    /// A result key that is `resultType`, `inputRequests` or `requestState` in other casing.
    miscased: bool,
    result_type: Option<Value>,
    /// The whole result, read strictly, when it is `input_required`.
    round: Option<Map<String, Value>>,
    error_code: Option<Value>,
}

const ENVELOPE: [&str; 4] = ["jsonrpc", "id", "result", "error"];

/// Is `k` an MRTR wire key in other casing (a smuggling attempt, not an absent field)?
fn is_miscased(k: &str) -> bool {
    let exact = matches!(k, "resultType" | "inputRequests" | "requestState");
    !exact
        && matches!(
            k.to_ascii_lowercase().as_str(),
            "resulttype" | "inputrequests" | "requeststate"
        )
}

/// Read a message. Most messages are read whole and strictly in one pass (the bounds of a
/// round); one that pass refuses (over the bounds, a duplicate key or a lone surrogate
/// somewhere) is read again for its envelope only, which decides: a complete or error
/// result's content is the user's, not the gate's, and passes; a round stays refused.
fn read_message(text: &str) -> Result<Body, GateError> {
    match json::parse_strict(text, limits::RESPONSE) {
        Ok(Value::Object(m)) => Ok(strict_body(m)),
        Ok(_) => Err(not_an_object()),
        Err(_) => match json::parse_members(text, limits::MAX_MESSAGE_BYTES) {
            Ok(m) => envelope_body(&m).map_err(peer_json),
            Err(JsonError::Syntax(why)) if why == json::NOT_AN_OBJECT => Err(not_an_object()),
            Err(e) => Err(peer_json(e)),
        },
    }
}

fn not_an_object() -> GateError {
    GateError::from(PeerMisbehaved::ServerSentMalformedResponse(
        "a json-rpc response must be an object".into(),
    ))
}

fn strict_body(mut m: Map<String, Value>) -> Body {
    let unexpected = json::unexpected_key(&m, &ENVELOPE).map(str::to_owned);
    let (has_result, has_error) = (m.contains_key("result"), m.contains_key("error"));
    let error_code = match m.get("error") {
        Some(Value::Object(e)) => e.get("code").cloned(),
        _ => None,
    };
    let (result_object, miscased, result_type, round) = match m.remove("result") {
        Some(Value::Object(r)) => {
            let miscased = r.keys().any(|k| is_miscased(k));
            let result_type = r.get("resultType").cloned();
            let round = matches!(&result_type, Some(Value::String(t)) if t == "input_required")
                .then_some(r);
            (true, miscased, result_type, round)
        }
        _ => (false, false, None, None),
    };
    Body {
        unexpected,
        jsonrpc: m.remove("jsonrpc"),
        id: m.remove("id"),
        has_result,
        has_error,
        result_object,
        miscased,
        result_type,
        round,
        error_code,
    }
}

fn envelope_body(m: &Members<'_>) -> Result<Body, JsonError> {
    let error_code = match m.get("error") {
        Some(error) if is_object(error) => member(
            &json::parse_members(error.get(), limits::MAX_MESSAGE_BYTES)?,
            "code",
        )?,
        _ => None,
    };
    let (result_object, miscased, result_type, round) = match m.get("result") {
        Some(raw) if is_object(raw) => {
            let members = json::parse_members(raw.get(), limits::MAX_MESSAGE_BYTES)?;
            let miscased = members.keys().any(|k| is_miscased(k));
            let result_type = member(&members, "resultType")?;
            let round = match &result_type {
                // A round is the gate's to decide on: read whole, under the strict limits
                // (duplicate keys at any depth, size, depth, count, lone surrogates).
                Some(Value::String(t)) if t == "input_required" => {
                    match json::parse_strict(raw.get(), limits::RESPONSE)? {
                        Value::Object(r) => Some(r),
                        _ => None,
                    }
                }
                _ => None,
            };
            (true, miscased, result_type, round)
        }
        _ => (false, false, None, None),
    };
    Ok(Body {
        unexpected: m.keys().find(|k| !ENVELOPE.contains(&k.as_str())).cloned(),
        jsonrpc: member(m, "jsonrpc")?,
        id: member(m, "id")?,
        has_result: m.contains_key("result"),
        has_error: m.contains_key("error"),
        result_object,
        miscased,
        result_type,
        round,
        error_code,
    })
}

/// The JSON-RPC code of 2025-11-25's `URLElicitationRequiredError`.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// What a response from the bound server means, or why it is refused.
fn judge(binding: &Binding, body: &Body, schemas: &mut SchemaCache) -> Result<Judged, Refusal> {
    let end = |e| Refusal::End(GateError::from(e));
    if body.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(end(PeerMisbehaved::ServerSentMalformedResponse(
            "`jsonrpc` must be \"2.0\"".into(),
        )));
    }
    if let Some(k) = &body.unexpected {
        return Err(end(PeerMisbehaved::ServerSentMalformedResponse(format!(
            "the response carries the unexpected member `{}`",
            quoted(k)
        ))));
    }
    match (body.has_result, body.has_error) {
        (false, true) => {
            let code = body
                .error_code
                .as_ref()
                .and_then(Value::as_i64)
                .ok_or_else(|| {
                    end(PeerMisbehaved::ServerSentMalformedResponse(
                        "`error.code` must be an integer".into(),
                    ))
                })?;
            // A 2025-11-25 URL elicitation carried in an error asks the user for input
            // outside every round: no schema, no consent view, no single use. Whatever the
            // host does with errors, the URL must not reach it as the call's answer.
            if code == URL_ELICITATION_REQUIRED {
                return Err(end(PeerMisbehaved::ServerAnsweredUnboundWithInputRequired));
            }
            Ok(Judged::Error(code))
        }
        (true, false) if body.result_object => {
            if body.miscased {
                return Err(end(PeerMisbehaved::ServerSentInvalidResultType));
            }
            match &body.result_type {
                None => Ok(Judged::Complete),
                Some(Value::String(t)) if t == "complete" => Ok(Judged::Complete),
                Some(Value::String(t)) if t == "input_required" => {
                    if binding.open.is_some() {
                        // A second answer on the same id: the open round stays as it was.
                        return Err(Refusal::Ignore(GateError::from(
                            PeerMisbehaved::ServerSentDuplicateRound,
                        )));
                    }
                    if binding.rounds >= binding.fixed.policy.max_rounds {
                        return Err(end(PeerMisbehaved::ServerExceededRoundLimit));
                    }
                    let Some(result) = &body.round else {
                        return Err(end(PeerMisbehaved::ServerSentInvalidResultType));
                    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> (Body, Body) {
        let strict = match json::parse_strict(text, limits::RESPONSE) {
            Ok(Value::Object(m)) => strict_body(m),
            other => panic!("{text}: {other:?}"),
        };
        let members = json::parse_members(text, limits::MAX_MESSAGE_BYTES).unwrap();
        (strict, envelope_body(&members).unwrap())
    }

    /// The one-pass read and the envelope read see the same message wherever both read it.
    #[test]
    fn the_strict_and_the_envelope_read_agree() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"resultType":"input_required","requestState":"s"}}"#,
            r#"{"jsonrpc":"1.0","id":1.5,"result":{"ResultType":"x"},"extra":1}"#,
            r#"{"id":1,"error":{"code":-32000,"message":"m"}}"#,
            r#"{"id":1,"error":5,"result":[1]}"#,
            r#"{"jsonrpc":"2.0","id":9007199254740993,"result":{"resultType":7,"requeststate":"s"}}"#,
            "{}",
        ] {
            let (a, b) = both(text);
            assert_eq!(a.unexpected, b.unexpected, "{text}");
            assert_eq!(a.jsonrpc, b.jsonrpc, "{text}");
            assert_eq!(a.id, b.id, "{text}");
            assert_eq!(
                (a.has_result, a.has_error),
                (b.has_result, b.has_error),
                "{text}"
            );
            assert_eq!(
                (a.result_object, a.miscased),
                (b.result_object, b.miscased),
                "{text}"
            );
            assert_eq!(a.result_type, b.result_type, "{text}");
            assert_eq!(a.round, b.round, "{text}");
            assert_eq!(a.error_code, b.error_code, "{text}");
        }
    }
}
