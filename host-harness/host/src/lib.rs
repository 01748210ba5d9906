//! # mrtr-gate-host
//!
//! What every mrtr-gate host shares, with no wasm engine in it (the wasmtime engine is the
//! `mrtr-gate-wasmtime` crate; the proxy, the client library and the Redis stores need only
//! this):
//!
//! - [`GateApi`] is the gate's operations, and [`NativeGate`] runs the core natively behind
//!   it; every engine's denial is a [`GateDenial`] with a typed [`DenialCode`];
//! - [`HostServices`] are the four services a gate runs over; [`reference_hosts`] has
//!   reference ones (wall and test clocks, in-memory storage, scripted, decided and terminal
//!   consent, in-memory and JSON-lines file audit sinks) and the one way to mint a receipt id;
//! - [`host_keys`] keys stored values, pseudonyms and the audit anchor;
//! - [`consent_screen`] renders a consent view and the answers as a person is shown them,
//!   every server string through [`shown`] (controls, bidi and invisible characters escaped);
//! - [`Principal`] is the user and tenant a request is made for;
//! - [`wire`] holds the MCP wire facts every relay needs (the message cap, the legacy server
//!   requests and the refusal sent for them, the event-stream reader).

pub mod consent_screen;
pub mod denial;
pub mod gate;
pub mod host_keys;
pub mod principal;
pub mod reference_hosts;
pub mod services;
pub mod shown;
pub mod trail_root;
pub mod wire;

pub use denial::{DenialCode, GateDenial};
pub use gate::{GateApi, NativeGate};
pub use mrtr_gate_core as core;
pub use principal::{BindPrincipal, Principal};
pub use services::HostServices;

/// A line on stderr for the person running the process, as `eprintln!` writes it, but one that
/// never panics: a stderr whose reader went away (a desktop client that closed the pipe, a
/// `2>&1 | head`) loses the line, never the process (`eprintln!` panics on a broken pipe).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}

/// An error and its sources, one after the other: `outer: cause: root cause`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
