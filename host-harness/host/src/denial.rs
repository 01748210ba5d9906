//! The one denial type every Rust host speaks: the host crate's gates, the client, the CLI
//! (and the proxy). Whether the policy ran natively or inside the component, and whether
//! the gate denied or the sandbox stopped the guest, a caller gets a [`GateDenial`] whose
//! code is typed ([`DenialCode`]): "the user refused" is a match on
//! `DenialCode::Gate(ErrorCode::ConsentRefused)`, not a string compare.

use mrtr_gate_core::{ErrorCause, ErrorCode};
use std::sync::Arc;

/// What a denial's code is: one of the gate's (`docs/errors.md`), or one the harness gives
/// when the guest could not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DenialCode {
    /// The gate's own code.
    Gate(ErrorCode),
    /// `guest_trapped`: the guest trapped, or could not be instantiated.
    GuestTrapped,
    /// `guest_out_of_fuel`: the call ran out of its fuel budget.
    GuestOutOfFuel,
    /// `guest_deadline_exceeded`: the call ran past its deadline.
    GuestDeadlineExceeded,
    /// `unrecognised_code`: the component named a code this host does not know (a component
    /// built from another version of the core); the code is in the message.
    Unrecognised,
}

impl DenialCode {
    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gate(code) => code.code(),
            Self::GuestTrapped => "guest_trapped",
            Self::GuestOutOfFuel => "guest_out_of_fuel",
            Self::GuestDeadlineExceeded => "guest_deadline_exceeded",
            Self::Unrecognised => "unrecognised_code",
        }
    }
}

impl std::fmt::Display for DenialCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorCode> for DenialCode {
    fn from(code: ErrorCode) -> Self {
        Self::Gate(code)
    }
}

/// Codes are compared as text where the text is what is at hand (a corpus file, a test).
impl PartialEq<str> for DenialCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DenialCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A denial as a host sees it: the gate's own, or the engine's when the guest could not answer
/// (then the engine's error, a wasmtime trap for instance, is its
/// [`source`](std::error::Error::source)). Two denials are equal when their code, cause,
/// message and `audited` are.
#[derive(Clone, Debug)]
pub struct GateDenial {
    /// What was denied, typed; [`DenialCode::as_str`] is the stable snake_case code.
    pub code: DenialCode,
    /// Who is to blame.
    pub cause: ErrorCause,
    /// Lowercase, no secrets.
    pub message: String,
    /// Whether the denial reached the audit sink.
    pub audited: bool,
    /// The engine's error (a trap, an instantiation failure) behind a denial of its own.
    trap: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl GateDenial {
    /// A denial with this code, blame, message and audit state (an engine's conversion of the
    /// gate's error as it crossed a boundary: the component's WIT error, for instance).
    pub fn new(
        code: DenialCode,
        cause: ErrorCause,
        message: impl Into<String>,
        audited: bool,
    ) -> Self {
        Self {
            code,
            cause,
            message: message.into(),
            audited,
            trap: None,
        }
    }

    /// The engine could not get an answer from the gate (`code` is one of the harness's:
    /// the guest trapped, ran out of fuel or past its deadline, or could not be instantiated):
    /// the host's fault, never audited, with the engine's error as the source.
    pub fn engine_failed(
        code: DenialCode,
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            code,
            cause: ErrorCause::Host,
            message: message.into(),
            audited: false,
            trap: Some(Arc::from(source.into())),
        }
    }

    /// Whether this is the gate's denial `code`.
    pub fn is(&self, code: ErrorCode) -> bool {
        self.code == DenialCode::Gate(code)
    }

    /// The user refused at the consent prompt (`consent_refused`): nothing was sent, and the
    /// round is still open.
    pub fn user_refused(&self) -> bool {
        self.is(ErrorCode::ConsentRefused)
    }
}

impl PartialEq for GateDenial {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.cause == other.cause
            && self.message == other.message
            && self.audited == other.audited
    }
}

impl Eq for GateDenial {}

impl std::fmt::Display for GateDenial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "denied ({}): {}", self.code, self.message)
    }
}

impl std::error::Error for GateDenial {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.trap
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<mrtr_gate_core::Denial> for GateDenial {
    fn from(d: mrtr_gate_core::Denial) -> Self {
        Self {
            code: DenialCode::Gate(d.error.error_code()),
            cause: d.error.cause(),
            message: d.error.to_string(),
            audited: d.audited,
            trap: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrtr_gate_core::{CallerMisuse, Denial, GateError};

    #[test]
    fn a_refusal_is_a_typed_code_and_reads_as_its_text() {
        let d = GateDenial::from(Denial::unaudited(GateError::Caller(
            CallerMisuse::ConsentRefused,
        )));
        assert!(d.user_refused());
        assert!(d.is(ErrorCode::ConsentRefused));
        assert_eq!(d.code, "consent_refused");
        assert_eq!(d.cause, ErrorCause::Caller);
        assert_eq!(
            d.to_string(),
            "denied (consent_refused): the user refused consent"
        );
        let trapped = GateDenial::engine_failed(DenialCode::GuestTrapped, "trapped", "boom");
        assert_eq!(trapped.code, DenialCode::GuestTrapped);
        assert!(!trapped.user_refused());
        assert!(std::error::Error::source(&trapped).is_some());
    }
}
