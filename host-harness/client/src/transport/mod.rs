//! How a request reaches a server and its response comes back, as bytes: the gate judges the
//! text the server sent, so no transport here parses a response into values and writes it
//! out again. Each transport also names the server the gate binds rounds to: the endpoint it
//! actually talks to (the URL it posts to, the command it spawned), never `serverInfo`.

pub mod http;
pub mod isolation;
pub mod stdio;

use mrtr_gate_host::core::{RequestId, ServerIdentity};
use mrtr_gate_host::wire::{FromServer, from_server};
use std::time::Duration;

pub use http::HttpTransport;
pub use stdio::{ServerStderr, StdioTransport};

/// The largest message a transport takes from a server ([`mrtr_gate_host::wire`]'s, the
/// gate's own bound). The gate has lower limits on what it decides on; this one only stops a
/// server from filling the client's memory.
pub use mrtr_gate_host::wire::MAX_MESSAGE_BYTES;

/// How often a transport that waits for a response calls [`Waiting::tick`].
pub const TICK: Duration = Duration::from_millis(250);

/// One JSON-RPC request, as the gate (or the client, for methods the gate does not bind)
/// wrote it.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a> {
    /// Its id: the response is the message with this id.
    pub id: &'a RequestId,
    /// Its method (the `Mcp-Method` header).
    pub method: &'a str,
    /// `params.name` or `params.uri` (the `Mcp-Name` header).
    pub name: Option<&'a str>,
    /// The protocol version its `_meta` names (the `MCP-Protocol-Version` header).
    pub protocol_version: &'a str,
    /// The exact text to send.
    pub json: &'a str,
}

/// What a transport is told while it waits.
pub trait Waiting {
    /// Called about every [`TICK`] while no response has come; `false` cancels the wait.
    fn tick(&mut self, waited: Duration) -> bool;
}

/// Wait for ever (tests, scripts that set their own deadline elsewhere).
pub struct Patient;

impl Waiting for Patient {
    fn tick(&mut self, _: Duration) -> bool {
        true
    }
}

/// Why a transport gave up, typed: a caller matches on it (a cancelled wait is
/// `TransportCode::Cancelled`, not a string compare). Each has a stable snake_case code
/// (`docs/errors.md`, "The client's own codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportCode {
    /// `cancelled`.
    Cancelled,
    /// `invalid_command`.
    InvalidCommand,
    /// `invalid_url`.
    InvalidUrl,
    /// `invalid_message`.
    InvalidMessage,
    /// `invalid_utf8`.
    InvalidUtf8,
    /// `message_too_large`.
    MessageTooLarge,
    /// `no_response`.
    NoResponse,
    /// `server_closed`.
    ServerClosed,
    /// `spawn_failed`.
    SpawnFailed,
    /// `transport_failed`.
    TransportFailed,
    /// `http_status`.
    HttpStatus,
    /// `session_expired`.
    SessionExpired,
}

impl TransportCode {
    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::InvalidCommand => "invalid_command",
            Self::InvalidUrl => "invalid_url",
            Self::InvalidMessage => "invalid_message",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::MessageTooLarge => "message_too_large",
            Self::NoResponse => "no_response",
            Self::ServerClosed => "server_closed",
            Self::SpawnFailed => "spawn_failed",
            Self::TransportFailed => "transport_failed",
            Self::HttpStatus => "http_status",
            Self::SessionExpired => "session_expired",
        }
    }
}

impl std::fmt::Display for TransportCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transport failure: nothing (or nothing usable) came back for the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// Why, typed; [`TransportCode::as_str`] is the stable code.
    pub code: TransportCode,
    /// What happened, lowercase.
    pub message: String,
}

impl TransportError {
    pub(crate) fn new(code: TransportCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for TransportError {}

/// A way to talk to one server.
pub trait Transport: Send {
    /// The server the gate binds every round of this transport to.
    fn server(&self) -> &ServerIdentity;

    /// Send `request` and return the text of the response with its id, as received. Waits
    /// calling `waiting.tick` until it comes, the server goes away, or the wait is cancelled
    /// (`cancelled`).
    fn request(
        &mut self,
        request: Outgoing<'_>,
        waiting: &mut dyn Waiting,
    ) -> Result<String, TransportError>;

    /// Send a notification (no response is awaited).
    fn notify(&mut self, method: &str, json: &str) -> Result<(), TransportError>;
}

/// What a transport reads of a message to route it: its id and whether it is a request or a
/// notification. Everything else is left to the gate.
/// What one incoming message is to the request waiting on `id`.
pub(crate) enum Routed {
    /// Its response (or a message so broken that only the gate can say what is wrong: with
    /// one request outstanding there is nobody else it could be for).
    Response,
    /// A request from the server, to be answered under its id (`(its id's exact JSON text,
    /// its method)`).
    ServerRequest(String, String),
    /// A notification: not this request's business.
    Other,
    /// A response under another id: on stdio a late answer to an earlier request, on an
    /// HTTP stream (which carries one request's answer) a response no reader should take.
    OtherResponse,
}

/// Read as the proxy reads a server's message ([`from_server`]).
pub(crate) fn route(text: &str, id: &RequestId) -> Routed {
    match from_server(text) {
        FromServer::Response { id: Some(rid), .. } if rid == *id => Routed::Response,
        // An error response without an id (`null`): the server could not read our request.
        FromServer::Response { raw_id: "null", .. } => Routed::Response,
        FromServer::Response { .. } => Routed::OtherResponse,
        FromServer::Request(raw_id, method) => Routed::ServerRequest(raw_id, method),
        FromServer::Notification => Routed::Other,
        FromServer::Unreadable => Routed::Response,
    }
}

/// The answer to a request the server sent on its own. 2026-07-28 servers ask for input
/// through `input_required` results, never with requests of their own, so only `ping` is
/// answered; anything else is refused as unknown (`-32601`), which also keeps a server from
/// reaching the user around the gate.
pub(crate) fn answer_server_request(raw_id: &str, method: &str) -> String {
    if method == "ping" {
        format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{{}}}}"#)
    } else {
        mrtr_gate_host::wire::input_request_refused(raw_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_finds_the_response_and_nothing_else() {
        let id = RequestId::Number(7);
        assert!(matches!(
            route(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &id),
            Routed::Response
        ));
        assert!(matches!(
            route(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#, &id),
            Routed::OtherResponse
        ));
        assert!(matches!(
            route(r#"{"jsonrpc":"2.0","id":6,"result":{}}"#, &id),
            Routed::OtherResponse
        ));
        assert!(matches!(
            route(
                r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
                &id
            ),
            Routed::Other
        ));
        assert!(matches!(
            route(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &id),
            Routed::ServerRequest(_, m) if m == "ping"
        ));
        // Broken text goes to the gate, which names the fault.
        for broken in ["", "not json", "[]", r#"{"id":7,"id":8}"#, "5"] {
            assert!(matches!(route(broken, &id), Routed::Response), "{broken}");
        }
    }

    #[test]
    fn server_requests_other_than_ping_are_refused() {
        let ping = answer_server_request("3", "ping");
        assert_eq!(ping, r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        let other = answer_server_request(r#""a""#, "elicitation/create");
        assert!(other.contains(r#""id":"a""#) && other.contains("-32601"));
    }
}
