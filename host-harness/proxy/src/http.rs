//! The streamable-HTTP endpoint, on hyper over tokio (never a hand-written HTTP parser):
//! `mrtr-gate proxy --listen ADDR --upstream URL`. Each client POST carries one JSON-RPC
//! message; a gated request goes through the engine and the gate's text upstream, anything
//! else as it came. The upstream's answer (a JSON body or an event stream) is read whole
//! against the request's id, and the client gets the judged response, re-framed by the
//! proxy. The 2025-era GET stream and DELETE of a session are relayed; redirects are never
//! followed; every call is bound to the configured upstream and nothing else.

mod answer;
mod bridge;
pub mod caps;
pub mod headers;
mod listen;
mod queue;
pub mod server;
mod sessions;
pub mod sse;
pub mod upstream;

pub use caps::Caps;
pub use server::{
    BindPrincipal, HEADER_MISMATCH, HttpOptions, UPSTREAM_TIMEOUT, serve, serve_pool_until,
    serve_until,
};
