//! Per-request policy and the hard limits no policy can lift.

use crate::error::{CallerMisuse, GateError};
use crate::json::JsonLimits;
use serde::{Deserialize, Serialize};

/// Hard caps. A policy may tighten them, never lift them.
pub mod limits {
    use super::JsonLimits;
    /// Largest `requestState`, in bytes.
    pub const MAX_STATE_BYTES: u32 = 1 << 20;
    /// Longest binding lifetime: 24 hours.
    pub const MAX_LIFETIME_MS: u64 = 24 * 60 * 60 * 1000;
    /// Most rounds a policy may allow.
    pub const MAX_ROUNDS: u32 = 64;
    /// Default round limit (every SDK client uses 10).
    pub const DEFAULT_MAX_ROUNDS: u32 = 10;
    /// Most input requests in one round.
    pub const MAX_INPUT_REQUESTS: usize = 32;
    /// Most properties in one form schema.
    pub const MAX_FORM_FIELDS: usize = 128;
    /// Most enum options in one field.
    pub const MAX_ENUM_OPTIONS: usize = 256;
    /// Longest text shown to the user (message, title, description), in bytes.
    pub const MAX_TEXT_BYTES: usize = 8192;
    /// Longest elicitation URL, in bytes.
    pub const MAX_URL_BYTES: usize = 2048;
    /// Longest tool or prompt name, or resource URI, in registered params, in bytes.
    pub const MAX_NAME_BYTES: usize = 4096;
    /// Most roots in a `roots/list` answer.
    pub const MAX_ROOTS: usize = 256;
    /// Longest root URI in a `roots/list` answer, in bytes.
    pub const MAX_ROOT_URI_BYTES: usize = 4096;
    /// Longest system prompt shown in the consent view of a sampling request, in characters.
    pub const MAX_SHOWN_SYSTEM_PROMPT_CHARS: usize = 2000;
    /// Longest user or tenant id, in bytes.
    pub const MAX_PRINCIPAL_BYTES: usize = 512;
    /// Longest policy version, in bytes.
    pub const MAX_POLICY_VERSION_BYTES: usize = 64;
    /// Longest consent receipt id, in bytes.
    pub const MAX_RECEIPT_ID_BYTES: usize = 128;
    /// Largest server message of any kind. A complete or error result is read only for its
    /// envelope, so this bound is the sandbox's, not the parser's: the message, its copy
    /// into the guest and the parser's few allocations fit the default 256 MiB memory cap
    /// (`SandboxLimits`) with room to spare.
    pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
    /// Bounds for an `input_required` result, which the gate reads whole (the state limit
    /// is checked separately).
    pub const RESPONSE: JsonLimits = JsonLimits {
        max_bytes: 4 << 20,
        max_depth: 32,
        max_nodes: 100_000,
    };
    /// Bounds for registered params.
    pub const PARAMS: JsonLimits = JsonLimits {
        max_bytes: 1 << 20,
        max_depth: 32,
        max_nodes: 50_000,
    };
    /// Bounds for the caller's `inputResponses`.
    pub const RESPONSES: JsonLimits = JsonLimits {
        max_bytes: 1 << 20,
        max_depth: 32,
        max_nodes: 50_000,
    };
}

/// A deprecated server-to-client request (AID-H-028.008).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DeprecatedMethod {
    /// `roots/list`
    #[serde(rename = "roots/list")]
    RootsList,
    /// `sampling/createMessage`
    #[serde(rename = "sampling/createMessage")]
    SamplingCreateMessage,
}

impl DeprecatedMethod {
    /// The wire method name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RootsList => "roots/list",
            Self::SamplingCreateMessage => "sampling/createMessage",
        }
    }
}

/// The policy of one binding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Lifetime of the whole request, from registration.
    pub round_trip_lifetime_ms: u64,
    /// Largest `requestState`, in bytes.
    pub max_request_state_bytes: u32,
    /// Most `input_required` rounds.
    pub max_rounds: u32,
    /// Deprecated request methods this request may answer.
    pub allowed_deprecated: Vec<DeprecatedMethod>,
    /// Recorded in every audit event.
    pub policy_version: String,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            round_trip_lifetime_ms: 5 * 60 * 1000,
            max_request_state_bytes: 64 * 1024,
            max_rounds: limits::DEFAULT_MAX_ROUNDS,
            allowed_deprecated: Vec::new(),
            policy_version: "default".into(),
        }
    }
}

impl Policy {
    /// Refuse a policy outside the hard caps.
    pub fn validate(&self) -> Result<(), GateError> {
        if self.round_trip_lifetime_ms == 0 || self.round_trip_lifetime_ms > limits::MAX_LIFETIME_MS
        {
            return Err(GateError::Caller(CallerMisuse::InvalidLifetime));
        }
        if self.max_request_state_bytes == 0
            || self.max_request_state_bytes > limits::MAX_STATE_BYTES
        {
            return Err(GateError::Caller(CallerMisuse::InvalidStatePolicy));
        }
        if self.max_rounds == 0 || self.max_rounds > limits::MAX_ROUNDS {
            return Err(GateError::Caller(CallerMisuse::InvalidPolicy(format!(
                "`max-rounds` must be 1 to {}",
                limits::MAX_ROUNDS
            ))));
        }
        let v = &self.policy_version;
        if v.is_empty()
            || v.len() > limits::MAX_POLICY_VERSION_BYTES
            || !v.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(GateError::Caller(CallerMisuse::InvalidPolicy(format!(
                "`policy-version` must be 1 to {} printable ascii bytes",
                limits::MAX_POLICY_VERSION_BYTES
            ))));
        }
        Ok(())
    }

    /// True when this binding may answer `method`.
    pub fn allows(&self, method: DeprecatedMethod) -> bool {
        self.allowed_deprecated.contains(&method)
    }
}
