//! The types of the gate's operations: what a caller passes in and gets back.

use crate::ids::{RequestId, ServerIdentity};
use crate::policy::Policy;

/// A request about to be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// Its JSON-RPC id.
    pub request_id: RequestId,
    /// The verified server (already normalised by [`ServerIdentity::origin`]/[`ServerIdentity::endpoint`]).
    pub server: ServerIdentity,
    /// The user on whose behalf it is sent.
    pub user: String,
    /// The tenant.
    pub tenant: String,
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: String,
    /// The exact params, as JSON text.
    pub params_json: String,
    /// The binding's policy.
    pub policy: Policy,
}

/// A registered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The request text to send.
    pub request_json: String,
    /// Digest of the params.
    pub params_sha256: String,
    /// When the binding expires.
    pub expires_at_ms: u64,
}

/// An accepted `input_required` round (the WIT's `consent-view` record): the consent view
/// to show, with what identifies it. The view's text parses into a
/// [`ConsentView`](crate::ConsentView).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedRound {
    /// What the consent screen must show, canonical JSON.
    pub view_json: String,
    /// Its digest.
    pub view_sha256: String,
    /// 1-based round number.
    pub round: u32,
    /// The round's input keys, sorted.
    pub input_keys: Vec<String>,
    /// Digest of the `requestState`, when present.
    pub request_state_sha256: Option<String>,
}

/// What a response meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseVerdict {
    /// A round to show and answer.
    InputRequired(AcceptedRound),
    /// A complete result: the binding ended.
    Complete,
    /// A JSON-RPC error: the binding ended.
    Error(i64),
}

/// The caller's answers for a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryRequest {
    /// The server the round came from (ids are per server).
    pub server: ServerIdentity,
    /// The id the round arrived on.
    pub request_id: RequestId,
    /// A new id for the retry.
    pub retry_id: RequestId,
    /// Must be the binding's user.
    pub user: String,
    /// Must be the binding's tenant.
    pub tenant: String,
    /// The `inputResponses` object, JSON text.
    pub responses_json: String,
}

/// A client's own retry of a round (a relay's client sent it, the relay found the round):
/// the gate checks it is the round's request again, then builds the retry as
/// [`RetryRequest`] does, with the client's `inputResponses`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRetry {
    /// The server the round came from (ids are per server).
    pub server: ServerIdentity,
    /// The live id of the open round this retry is for, as the host found it; `None`: no
    /// open round matched (refused `inactive_mrtr_round`, audited).
    pub request_id: Option<RequestId>,
    /// A new id for the retry.
    pub retry_id: RequestId,
    /// Must be the binding's user.
    pub user: String,
    /// Must be the binding's tenant.
    pub tenant: String,
    /// Must be the binding's method.
    pub method: String,
    /// The client's whole params object as JSON text: the registered params (but `_meta`)
    /// with the round's `requestState` and the answers (`inputResponses`, absent meaning `{}`).
    pub params_json: String,
}

/// A retry ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// The complete JSON-RPC request text.
    pub request_json: String,
    /// The round it answers.
    pub round: u32,
    /// The consent receipt it rests on (none for a state-only round: nothing of the user's is sent).
    pub consent_receipt_id: Option<String>,
}

/// The caller ends a binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishRequest {
    /// The binding's server (ids are per server).
    pub server: ServerIdentity,
    /// Any id the binding uses (its original id, or the id of its live retry).
    pub request_id: RequestId,
    /// Must be the binding's user: another user's caller cannot end it.
    pub user: String,
    /// Must be the binding's tenant.
    pub tenant: String,
    /// Why it ends.
    pub outcome: CallerOutcome,
}

/// Why the caller ends a binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallerOutcome {
    /// Cancelled by the user or the client.
    Cancelled,
    /// The transport failed or the client gave up (a short reason code).
    Error(String),
    /// A policy of the host's refused the round before anyone saw it; the text names the
    /// policy as a consent receipt id would (`policy:<id>`): the `terminal` event records it
    /// as `consent_receipt_id`, with `consent_method: policy_hook` and `reason:
    /// policy_denied`. A text that is no receipt id (printable ASCII, no spaces, 1 to 128
    /// bytes) is left out; the reason stays.
    PolicyDenied(String),
}

/// How a binding ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminalOutcome {
    /// A complete result.
    Complete,
    /// An error (from the server, the transport, or a denial that ends the binding).
    Error,
    /// Cancelled.
    Cancelled,
    /// The lifetime passed.
    Expired,
}

impl TerminalOutcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

/// What a relay refused with no binding behind it (`refuse-unbound`): a message of the server's
/// or the client's that asks for, or gives, input outside every round the gate holds. The
/// relay refuses it itself; the gate records the refusal, so no channel for input goes around
/// the trail. Exhaustive, like the other types of the WIT's records: each host converts it
/// to the WIT variant, and a new case is a new WIT version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unbound {
    /// A request the server sent outside any round (a 2025-era server's `elicitation/create`,
    /// `sampling/createMessage` or `roots/list`), with the method as the server named it:
    /// `legacy_server_request` (peer).
    ServerRequest(String),
    /// The server's answer to a request the gate does not bind asks for input: a `resultType`
    /// of `input_required`, `inputRequests` in its result (a task's), or a `-32042` URL
    /// elicitation error: `input_required_not_allowed` (peer).
    InputRequired,
    /// A notification of the server's carries `inputRequests` (a task's status):
    /// `input_requests_not_bound` (peer).
    InputRequestsNotified,
    /// A message of the client's carries `inputResponses` outside a gated request's retry (a
    /// task's `tasks/update`): `input_responses_not_bound` (caller).
    InputResponses,
}
