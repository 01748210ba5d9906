//! Why a call did not complete. The gate's refusals keep the gate's codes
//! (`docs/errors.md`); the client adds its own few, for what happens outside the gate.

use crate::transport::TransportError;
use mrtr_gate_host::GateDenial;
use mrtr_gate_host::core::ViewError;

/// Why a call did not end with a complete result.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The gate refused a response or a retry: its code, cause and message. Nothing more
    /// was sent for the request.
    Refused(GateDenial),
    /// The gate accepted a round whose consent view does not read as a view of this format
    /// (`docs/consent-view.md`): nothing can be shown, so nothing is sent.
    UnreadableView(ViewError),
    /// The server answered with a JSON-RPC error.
    Server {
        /// The JSON-RPC error code.
        code: i64,
        /// The server's message (its own text: show it as such).
        message: String,
        /// The error's `data`, if any.
        data: serde_json::Value,
    },
    /// The server answered a method the gate does not bind with a `resultType` the client
    /// does not know, or with what is no JSON-RPC response. (`input_required` there is the
    /// gate's audited refusal, `input_required_not_allowed`: [`ClientError::Refused`].)
    Peer {
        /// `invalid_result_type` or `malformed_response`.
        code: &'static str,
        /// What it did.
        message: String,
    },
    /// A rule of the host's (the operator's policies) refused the round before anyone saw
    /// it, or could not judge it: its code (`policy_denied`, `policy_failed`) and why. The
    /// binding was ended; nothing more was sent.
    Policy(crate::RuleRefusal),
    /// The transport failed: nothing usable came back.
    Transport(TransportError),
    /// The user or the client cancelled.
    Cancelled,
    /// The answers for a round could not be had (a file without them, a closed terminal).
    NoAnswer(String),
    /// The server supports none of the protocol versions this client speaks.
    UnsupportedVersion(Vec<String>),
    /// The client was used wrongly (bad params, an unknown method).
    Usage(String),
}

impl ClientError {
    /// A stable snake_case code: the gate's own for a refusal.
    pub fn code(&self) -> &str {
        match self {
            Self::Refused(d) => d.code.as_str(),
            Self::UnreadableView(_) => "unreadable_consent_view",
            Self::Server { .. } => "server_error",
            Self::Peer { code, .. } => code,
            Self::Policy(r) => r.code,
            Self::Transport(t) => t.code.as_str(),
            Self::Cancelled => "cancelled",
            Self::NoAnswer(_) => "no_answer",
            Self::UnsupportedVersion(_) => "unsupported_protocol_version",
            Self::Usage(_) => "usage",
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(d) => write!(f, "the gate refused ({}): {}", d.code, d.message),
            Self::UnreadableView(e) => write!(f, "{e}; nothing was shown or sent"),
            Self::Server { code, message, .. } => {
                write!(f, "the server answered error {code}: {message:?}")
            }
            Self::Peer { code, message } => write!(f, "the server misbehaved ({code}): {message}"),
            Self::Policy(r) => write!(f, "{} ({}); nothing was sent", r.message, r.code),
            Self::Transport(t) => write!(f, "transport: {t}"),
            Self::Cancelled => f.write_str("cancelled; nothing more was sent"),
            Self::NoAnswer(why) => write!(f, "no answer ({why}); nothing was sent"),
            Self::UnsupportedVersion(v) => write!(
                f,
                "the server supports protocol versions {v:?}, this client only {}",
                crate::PROTOCOL_VERSION
            ),
            Self::Usage(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Refused(d) => Some(d),
            Self::UnreadableView(e) => Some(e),
            Self::Transport(t) => Some(t),
            _ => None,
        }
    }
}
