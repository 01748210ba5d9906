//! # mrtr-gate-client
//!
//! An MCP client (protocol 2026-07-28) with the gate in its round loop:
//!
//! - [`transport`]: stdio (a spawned command, no shell) and streamable HTTP (a JSON body or
//!   an SSE stream), each handing the gate the response text as received and naming the
//!   server the gate binds to (the command or the normalised URL, never `serverInfo`);
//! - [`session`]: the [`Client`] and its loop (register, send, gate the raw result, answer,
//!   retry), step by step ([`Client::start`], [`Client::exchange`], [`Client::answer`]) or
//!   whole ([`Client::call`]);
//! - [`answers`]: a terminal form for people, an answers file for scripts;
//! - [`error`]: why a call did not complete, with the gate's codes kept.
//!
//! `mrtr-gate call` is this crate on the command line; `examples/client.rs` embeds it.

pub mod answers;
pub mod error;
pub mod session;
pub mod transport;

pub use answers::{Answer, Answerer, AnswersFile, Terminal, TerminalForm};
pub use error::ClientError;
pub use session::{
    Call, Client, ClientConfig, Completed, Observer, OpenRound, RoundRule, RuleRefusal, Silent,
    Turn,
};
pub use transport::{
    HttpTransport, ServerStderr, StdioTransport, Transport, TransportCode, TransportError,
};

/// The protocol version this client speaks (and puts in every request's `_meta`).
pub const PROTOCOL_VERSION: &str = "2026-07-28";
