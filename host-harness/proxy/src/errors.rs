//! The JSON-RPC errors a client of the proxy sees in place of what the gate refused. Their
//! codes lie in −31000..−31099, outside the range JSON-RPC reserves (−32768..−32000), as the
//! MCP specification asks of codes it does not define; the gate's own snake_case code, its
//! cause and whether the refusal was audited travel in `data.mrtr_gate`.

use mrtr_gate_host::GateDenial;
use mrtr_gate_host::core::ErrorCause;
use serde_json::json;

/// The gate refused the server's answer (cause `peer`).
pub const PEER_REFUSED: i64 = -31000;
/// The gate refused the client's request or retry (cause `caller`).
pub const CALLER_REFUSED: i64 = -31001;
/// The gate could not decide: storage, audit, consent or the guest failed (cause `host`).
pub const HOST_FAILED: i64 = -31002;
/// The upstream server failed: it went away, or sent what could not be read.
pub const UPSTREAM_FAILED: i64 = -31003;
/// The proxy refused the client's message itself (a batch, an unreadable message, an id the
/// proxy keeps for its own).
pub const MESSAGE_REFUSED: i64 = -31004;

/// The JSON-RPC code of a gate's denial, by who is to blame.
pub fn denial_code(cause: ErrorCause) -> i64 {
    match cause {
        ErrorCause::Peer => PEER_REFUSED,
        ErrorCause::Caller => CALLER_REFUSED,
        ErrorCause::Host => HOST_FAILED,
    }
}

/// A refusal the client is told about: the JSON-RPC code, the snake_case code, who is to
/// blame and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// In −31000..−31099.
    pub rpc_code: i64,
    /// The gate's code (`docs/errors.md`) or the proxy's own.
    pub code: String,
    /// `peer`, `caller`, `host`, or `upstream`/`client` for the proxy's own refusals.
    pub cause: &'static str,
    /// Lowercase, no secrets.
    pub message: String,
    /// Whether the refusal is in the audit trail.
    pub audited: bool,
}

impl Refusal {
    /// The gate's denial, as the client is told it.
    pub fn from_denial(d: &GateDenial) -> Self {
        Self {
            rpc_code: denial_code(d.cause),
            code: d.code.as_str().to_owned(),
            cause: d.cause.as_str(),
            message: d.message.clone(),
            audited: d.audited,
        }
    }

    /// The proxy refuses the client's message before the gate sees it.
    pub fn message(code: &str, message: impl Into<String>) -> Self {
        Self {
            rpc_code: MESSAGE_REFUSED,
            code: code.to_owned(),
            cause: "client",
            message: message.into(),
            audited: false,
        }
    }

    /// The proxy refuses what the server sent, where no binding was there to judge it.
    pub fn peer(code: &str, message: impl Into<String>) -> Self {
        Self {
            rpc_code: PEER_REFUSED,
            code: code.to_owned(),
            cause: "peer",
            message: message.into(),
            audited: false,
        }
    }

    /// The proxy's own host services failed (its index of open rounds).
    pub fn host(code: &str, message: impl Into<String>) -> Self {
        Self {
            rpc_code: HOST_FAILED,
            code: code.to_owned(),
            cause: "host",
            message: message.into(),
            audited: false,
        }
    }

    /// The upstream failed.
    pub fn upstream(code: &str, message: impl Into<String>) -> Self {
        Self {
            rpc_code: UPSTREAM_FAILED,
            code: code.to_owned(),
            cause: "upstream",
            message: message.into(),
            audited: false,
        }
    }

    /// Count and log the refusal ([`crate::metrics`], [`crate::log`]): every refusal a client
    /// gets passes here ([`Refusal::response`]), and so does one recorded for a message the
    /// proxy dropped, once each.
    pub fn record(&self) {
        crate::metrics::global().refused(self);
        crate::log::refused(&self.code, self.cause, self.rpc_code);
    }

    /// The error's message: "refused by mrtr-gate" for the gate's refusals and the proxy's
    /// own; a failure of the upstream's says so, and that it is no policy decision.
    pub fn text(&self) -> String {
        if self.rpc_code == UPSTREAM_FAILED {
            format!(
                "the upstream failed, mrtr-gate refused nothing ({}): {}",
                self.code, self.message
            )
        } else {
            format!("refused by mrtr-gate ({}): {}", self.code, self.message)
        }
    }

    /// The JSON-RPC error response to the request whose id is `raw_id` (its exact JSON
    /// text, `null` when the message had none that could be read), counted as sent
    /// ([`crate::metrics`]): every refusal a client gets is rendered here, once.
    pub fn response(&self, raw_id: &str) -> String {
        self.record();
        let error = json!({
            "code": self.rpc_code,
            "message": self.text(),
            "data": {"mrtr_gate": {"code": self.code, "cause": self.cause, "audited": self.audited}},
        });
        format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"error":{error}}}"#)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_json_rpc_error_outside_the_reserved_range_with_the_gates_code() {
        let r = Refusal::message("batch_message", "a batch is not relayed");
        let text = r.response(r#""a\"b""#);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], "a\"b");
        assert_eq!(v["error"]["code"], MESSAGE_REFUSED);
        assert_eq!(v["error"]["data"]["mrtr_gate"]["code"], "batch_message");
        assert!(!(-32768..=-32000).contains(&MESSAGE_REFUSED));
        for cause in [ErrorCause::Peer, ErrorCause::Caller, ErrorCause::Host] {
            assert!((-31099..=-31000).contains(&denial_code(cause)));
        }
    }
}
