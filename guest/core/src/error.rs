//! Every denial the gate can give, split by who is to blame (rustls style):
//! the server ([`PeerMisbehaved`]), the caller ([`CallerMisuse`]) or the host ([`HostFault`]).
//! Each variant maps to exactly one stable snake_case code; the seed's codes are kept verbatim.

use std::fmt;

/// Who is to blame for a denial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCause {
    /// The server sent something the protocol or the policy forbids.
    Peer,
    /// The caller misused the API, or the user's answers do not fit the request.
    Caller,
    /// A host import failed or misbehaved.
    Host,
}

impl ErrorCause {
    /// The stable name used on the wire and in the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Peer => "peer",
            Self::Caller => "caller",
            Self::Host => "host",
        }
    }
}

/// What the server did wrong. Names are past tense: they say what the peer sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMisbehaved {
    /// A response whose id matches no live binding (unsolicited, stale, replayed or expired).
    ServerSentUnsolicitedResponse,
    /// A response for a binding that another server owns.
    ServerIdentityChanged,
    /// The response was not valid JSON, or not a JSON-RPC 2.0 response.
    ServerSentMalformedResponse(String),
    /// The same key appeared twice in one JSON object.
    ServerSentDuplicateJsonKey(String),
    /// Nesting, size or count bounds were exceeded.
    ServerExceededLimit(String),
    /// `resultType` was not a recognised value, or not a string.
    ServerSentInvalidResultType,
    /// `input_required` with neither `inputRequests` nor `requestState` (or both empty).
    ServerSentEmptyInputRequired,
    /// `requestState` was empty, not a string, or over the policy's byte limit.
    ServerSentInvalidState,
    /// An input key, or an input request's shape, was invalid.
    ServerSentInvalidInputRequest(String),
    /// A form `requestedSchema` outside the MCP primitive subset (or with `$ref`).
    ServerSentInvalidSchema(String),
    /// A URL elicitation whose URL is not safe to show.
    ServerSentUnsafeUrl(String),
    /// An elicitation `mode` other than `form` or `url`.
    ServerSentUnknownElicitationMode,
    /// A request method other than elicitation that this binding's policy does not allow.
    ServerSentUnapprovedDeprecatedRequest,
    /// An input request for a capability the request did not declare.
    ServerSentUndeclaredCapability(String),
    /// More `input_required` rounds than the policy allows.
    ServerExceededRoundLimit,
    /// A second `input_required` result for a round that is still open.
    ServerSentDuplicateRound,
}

/// What the caller (or the user's answers) got wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallerMisuse {
    /// The JSON-RPC id is neither an integer nor a 1..=256 byte string.
    InvalidRequestId,
    /// A required binding field was missing or empty.
    BindingFieldMissing(&'static str),
    /// The round-trip lifetime is zero or too large.
    InvalidLifetime,
    /// The requestState byte limit is zero or over the hard cap.
    InvalidStatePolicy,
    /// Another policy field was out of range.
    InvalidPolicy(String),
    /// The user or tenant is over 512 bytes or holds control characters.
    InvalidPrincipal(&'static str),
    /// The method may not receive `input_required`.
    UnsupportedMethod(String),
    /// The params were not a JSON object, or exceeded bounds.
    InvalidParams(String),
    /// The params already carried `inputResponses` or `requestState`.
    ParamsCarriedMrtrFields,
    /// The server identity could not be normalised.
    InvalidServerIdentity(String),
    /// A binding for this id is already live.
    RequestIdInUse,
    /// No open round for this id (never received, already used, or expired).
    InactiveRound,
    /// The retry id equals the original, an id this binding used, or any live id.
    RetryIdNotNew,
    /// The retry's user or tenant differs from the binding's, or the params changed.
    IdentityOrArgumentMismatch,
    /// The responses do not cover exactly the round's keys.
    ResponsePopulationMismatch,
    /// A response was not an object with a valid action (or result shape).
    InvalidInputResponse(String),
    /// `content` with a non-accept action.
    NonAcceptResponseHadContent,
    /// The accepted content does not match the requested schema.
    ResponseSchemaMismatch(String),
    /// `content` in a URL-mode response.
    UrlResponseHadContent,
    /// The user refused consent.
    ConsentRefused,
    /// The receipt names another view or other answers.
    ConsentMismatch,
    /// No binding for this id (finish on an unknown id).
    UnknownRequest,
}

/// What the host did wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostFault {
    /// The storage import failed.
    StorageFailed(String),
    /// Storage returned a record the gate did not write (corrupt or foreign).
    StorageCorrupted,
    /// A compare-and-swap lost: another instance used this round (or changed the binding) first.
    StateAlreadyUsed,
    /// The consent import failed, or returned a malformed receipt.
    ConsentUnavailable(String),
    /// Appending the audit event failed.
    AuditWriteFailed(String),
    /// The audit event read back differs from what was written, or is missing.
    AuditReadbackMismatch,
    /// The sink's head kept moving (contention or a sink that ignores the chain).
    AuditContention,
}

/// A denial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateError {
    /// The server misbehaved.
    Peer(PeerMisbehaved),
    /// The caller misused the API.
    Caller(CallerMisuse),
    /// The host failed.
    Host(HostFault),
}

impl GateError {
    /// Who is to blame.
    pub fn cause(&self) -> ErrorCause {
        match self {
            Self::Peer(_) => ErrorCause::Peer,
            Self::Caller(_) => ErrorCause::Caller,
            Self::Host(_) => ErrorCause::Host,
        }
    }

    /// The stable wire/audit code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Peer(e) => match e {
                PeerMisbehaved::ServerSentUnsolicitedResponse => "no_live_request",
                PeerMisbehaved::ServerIdentityChanged => "server_origin_mismatch",
                PeerMisbehaved::ServerSentMalformedResponse(_) => "malformed_response",
                PeerMisbehaved::ServerSentDuplicateJsonKey(_) => "duplicate_json_key",
                PeerMisbehaved::ServerExceededLimit(_) => "limit_exceeded",
                PeerMisbehaved::ServerSentInvalidResultType => "invalid_result_type",
                PeerMisbehaved::ServerSentEmptyInputRequired => "input_required_payload_empty",
                PeerMisbehaved::ServerSentInvalidState => "invalid_requestState",
                PeerMisbehaved::ServerSentInvalidInputRequest(_) => "invalid_named_input_request",
                PeerMisbehaved::ServerSentInvalidSchema(_) => "invalid_form_requestedSchema",
                PeerMisbehaved::ServerSentUnsafeUrl(_) => "unsafe_url_elicitation",
                PeerMisbehaved::ServerSentUnknownElicitationMode => "unknown_elicitation_mode",
                PeerMisbehaved::ServerSentUnapprovedDeprecatedRequest => {
                    "unapproved_deprecated_client_request"
                }
                PeerMisbehaved::ServerSentUndeclaredCapability(_) => "undeclared_capability",
                PeerMisbehaved::ServerExceededRoundLimit => "round_limit_exceeded",
                PeerMisbehaved::ServerSentDuplicateRound => "duplicate_round",
            },
            Self::Caller(e) => match e {
                CallerMisuse::InvalidRequestId => "invalid_jsonrpc_request_id",
                CallerMisuse::BindingFieldMissing(_) => "active_request_binding_missing",
                CallerMisuse::InvalidLifetime => "invalid_mrtr_lifetime",
                CallerMisuse::InvalidStatePolicy => "invalid_requestState_policy",
                CallerMisuse::InvalidPolicy(_) => "invalid_policy",
                CallerMisuse::InvalidPrincipal(_) => "invalid_principal",
                CallerMisuse::UnsupportedMethod(_) => "unsupported_method",
                CallerMisuse::InvalidParams(_) => "invalid_params",
                CallerMisuse::ParamsCarriedMrtrFields => "params_carry_mrtr_fields",
                CallerMisuse::InvalidServerIdentity(_) => "invalid_server_identity",
                CallerMisuse::RequestIdInUse => "request_id_in_use",
                CallerMisuse::InactiveRound => "inactive_mrtr_round",
                CallerMisuse::RetryIdNotNew => "retry_requires_new_jsonrpc_id",
                CallerMisuse::IdentityOrArgumentMismatch => "mrtr_identity_or_argument_mismatch",
                CallerMisuse::ResponsePopulationMismatch => "input_response_population_mismatch",
                CallerMisuse::InvalidInputResponse(_) => "invalid_input_response",
                CallerMisuse::NonAcceptResponseHadContent => {
                    "non_accept_response_must_not_have_content"
                }
                CallerMisuse::ResponseSchemaMismatch(_) => "input_response_schema_mismatch",
                CallerMisuse::UrlResponseHadContent => {
                    "url_elicitation_response_must_not_have_content"
                }
                CallerMisuse::ConsentRefused => "consent_refused",
                CallerMisuse::ConsentMismatch => "consent_mismatch",
                CallerMisuse::UnknownRequest => "unknown_request",
            },
            Self::Host(e) => match e {
                HostFault::StorageFailed(_) => "storage_failed",
                HostFault::StorageCorrupted => "storage_corrupted",
                HostFault::StateAlreadyUsed => "state_already_used",
                HostFault::ConsentUnavailable(_) => "consent_unavailable",
                HostFault::AuditWriteFailed(_) => "audit_write_failed",
                HostFault::AuditReadbackMismatch => "audit_readback_mismatch",
                HostFault::AuditContention => "audit_contention",
            },
        }
    }
}

/// Every code the gate can return, for documentation and for the test that keeps them unique.
pub const ALL_CODES: &[&str] = &[
    "no_live_request",
    "server_origin_mismatch",
    "malformed_response",
    "duplicate_json_key",
    "limit_exceeded",
    "invalid_result_type",
    "input_required_payload_empty",
    "invalid_requestState",
    "invalid_named_input_request",
    "invalid_form_requestedSchema",
    "unsafe_url_elicitation",
    "unknown_elicitation_mode",
    "unapproved_deprecated_client_request",
    "undeclared_capability",
    "round_limit_exceeded",
    "duplicate_round",
    "invalid_jsonrpc_request_id",
    "active_request_binding_missing",
    "invalid_mrtr_lifetime",
    "invalid_requestState_policy",
    "invalid_policy",
    "invalid_principal",
    "unsupported_method",
    "invalid_params",
    "params_carry_mrtr_fields",
    "invalid_server_identity",
    "request_id_in_use",
    "inactive_mrtr_round",
    "retry_requires_new_jsonrpc_id",
    "mrtr_identity_or_argument_mismatch",
    "input_response_population_mismatch",
    "invalid_input_response",
    "non_accept_response_must_not_have_content",
    "input_response_schema_mismatch",
    "url_elicitation_response_must_not_have_content",
    "consent_refused",
    "consent_mismatch",
    "unknown_request",
    "storage_failed",
    "storage_corrupted",
    "state_already_used",
    "consent_unavailable",
    "audit_write_failed",
    "audit_readback_mismatch",
    "audit_contention",
];

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Peer(e) => match e {
                PeerMisbehaved::ServerSentUnsolicitedResponse => {
                    f.write_str("the server sent a response for no live request")
                }
                PeerMisbehaved::ServerIdentityChanged => {
                    f.write_str("the response came from another server than the request went to")
                }
                PeerMisbehaved::ServerSentMalformedResponse(why) => {
                    write!(f, "the server sent a malformed response: {why}")
                }
                PeerMisbehaved::ServerSentDuplicateJsonKey(key) => {
                    write!(f, "the server sent the key `{key}` twice in one object")
                }
                PeerMisbehaved::ServerExceededLimit(what) => {
                    write!(f, "the server exceeded a limit: {what}")
                }
                PeerMisbehaved::ServerSentInvalidResultType => {
                    f.write_str("the server sent an unrecognised `resultType`")
                }
                PeerMisbehaved::ServerSentEmptyInputRequired => f.write_str(
                    "the server sent `input_required` with neither `inputRequests` nor `requestState`",
                ),
                PeerMisbehaved::ServerSentInvalidState => f.write_str(
                    "the server sent a `requestState` that is empty, not a string or too large",
                ),
                PeerMisbehaved::ServerSentInvalidInputRequest(why) => {
                    write!(f, "the server sent an invalid input request: {why}")
                }
                PeerMisbehaved::ServerSentInvalidSchema(why) => {
                    write!(f, "the server sent an invalid `requestedSchema`: {why}")
                }
                PeerMisbehaved::ServerSentUnsafeUrl(why) => {
                    write!(f, "the server sent an unsafe elicitation url: {why}")
                }
                PeerMisbehaved::ServerSentUnknownElicitationMode => {
                    f.write_str("the server sent an unknown elicitation `mode`")
                }
                PeerMisbehaved::ServerSentUnapprovedDeprecatedRequest => f.write_str(
                    "the server sent a request method this binding's policy does not allow",
                ),
                PeerMisbehaved::ServerSentUndeclaredCapability(cap) => write!(
                    f,
                    "the server asked for the capability `{cap}` that the request did not declare"
                ),
                PeerMisbehaved::ServerExceededRoundLimit => {
                    f.write_str("the server asked for more rounds than the policy allows")
                }
                PeerMisbehaved::ServerSentDuplicateRound => {
                    f.write_str("the server sent a second round while one is still open")
                }
            },
            Self::Caller(e) => match e {
                CallerMisuse::InvalidRequestId => {
                    f.write_str(
                        "the json-rpc id must be an integer within ±(2^53 - 1) or a 1 to 256 byte string",
                    )
                }
                CallerMisuse::BindingFieldMissing(field) => {
                    write!(f, "the binding field `{field}` is missing or empty")
                }
                CallerMisuse::InvalidLifetime => {
                    f.write_str("the round-trip lifetime must be between 1 ms and 24 h")
                }
                CallerMisuse::InvalidStatePolicy => {
                    f.write_str("the requestState byte limit must be between 1 and 1 MiB")
                }
                CallerMisuse::InvalidPolicy(why) => write!(f, "invalid policy: {why}"),
                CallerMisuse::InvalidPrincipal(field) => write!(
                    f,
                    "`{field}` must be at most 512 bytes without control characters"
                ),
                CallerMisuse::UnsupportedMethod(m) => {
                    write!(f, "the method `{m}` cannot receive `input_required`")
                }
                CallerMisuse::InvalidParams(why) => write!(f, "invalid params: {why}"),
                CallerMisuse::ParamsCarriedMrtrFields => f.write_str(
                    "the params already carry `inputResponses` or `requestState`",
                ),
                CallerMisuse::InvalidServerIdentity(why) => {
                    write!(f, "invalid server identity: {why}")
                }
                CallerMisuse::RequestIdInUse => f.write_str("a binding for this id is already live"),
                CallerMisuse::InactiveRound => f.write_str("no open round for this id"),
                CallerMisuse::RetryIdNotNew => {
                    f.write_str("the retry needs a json-rpc id that is new and not live")
                }
                CallerMisuse::IdentityOrArgumentMismatch => {
                    f.write_str("the retry's user, tenant or arguments differ from the binding's")
                }
                CallerMisuse::ResponsePopulationMismatch => {
                    f.write_str("the responses do not cover exactly the round's keys")
                }
                CallerMisuse::InvalidInputResponse(why) => {
                    write!(f, "invalid input response: {why}")
                }
                CallerMisuse::NonAcceptResponseHadContent => {
                    f.write_str("a decline or cancel response must not carry `content`")
                }
                CallerMisuse::ResponseSchemaMismatch(key) => {
                    write!(f, "the content for `{key}` does not match its requested schema")
                }
                CallerMisuse::UrlResponseHadContent => {
                    f.write_str("a url elicitation response must not carry `content`")
                }
                CallerMisuse::ConsentRefused => f.write_str("the user refused consent"),
                CallerMisuse::ConsentMismatch => f.write_str(
                    "the consent receipt names another view or other answers than this retry's",
                ),
                CallerMisuse::UnknownRequest => f.write_str("no binding for this id"),
            },
            Self::Host(e) => match e {
                HostFault::StorageFailed(why) => write!(f, "storage failed: {why}"),
                HostFault::StorageCorrupted => {
                    f.write_str("storage returned a record the gate did not write")
                }
                HostFault::StateAlreadyUsed => {
                    f.write_str("this round was already used or changed by another instance")
                }
                HostFault::ConsentUnavailable(why) => write!(f, "consent failed: {why}"),
                HostFault::AuditWriteFailed(why) => write!(f, "audit append failed: {why}"),
                HostFault::AuditReadbackMismatch => {
                    f.write_str("the audit event read back differs from what was written")
                }
                HostFault::AuditContention => {
                    f.write_str("the audit sink's head kept moving; the event was not written")
                }
            },
        }
    }
}

impl std::error::Error for GateError {}

/// A denial as the gate returns it: the error, and whether the denial itself reached the audit sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// Why the call was denied.
    pub error: GateError,
    /// True when a `rejected` event for this denial was written and read back.
    pub audited: bool,
}

impl Denial {
    /// A denial that was not (or not yet) audited.
    pub fn unaudited(error: GateError) -> Self {
        Self {
            error,
            audited: false,
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.error, self.error.code())
    }
}

impl std::error::Error for Denial {}

impl From<GateError> for Denial {
    fn from(error: GateError) -> Self {
        Self::unaudited(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn codes_are_unique_and_snake_case() {
        let set: BTreeSet<_> = ALL_CODES.iter().collect();
        assert_eq!(set.len(), ALL_CODES.len());
        for code in ALL_CODES {
            // The seed's two camelCase codes are kept verbatim.
            let allowed =
                |c: char| c.is_ascii_lowercase() || c == '_' || "requestState".contains(c);
            assert!(code.chars().all(allowed), "{code}");
        }
    }
}
