//! Every denial the gate can give, split by who is to blame (rustls style): the server
//! ([`PeerMisbehaved`]), the caller ([`CallerMisuse`]) or the host ([`HostFault`]).
//!
//! Each error is declared once, in [`gate_errors!`]: its variant, its stable snake_case code
//! and its message come from the same line, and [`ALL_CODES`] is derived from the
//! declaration, so a code cannot be added, renamed or dropped in one place only.
//! `docs/errors.md` documents every code; a test holds the two together.
//!
//! Two causes are decided, not obvious:
//! - a user's refusal (`consent_refused`) is `caller`: the host application speaks for the
//!   user, and a refusal is that side declining. Neither the server nor a host service
//!   failed, and nothing is to be alerted on.
//! - a lost compare-and-swap (`state_already_used`) is `host`: the gate sees it only through
//!   the storage import, and cannot tell a real race (another instance consumed the round
//!   first) from a store that reports conflicts it should not. A replay that this instance
//!   can see for itself is `inactive_mrtr_round`, a `caller` code.

use crate::ids::MAX_STRING_ID_BYTES;
use crate::policy::limits::MAX_PRINCIPAL_BYTES;
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

/// Declares the three error enums. Each line gives a variant (with its payload, named so the
/// message can use it), its code and its message; the macro writes the enums, `code()`,
/// `Display` and [`ALL_CODES`] from that one declaration.
macro_rules! gate_errors {
    ($(
        $(#[$enum_doc:meta])*
        $cause:ident $enum:ident {
            $(
                $(#[$doc:meta])*
                $variant:ident $(($field:ident: $ty:ty))? => $code:literal, $message:literal;
            )*
        }
    )*) => {
        $(
            $(#[$enum_doc])*
            #[derive(Clone, Debug, PartialEq, Eq)]
            pub enum $enum {
                $(
                    $(#[$doc])*
                    $variant $(($ty))?,
                )*
            }

            impl $enum {
                /// The stable wire and audit code.
                pub fn code(&self) -> &'static str {
                    match self {
                        $(Self::$variant { .. } => $code,)*
                    }
                }

                /// Who is to blame.
                pub fn cause(&self) -> ErrorCause {
                    ErrorCause::$cause
                }
            }

            impl fmt::Display for $enum {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    match self {
                        $(Self::$variant $(($field))? => write!(f, $message),)*
                    }
                }
            }
        )*

        /// Every code the gate can return, without its payload: what a host gets back from
        /// a code that crossed the component boundary as text ([`ErrorCode::from_code`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(
                $(#[$doc])*
                $variant,
            )*)*
        }

        impl ErrorCode {
            /// The stable wire and audit code.
            pub fn code(self) -> &'static str {
                match self {
                    $($(Self::$variant => $code,)*)*
                }
            }

            /// Who is to blame.
            pub fn cause(self) -> ErrorCause {
                match self {
                    $($(Self::$variant => ErrorCause::$cause,)*)*
                }
            }

            /// The code named `code` (`None`: no code of this gate).
            pub fn from_code(code: &str) -> Option<Self> {
                match code {
                    $($($code => Some(Self::$variant),)*)*
                    _ => None,
                }
            }
        }

        $(
            impl $enum {
                /// The code without its payload.
                pub fn error_code(&self) -> ErrorCode {
                    match self {
                        $(Self::$variant { .. } => ErrorCode::$variant,)*
                    }
                }
            }
        )*

        /// Every code the gate can return, with its cause, in declaration order.
        pub const ALL_ERRORS: &[(&str, ErrorCause)] = &[$($(($code, ErrorCause::$cause),)*)*];

        /// Every code the gate can return, in declaration order.
        pub const ALL_CODES: &[&str] = &[$($($code,)*)*];
    };
}

gate_errors! {
    /// What the server did wrong. Names are past tense: they say what the peer sent.
    Peer PeerMisbehaved {
        /// A response whose id matches no live binding (unsolicited, stale, replayed or expired).
        ServerSentUnsolicitedResponse => "no_live_request",
            "the server sent a response for no live request";
        /// The response was not valid JSON, or not a JSON-RPC 2.0 response.
        ServerSentMalformedResponse(why: String) => "malformed_response",
            "the server sent a malformed response: {why}";
        /// The same key appeared twice in one JSON object.
        ServerSentDuplicateJsonKey(key: String) => "duplicate_json_key",
            "the server sent the key `{key}` twice in one object";
        /// Nesting, size or count bounds were exceeded.
        ServerExceededLimit(what: String) => "limit_exceeded",
            "the server exceeded a limit: {what}";
        /// `resultType` was not a recognised value, or not a string.
        ServerSentInvalidResultType => "invalid_result_type",
            "the server sent an unrecognised `resultType`";
        /// `input_required` with neither `inputRequests` nor `requestState` (or both empty).
        ServerSentEmptyInputRequired => "input_required_payload_empty",
            "the server sent `input_required` with neither `inputRequests` nor `requestState`";
        /// `requestState` was empty, not a string, or over the policy's byte limit.
        ServerSentInvalidState => "invalid_requestState",
            "the server sent a `requestState` that is empty, not a string or too large";
        /// An input key, or an input request's shape, was invalid.
        ServerSentInvalidInputRequest(why: String) => "invalid_named_input_request",
            "the server sent an invalid input request: {why}";
        /// A form `requestedSchema` outside the MCP primitive subset (or with `$ref`).
        ServerSentInvalidSchema(why: String) => "invalid_form_requestedSchema",
            "the server sent an invalid `requestedSchema`: {why}";
        /// A URL elicitation whose URL is not safe to show.
        ServerSentUnsafeUrl(why: String) => "unsafe_url_elicitation",
            "the server sent an unsafe elicitation url: {why}";
        /// An elicitation `mode` other than `form` or `url`.
        ServerSentUnknownElicitationMode => "unknown_elicitation_mode",
            "the server sent an unknown elicitation `mode`";
        /// A request method other than elicitation that this binding's policy does not allow.
        ServerSentUnapprovedDeprecatedRequest => "unapproved_deprecated_client_request",
            "the server sent a request method this binding's policy does not allow";
        /// An input request for a capability the request did not declare.
        ServerSentUndeclaredCapability(capability: String) => "undeclared_capability",
            "the server asked for the capability `{capability}` that the request did not declare";
        /// More `input_required` rounds than the policy allows.
        ServerExceededRoundLimit => "round_limit_exceeded",
            "the server asked for more rounds than the policy allows";
        /// A second `input_required` result for a round that is still open.
        ServerSentDuplicateRound => "duplicate_round",
            "the server sent a second round while one is still open";
        /// A server-to-client request outside any round (`elicitation/create`,
        /// `sampling/createMessage`, `roots/list` sent as requests, as 2025-era servers do),
        /// refused by a relay and audited (`refuse-unbound`).
        ServerSentLegacyRequest(method: String) => "legacy_server_request",
            "the server sent the request `{method}` outside a round (a 2025-era server-to-client request)";
        /// An answer that asks for input outside a round: `input_required` or `inputRequests`
        /// in the result of a request the gate does not bind (only a bound `tools/call`,
        /// `prompts/get` or `resources/read` may ask, in a round), refused by a relay and
        /// audited (`refuse-unbound`); or a `-32042` URL elicitation error to any request, the
        /// gate's own refusal for a bound one (`accept-response`, the binding ended).
        ServerAnsweredUnboundWithInputRequired => "input_required_not_allowed",
            "the server asked for input outside a round (in its answer to a request the gate does not bind, or in a -32042 URL elicitation error)";
        /// A notification carrying `inputRequests` (a task's status): no round binds it.
        /// Refused by a relay and audited (`refuse-unbound`).
        ServerNotifiedInputRequests => "input_requests_not_bound",
            "the server sent `inputRequests` in a notification, outside any round";
    }

    /// What the caller (or the user's answers) got wrong.
    Caller CallerMisuse {
        /// The JSON-RPC id is neither an integer within ±(2^53 − 1) nor a 1 to 256 byte string.
        InvalidRequestId => "invalid_jsonrpc_request_id",
            "the json-rpc id must be an integer within ±(2^53 - 1) or a 1 to {MAX_STRING_ID_BYTES} byte string";
        /// A required binding field was missing or empty.
        BindingFieldMissing(field: &'static str) => "active_request_binding_missing",
            "the binding field `{field}` is missing or empty";
        /// The round-trip lifetime is zero or too large.
        InvalidLifetime => "invalid_mrtr_lifetime",
            "the round-trip lifetime must be between 1 ms and 24 h";
        /// The requestState byte limit is zero or over the hard cap.
        InvalidStatePolicy => "invalid_requestState_policy",
            "the requestState byte limit must be between 1 and 1 MiB";
        /// Another policy field was out of range.
        InvalidPolicy(why: String) => "invalid_policy",
            "invalid policy: {why}";
        /// The user or tenant is too long or holds control characters.
        InvalidPrincipal(field: &'static str) => "invalid_principal",
            "`{field}` must be at most {MAX_PRINCIPAL_BYTES} bytes without control characters";
        /// The method may not receive `input_required`.
        UnsupportedMethod(method: String) => "unsupported_method",
            "the method `{method}` cannot receive `input_required`";
        /// The params were not a JSON object, or exceeded bounds.
        InvalidParams(why: String) => "invalid_params",
            "invalid params: {why}";
        /// The params already carried `inputResponses` or `requestState`.
        ParamsCarriedMrtrFields => "params_carry_mrtr_fields",
            "the params already carry `inputResponses` or `requestState`";
        /// The server identity could not be normalised.
        InvalidServerIdentity(why: String) => "invalid_server_identity",
            "invalid server identity: {why}";
        /// A binding for this id is already live.
        RequestIdInUse => "request_id_in_use",
            "a binding for this id is already live";
        /// No open round for this id (never received, already used, or expired).
        InactiveRound => "inactive_mrtr_round",
            "no open round for this id";
        /// The retry id equals the original, an id this binding used, or any live id.
        RetryIdNotNew => "retry_requires_new_jsonrpc_id",
            "the retry needs a json-rpc id that is new and not live";
        /// The retry's user or tenant differs from the binding's, or the params changed.
        IdentityOrArgumentMismatch => "mrtr_identity_or_argument_mismatch",
            "the retry's user, tenant or arguments differ from the binding's";
        /// The responses do not cover exactly the round's keys.
        ResponsePopulationMismatch => "input_response_population_mismatch",
            "the responses do not cover exactly the round's keys";
        /// A response was not an object with a valid action (or result shape).
        InvalidInputResponse(why: String) => "invalid_input_response",
            "invalid input response: {why}";
        /// `content` with a non-accept action.
        NonAcceptResponseHadContent => "non_accept_response_must_not_have_content",
            "a decline or cancel response must not carry `content`";
        /// The accepted content does not match the requested schema.
        ResponseSchemaMismatch(mismatch: Box<crate::schema::SchemaMismatch>) => "input_response_schema_mismatch",
            "{mismatch}";
        /// `content` in a URL-mode response.
        UrlResponseHadContent => "url_elicitation_response_must_not_have_content",
            "a url elicitation response must not carry `content`";
        /// The user refused consent (the host application speaks for the user: see the module docs).
        ConsentRefused => "consent_refused",
            "the user refused consent";
        /// The receipt names another view or other answers.
        ConsentMismatch => "consent_mismatch",
            "the consent receipt names another view or other answers than this retry's";
        /// No binding for this id (finish on an unknown id).
        UnknownRequest => "unknown_request",
            "no binding for this id";
        /// `inputResponses` in a client's message that is no gated request's retry (a task's
        /// `tasks/update`): answers no round asked for. Refused by a relay and audited
        /// (`refuse-unbound`).
        InputResponsesNotBound => "input_responses_not_bound",
            "`inputResponses` outside a gated request's retry are not sent";
    }

    /// What the host did wrong.
    Host HostFault {
        /// The storage import failed.
        StorageFailed(why: String) => "storage_failed",
            "storage failed: {why}";
        /// Storage returned a record the gate did not write (corrupt or foreign).
        StorageCorrupted => "storage_corrupted",
            "storage returned a record the gate did not write";
        /// A compare-and-swap lost: another instance used this round (or changed the binding)
        /// first, or the store reported a conflict (see the module docs for why this is `host`).
        StateAlreadyUsed => "state_already_used",
            "this round was already used or changed by another instance";
        /// The consent import failed, or returned a malformed receipt.
        ConsentUnavailable(why: String) => "consent_unavailable",
            "consent failed: {why}";
        /// Appending the audit event failed.
        AuditWriteFailed(why: String) => "audit_write_failed",
            "audit append failed: {why}";
        /// The audit event read back differs from what was written, or is missing.
        AuditReadbackMismatch => "audit_readback_mismatch",
            "the audit event read back differs from what was written";
        /// The sink's head kept moving (contention or a sink that ignores the chain).
        AuditContention => "audit_contention",
            "the audit sink's head kept moving; the event was not written";
        /// The clock import returned a time beyond 2^53 - 1 ms (a host that wrapped a
        /// negative number into a `u64`, or a broken clock): no expiry can be decided.
        ClockOutOfRange(now: u64) => "clock_out_of_range",
            "the clock returned {now} ms, beyond 2^53 - 1";
        /// The clock reads more than the skew tolerance before the binding's registration:
        /// it jumped back (or this instance's clock lags the registering one's), and the
        /// binding's lifetime, measured on it, cannot be judged.
        ClockBehindBinding(now: u64) => "clock_behind_binding",
            "the clock reads {now} ms, more than 5 s before this binding was registered";
    }
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
            Self::Peer(e) => e.cause(),
            Self::Caller(e) => e.cause(),
            Self::Host(e) => e.cause(),
        }
    }

    /// The stable wire and audit code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Peer(e) => e.code(),
            Self::Caller(e) => e.code(),
            Self::Host(e) => e.code(),
        }
    }

    /// The code without its payload.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::Peer(e) => e.error_code(),
            Self::Caller(e) => e.error_code(),
            Self::Host(e) => e.error_code(),
        }
    }
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Peer(e) => e.fmt(f),
            Self::Caller(e) => e.fmt(f),
            Self::Host(e) => e.fmt(f),
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

// Each side's error is a `GateError`: `GateError::from(PeerMisbehaved::…)` (or `?`) instead of
// a helper per file.
impl From<PeerMisbehaved> for GateError {
    fn from(e: PeerMisbehaved) -> Self {
        Self::Peer(e)
    }
}

impl From<CallerMisuse> for GateError {
    fn from(e: CallerMisuse) -> Self {
        Self::Caller(e)
    }
}

impl From<HostFault> for GateError {
    fn from(e: HostFault) -> Self {
        Self::Host(e)
    }
}

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

    /// Each enum answers its own cause, and `GateError` forwards code, cause and message.
    #[test]
    fn gate_error_forwards_to_its_kind() {
        let e = GateError::Peer(PeerMisbehaved::ServerSentDuplicateJsonKey("k".into()));
        assert_eq!(e.code(), "duplicate_json_key");
        assert_eq!(e.cause(), ErrorCause::Peer);
        assert_eq!(
            e.to_string(),
            "the server sent the key `k` twice in one object"
        );
        let e = GateError::Caller(CallerMisuse::InvalidPrincipal("subject"));
        assert_eq!(
            e.to_string(),
            "`subject` must be at most 512 bytes without control characters"
        );
        assert_eq!(
            GateError::Host(HostFault::StateAlreadyUsed).cause(),
            ErrorCause::Host
        );
    }

    /// A code that crossed the boundary as text comes back as the same typed code, with the
    /// same cause; no other text does.
    #[test]
    fn every_code_turns_back_into_its_typed_code() {
        for (code, cause) in ALL_ERRORS {
            let typed = ErrorCode::from_code(code).unwrap_or_else(|| panic!("{code}"));
            assert_eq!(typed.code(), *code);
            assert_eq!(typed.cause(), *cause);
        }
        assert_eq!(ErrorCode::from_code("guest_trapped"), None);
        assert_eq!(ErrorCode::from_code("Consent_Refused"), None);
        assert_eq!(
            GateError::Caller(CallerMisuse::ConsentRefused).error_code(),
            ErrorCode::ConsentRefused
        );
    }
}
