//! What every host-side crate says on the MCP wire itself (a client, a relay), written once.

mod message;
pub mod sse;

pub use message::{FromServer, from_server};

/// The largest message a host reads from a server or a client, in bytes: the gate's own bound
/// on a message (declared once, in the core's `limits`).
pub use mrtr_gate_core::limits::MAX_MESSAGE_BYTES;

/// The 2025-era requests a server sends for input (`elicitation/create`,
/// `sampling/createMessage`, `roots/list`), which 2026-07-28 carries in `input_required`
/// results instead: answered by a client, they would reach the user around the gate. The
/// gate's own list (the methods its trail names).
pub use mrtr_gate_core::LEGACY_SERVER_REQUESTS;

/// The answer to a server's own request for input outside any round (a 2025-era
/// `elicitation/create`, `sampling/createMessage`, `roots/list`) under its id `raw_id` (the
/// id's exact JSON text): unknown method, `-32601`. 2026-07-28 servers ask for input through
/// `input_required` results only; answered any other way, the request would reach the user
/// around the gate.
pub fn input_request_refused(raw_id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{raw_id},"error":{{"code":-32601,"message":"this client takes input only through input_required results"}}}}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_json_rpc_unknown_method_under_the_requests_id() {
        let v: serde_json::Value =
            serde_json::from_str(&input_request_refused(r#""a\"b""#)).unwrap();
        assert_eq!(v["id"], "a\"b");
        assert_eq!(v["error"]["code"], -32601);
    }
}
