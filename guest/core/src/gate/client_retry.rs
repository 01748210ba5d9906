//! `retry-from-client`: a relay's client sent its own retry of a round (a new id, the
//! request's params again with `inputResponses` and `requestState`). The gate holds it to the
//! binding: the same method, the registered params but `_meta` (canonically equal), and the
//! round's own state (absent exactly when the round sent none); then it is the `build-retry`
//! path ([`super::retry`]) with the client's answers, and the retry goes out as the gate
//! writes it (the registered params, the original `_meta`), never as the client sent it.

use super::api::ClientRetry;
use super::record::{Binding, OpenRound};
use super::retry::{Answers, Claim};
use super::{Gate, Retry};
use crate::audit::Field;
use crate::canonical::{self, CanonicalObject};
use crate::digest;
use crate::error::{CallerMisuse, Denial, GateError};
use crate::host::Host;
use crate::json::{self, JsonError};
use crate::policy::limits;
use serde_json::{Map, Value};

/// The members of a client's params that are not the request's own: the envelope `_meta`
/// (a client re-attaches its own each time) and the two MRTR fields.
const NOT_THE_REQUEST: [&str; 3] = ["_meta", "inputResponses", "requestState"];

impl<H: Host> Gate<H> {
    pub(super) fn retry_client(&mut self, r: ClientRetry) -> Result<Retry, Denial> {
        let Some(request_id) = &r.request_id else {
            // The host found no open round: edited or stale state, changed arguments, a
            // replay, a used round. The trail records who tried, against which server.
            let event = self
                .unbound_event(None, &r.server, &r.user, &r.tenant)
                .set(Field::RetryId, r.retry_id.to_json());
            return Err(self.deny(GateError::from(CallerMisuse::InactiveRound), event));
        };
        let claim = Claim {
            server: &r.server,
            request_id,
            retry_id: &r.retry_id,
            user: &r.user,
            tenant: &r.tenant,
        };
        let answers = Answers::Client {
            method: &r.method,
            params_json: &r.params_json,
        };
        self.retry_claimed(&claim, answers)
    }
}

/// A client's retry params, parsed once: the request's own members and the two MRTR fields.
pub(super) struct ClientParams {
    /// Every member but [`NOT_THE_REQUEST`].
    request: Map<String, Value>,
    state: Option<String>,
    /// `inputResponses`; absent is `{}` (a state-only retry may omit it).
    responses: Map<String, Value>,
}

impl ClientParams {
    /// Strict JSON under [`limits::CLIENT_RETRY`]: an object, no key twice at any depth,
    /// `requestState` a string and `inputResponses` an object when present.
    pub(super) fn parse(text: &str) -> Result<Self, GateError> {
        let invalid = |why: String| GateError::from(CallerMisuse::InvalidParams(why));
        let value = json::parse_strict(text, limits::CLIENT_RETRY).map_err(|e| {
            invalid(match e {
                JsonError::Syntax(w) | JsonError::Limit(w) => w,
                JsonError::DuplicateKey(k) => format!("the key `{k}` appears twice"),
            })
        })?;
        let Value::Object(mut request) = value else {
            return Err(invalid("params must be an object".into()));
        };
        let state = match request.remove("requestState") {
            None => None,
            Some(Value::String(state)) => Some(state),
            Some(_) => return Err(invalid("`requestState` must be a string".into())),
        };
        let responses = match request.remove("inputResponses") {
            None => Map::new(),
            Some(Value::Object(responses)) => responses,
            Some(_) => {
                return Err(GateError::from(CallerMisuse::InvalidInputResponse(
                    "`inputResponses` must be an object".into(),
                )));
            }
        };
        request.remove("_meta");
        Ok(Self {
            request,
            state,
            responses,
        })
    }

    /// The answers, when this is the round's request again: the binding's method, its
    /// registered params (`registered`, parsed from the binding) but `_meta`, and the round's
    /// state. Anything else is another request (or another round's, or an edited state).
    pub(super) fn matched(
        self,
        method: &str,
        binding: &Binding,
        open: &OpenRound,
        registered: &CanonicalObject<'_>,
    ) -> Result<Map<String, Value>, GateError> {
        let same_state = match (&self.state, &open.state) {
            (Some(sent), Some(held)) => digest::bytes_equal(sent.as_bytes(), held.as_bytes()),
            (None, None) => true,
            _ => false,
        };
        if method != binding.fixed.method || !same_state || !same_request(&self.request, registered)
        {
            return Err(GateError::from(CallerMisuse::IdentityOrArgumentMismatch));
        }
        Ok(self.responses)
    }
}

/// True when `request` (no `_meta`, no MRTR field) is `registered` but its `_meta`, member for
/// member in canonical text: the registered params are canonical, so equal values are equal
/// text.
fn same_request(request: &Map<String, Value>, registered: &CanonicalObject<'_>) -> bool {
    let mut compared = 0usize;
    let mut text = String::new();
    for (key, held) in registered.members() {
        if NOT_THE_REQUEST.contains(&key) {
            // Registration refuses the MRTR fields: only `_meta` can be here.
            continue;
        }
        let Some(sent) = request.get(key) else {
            return false;
        };
        text.clear();
        canonical::write_value(&mut text, sent);
        if text != held {
            return false;
        }
        compared = compared.saturating_add(1);
    }
    compared == request.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn registered(params: &Value) -> String {
        canonical::to_canonical(params)
    }

    fn request_of(params: Value) -> Map<String, Value> {
        ClientParams::parse(&params.to_string()).unwrap().request
    }

    #[test]
    fn the_request_is_compared_without_meta_and_mrtr_fields_whatever_the_order_and_spacing() {
        let held = registered(&json!({"name": "t", "arguments": {"b": [1, 2.5], "a": "x"},
            "_meta": {"progressToken": 1}}));
        let held = CanonicalObject::parse(&held).unwrap();
        let sent = ClientParams::parse(
            r#"{ "requestState": "s", "arguments": {"a": "x", "b": [1, 2.50]},
                 "_meta": {"other": true}, "inputResponses": {}, "name": "t" }"#,
        )
        .unwrap();
        assert!(same_request(&sent.request, &held));
        assert_eq!(sent.state.as_deref(), Some("s"));
        assert!(sent.responses.is_empty());
        for changed in [
            json!({"name": "t", "arguments": {"a": "x", "b": [1, 2.5], "c": null}}),
            json!({"name": "t", "arguments": {"a": "y", "b": [1, 2.5]}}),
            json!({"name": "u", "arguments": {"a": "x", "b": [1, 2.5]}}),
            json!({"name": "t"}),
            json!({"name": "t", "arguments": {"a": "x", "b": [1, 2.5]}, "task": {}}),
        ] {
            assert!(
                !same_request(&request_of(changed.clone()), &held),
                "{changed}"
            );
        }
    }

    #[test]
    fn hostile_params_are_refused_with_the_callers_codes() {
        let code = |text: &str| ClientParams::parse(text).err().map(|e| e.code());
        assert_eq!(
            code(r#"{"name": "t", "name": "u"}"#),
            Some("invalid_params")
        );
        assert_eq!(
            code(
                r#"{"name": "t", "inputResponses": {"a": {"action": "cancel", "action": "accept"}}}"#
            ),
            Some("invalid_params")
        );
        assert_eq!(code("[]"), Some("invalid_params"));
        assert_eq!(code("{"), Some("invalid_params"));
        assert_eq!(code(""), Some("invalid_params"));
        assert_eq!(code(r#"{"requestState": 1}"#), Some("invalid_params"));
        assert_eq!(code(r#"{"requestState": null}"#), Some("invalid_params"));
        assert_eq!(
            code(r#"{"inputResponses": []}"#),
            Some("invalid_input_response")
        );
        assert_eq!(
            code(r#"{"inputResponses": null}"#),
            Some("invalid_input_response")
        );
        let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
        assert_eq!(
            code(&format!(r#"{{"arguments": {deep}}}"#)),
            Some("invalid_params")
        );
        let long = format!(
            r#"{{"requestState": "{}"}}"#,
            "a".repeat(limits::CLIENT_RETRY.max_bytes)
        );
        assert_eq!(code(&long), Some("invalid_params"));
    }
}
