//! # mrtr-gate-core
//!
//! The policy core of mrtr-gate, the client-side security gate for MCP Multi Round-Trip
//! Requests (spec 2026-07-28, SEP-2322; control AID-H-028.007 G001 and G002).
//!
//! The core is pure: no I/O, no clock, no randomness of its own. It is generic over four
//! small host services ([`host::Clock`], [`host::Storage`], [`host::Consent`],
//! [`host::Audit`]), which the WebAssembly component gets from its imports and native
//! tests get from [`memory`] (feature `memory-hosts`).
//!
//! Start at [`Gate`]: its operations are the whole API. What a host implements is in
//! [`host`]; every denial is a [`GateError`] with a stable code and a cause.
//!
//! Public modules are the ones a host needs beyond the gate itself: [`host`] (the traits),
//! [`audit`] (verifying a trail), [`reconcile`] (what a trail proves, G002), [`canonical`] and
//! [`digest`] (recomputing what the trail
//! and the consent receipts bind to). Everything else is the gate's own.
#![forbid(unsafe_code)]

pub mod audit;
pub mod canonical;
pub mod digest;
pub mod host;
#[cfg(feature = "memory-hosts")]
pub mod memory;
pub mod reconcile;

mod error;
mod formats;
mod gate;
mod ids;
mod json;
mod policy;
mod redact;
mod schema;
mod url_view;

#[cfg(test)]
mod tests;

pub use error::{
    ALL_CODES, ALL_ERRORS, CallerMisuse, Denial, ErrorCause, ErrorCode, GateError, HostFault,
    PeerMisbehaved,
};
pub use gate::{
    AcceptedRound, CLOCK_SKEW_TOLERANCE_MS, CallerOutcome, ClientRetry, ConsentView,
    EXPIRY_GRACE_MS, FinishRequest, Gate, ID_PREFIX, LEGACY_SERVER_REQUESTS, MAX_TIME_MS,
    MRTR_METHODS, OriginMemo, Registered, Registration, ResponseVerdict, Retry, RetryRequest,
    ShownArguments, TerminalOutcome, URL_ELICITATION_REQUIRED, Unbound, VIEW_FORMAT, ViewError,
    ViewInput, ViewRequest, ViewState, canonical_responses,
};
pub use ids::{MAX_INTEGER_ID, MAX_STRING_ID_BYTES, RequestId, ServerIdentity};
// What a relay reads of a message without deciding on it (the proxy's routing and id splice).
pub use json::{JsonError, NOT_AN_OBJECT, parse_members};
pub use policy::{DeprecatedMethod, Policy, hidden_or_control, limits};
pub use schema::{Broken, FieldKind, FormField, SchemaMismatch, SelectOption};
pub use url_view::{UrlView, UrlWarning};
