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
//! Start at [`gate::Gate`].
#![cfg_attr(
    test,
    allow(
        clippy::panic,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing
    )
)]

pub mod audit;
pub mod canonical;
pub mod error;
pub mod formats;
pub mod gate;
pub mod host;
pub mod ids;
pub mod json;
#[cfg(feature = "memory-hosts")]
pub mod memory;
pub mod policy;
pub mod responses;
pub mod round;
pub mod schema;
pub mod url_view;

pub use error::{CallerMisuse, Denial, ErrorCause, GateError, HostFault, PeerMisbehaved};
pub use gate::{
    CallerOutcome, ConsentView, Gate, Registered, Registration, ResponseVerdict, Retry,
    RetryRequest, TerminalOutcome,
};
pub use ids::{RequestId, ServerIdentity};
pub use policy::{DeprecatedMethod, Policy};
