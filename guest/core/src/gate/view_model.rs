//! The consent view as a type: what [`consent_view`](super::consent_view) writes, read back.
//! Hosts parse a round's `view_json` once into a [`ConsentView`] and hand the typed value to
//! whatever shows it (a terminal form, a consent screen, a browser dialog) and to the client
//! that opens an accepted URL. `docs/consent-view.md` describes every member; a test holds
//! this type to that document and to the writer.
//!
//! Reading is strict: [`ConsentView::parse`] takes only the canonical text of a view of this
//! format, member for member, so a view the writer could not have made (an unknown, missing
//! or repeated member, another format, non-canonical text) is an error, never a view with
//! parts left out. The writer stays the hand-written one: the gate never builds this type.

use crate::canonical;
use crate::ids::RequestId;
use crate::schema::FormField;
use crate::url_view::UrlView;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::consent_view::VIEW_FORMAT;

/// A consent view (`view_json`), format `mrtr-gate/consent-view/v2`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentView {
    /// One sentence per input, then what the retry does.
    pub effects: Vec<String>,
    /// One entry per input key, in key order.
    pub inputs: Vec<ViewInput>,
    /// The policy's round cap.
    pub max_rounds: u32,
    /// The request the round continues, and whose it is.
    pub request: ViewRequest,
    /// The 1-based round number.
    pub round: u32,
    /// The verified server, normalised (path and query included).
    pub server: String,
    /// The server's saved state, by size and digest only.
    pub state: ViewState,
    /// The format: [`VIEW_FORMAT`].
    pub view: String,
}

/// The request a round continues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewRequest {
    /// The request's `arguments` as shown (`None`: the params carry none).
    pub arguments: Option<ShownArguments>,
    /// Unique to the binding (a key's version is never reused).
    pub binding_version: u64,
    /// The id the round arrived on.
    pub id: RequestId,
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: String,
    /// The tool or prompt name, or the resource URI.
    pub name: String,
    /// The id the request was registered with.
    pub original_id: RequestId,
    /// Digest of the registered params.
    pub params_sha256: String,
    /// Digest of the tenant.
    pub tenant_sha256: String,
    /// Digest of the user.
    pub user_sha256: String,
}

/// A request's arguments as the view shows them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShownArguments {
    /// Their size, in bytes of canonical JSON.
    pub bytes: u64,
    /// The arguments themselves; `None` when too large to show.
    pub value: Option<Value>,
}

/// What the view says of the server's `requestState`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewState {
    /// Its size in bytes (present only with a state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Whether the round carried a state.
    pub present: bool,
    /// Its digest (present only with a state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// What the view shows of one input request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ViewInput {
    /// Form elicitation: the fields the user fills in.
    Form {
        /// The schema's properties, sorted by name.
        fields: Vec<FormField>,
        /// The `inputRequests` key.
        key: String,
        /// The server's message.
        message: String,
        /// Digest of the `requestedSchema` as sent.
        schema_sha256: String,
    },
    /// URL elicitation: where the user would go.
    Url {
        /// The `inputRequests` key.
        key: String,
        /// The server's message.
        message: String,
        /// The URL, described.
        url: UrlView,
    },
    /// `roots/list` (deprecated).
    Roots {
        /// Always true.
        deprecated: bool,
        /// The `inputRequests` key.
        key: String,
    },
    /// `sampling/createMessage` (deprecated).
    Sampling {
        /// Always true.
        deprecated: bool,
        /// `none`, `thisServer` or `allServers`.
        include_context: String,
        /// The `inputRequests` key.
        key: String,
        /// The reply's token cap.
        max_tokens: u64,
        /// How many messages.
        messages: u64,
        /// The system prompt, cut to 2000 characters (`None`: absent).
        system_prompt: Option<String>,
        /// Whether tools or a tool choice were sent.
        tools: bool,
    },
}

impl ViewInput {
    /// The input's `inputRequests` key.
    pub fn key(&self) -> &str {
        match self {
            Self::Form { key, .. }
            | Self::Url { key, .. }
            | Self::Roots { key, .. }
            | Self::Sampling { key, .. } => key,
        }
    }
}

/// Why a text is not a consent view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewError(pub String);

impl std::fmt::Display for ViewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a consent view: {}", self.0)
    }
}

impl std::error::Error for ViewError {}

impl ConsentView {
    /// The view `view_json` holds, exactly: the text must be the canonical JSON of a view of
    /// this format (what the gate writes), or it is refused.
    pub fn parse(view_json: &str) -> Result<Self, ViewError> {
        let view: Self = serde_json::from_str(view_json).map_err(|e| ViewError(e.to_string()))?;
        if view.view != VIEW_FORMAT {
            return Err(ViewError(format!("the format is not {VIEW_FORMAT}")));
        }
        if view.state.present != view.state.bytes.is_some()
            || view.state.present != view.state.sha256.is_some()
        {
            return Err(ViewError("the state's members disagree".into()));
        }
        // Every member read, and nothing else: the text the view writes again is the text.
        if view.to_canonical_json() != view_json {
            return Err(ViewError(
                "the text is not the canonical form of its members".into(),
            ));
        }
        Ok(view)
    }

    /// The view as canonical JSON: the `view_json` its digest is over.
    pub fn to_canonical_json(&self) -> String {
        match serde_json::to_value(self) {
            Ok(value) => canonical::to_canonical(&value),
            // Plain data: serializing it cannot fail.
            Err(_) => String::new(),
        }
    }

    /// The URL inputs `responses` (the answers, as sent) accept, with their `url.full`: the
    /// URL the user saw and the view's digest covers, never the server's raw string.
    pub fn accepted_urls<'a>(&'a self, responses: &Value) -> Vec<&'a str> {
        self.inputs
            .iter()
            .filter_map(|input| match input {
                ViewInput::Url { key, url, .. }
                    if responses
                        .get(key.as_str())
                        .and_then(|r| r.get("action"))
                        .and_then(Value::as_str)
                        == Some("accept") =>
                {
                    Some(url.full.as_str())
                }
                _ => None,
            })
            .collect()
    }
}
