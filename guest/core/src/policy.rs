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
    /// Most enum options in one field (time-zone pickers have several hundred).
    pub const MAX_ENUM_OPTIONS: usize = 1024;
    /// Longest text shown to the user (message, title, description), in bytes.
    pub const MAX_TEXT_BYTES: usize = 8192;
    /// Longest elicitation URL, in bytes. OAuth authorization URLs carry a signed request
    /// object or a JWT in the query and run past 2 KiB; browsers take far longer ones. 16 KiB
    /// holds such URLs with room to spare and stays far below the response limit, and the
    /// view shows the whole URL, so a bound keeps the screen readable.
    pub const MAX_URL_BYTES: usize = 16 * 1024;
    /// Longest input key (a key of `inputRequests`) or form property name, in bytes.
    pub const MAX_KEY_BYTES: usize = 128;
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
    /// Bounds for a client's whole retry params (`retry-from-client`): the registered
    /// params, the answers and a round's state in one document, so room for each of them
    /// at its own bound, the answers one level deeper than in their own document.
    pub const CLIENT_RETRY: JsonLimits = JsonLimits {
        max_bytes: PARAMS.max_bytes + RESPONSES.max_bytes + RESPONSE.max_bytes,
        max_depth: RESPONSES.max_depth + 1,
        max_nodes: PARAMS.max_nodes + RESPONSES.max_nodes + 1,
    };
}

/// True when `name` (an input key or a form property name: strings a server picks and the
/// consent screen shows) is 1 to `max_bytes` bytes with no character that could fake or
/// hide screen content (see [`hidden_or_control`]). The spec allows any string; these are
/// the ones a screen cannot show honestly.
pub(crate) fn shown_name_ok(name: &str, max_bytes: usize) -> bool {
    !name.is_empty() && name.len() <= max_bytes && !name.chars().any(hidden_or_control)
}

/// Control characters (C0, DEL, C1), the line and paragraph separators, and every default
/// ignorable code point: the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E,
/// U+2066–U+2069), the zero-width characters (U+200B–U+200D, U+2060, U+FEFF), the soft
/// hyphen, variation selectors, tag characters and fillers, plus the interlinear
/// annotation characters (U+FFF9–U+FFFB). Each of them either moves or breaks the text
/// around it or renders as nothing, so two names that look alike could differ, or a name
/// could reorder what the screen shows next to it.
pub fn hidden_or_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The round cap is inclusive: a policy may allow exactly `MAX_ROUNDS` rounds, and one
    /// more is the caller's error. (An off-by-one here lets a policy lift the hard cap.)
    #[test]
    fn max_rounds_is_accepted_at_the_cap_and_refused_one_over() {
        let with = |max_rounds| Policy {
            max_rounds,
            ..Policy::default()
        };
        for ok in [1, limits::DEFAULT_MAX_ROUNDS, limits::MAX_ROUNDS] {
            assert_eq!(with(ok).validate(), Ok(()), "{ok}");
        }
        for refused in [0, limits::MAX_ROUNDS + 1, u32::MAX] {
            let e = with(refused).validate().err();
            assert_eq!(
                e.as_ref().map(GateError::code),
                Some("invalid_policy"),
                "{refused}"
            );
            assert_eq!(
                e.as_ref().map(GateError::cause),
                Some(crate::error::ErrorCause::Caller),
                "{refused}"
            );
        }
    }

    #[test]
    fn names_refuse_controls_and_invisible_characters_only() {
        for ok in [
            "github:login",
            "a b",
            "名前",
            "a\u{1F600}",
            "`]x",
            "é",
            "e\u{301}",
        ] {
            assert!(shown_name_ok(ok, 128), "{ok:?}");
        }
        let refused = [
            '\0',
            '\n',
            '\u{7F}',
            '\u{85}',
            '\u{9F}',
            '\u{AD}',
            '\u{34F}',
            '\u{61C}',
            '\u{180E}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{2028}',
            '\u{2029}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{2069}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{FEFF}',
            '\u{FFF9}',
            '\u{FFFB}',
            '\u{1D173}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E01EF}',
        ];
        for c in refused {
            assert!(!shown_name_ok(&format!("a{c}b"), 128), "{c:?}");
            assert!(!shown_name_ok(&c.to_string(), 128), "{c:?}");
        }
        assert!(!shown_name_ok("", 128));
        assert!(shown_name_ok(&"é".repeat(64), 128));
        assert!(!shown_name_ok(&format!("{}a", "é".repeat(64)), 128));
    }
}
