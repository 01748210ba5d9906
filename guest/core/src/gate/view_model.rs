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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DOC: &str = include_str!("../../../../docs/consent-view.md");

    /// The text of the first fenced block after `marker` in docs/consent-view.md.
    fn doc_block(marker: &str) -> &'static str {
        let at = DOC
            .find(marker)
            .unwrap_or_else(|| panic!("no `{marker}` in the doc"));
        let rest = &DOC[at..];
        let start = rest.find("```").unwrap();
        let body = &rest[start..];
        let body = &body[body.find('\n').unwrap() + 1..];
        &body[..body.find("```").unwrap()]
    }

    /// The doc's exact `view-json` parses, and writes back to the same bytes (whose digest
    /// is the one the doc gives).
    #[test]
    fn the_documented_view_round_trips_byte_for_byte() {
        let text = doc_block("This is the exact `view-json`:").trim_end_matches('\n');
        let view = ConsentView::parse(text).unwrap();
        assert_eq!(view.to_canonical_json(), text);
        assert_eq!(
            crate::digest::sha256_hex(text.as_bytes()),
            "2f88fba774dcc345562d003f364ff44915d11db97bd4d955e35f4aa2ef5a17fe"
        );
        assert_eq!(view.round, 1);
        assert!(
            matches!(&view.inputs[..], [ViewInput::Form { key, fields, .. }]
            if key == "passenger" && fields.len() == 3)
        );
    }

    /// The doc's re-indented examples are views (and a URL input) once written canonically.
    #[test]
    fn the_documented_examples_are_views() {
        let state_only: Value =
            serde_json::from_str(doc_block("Demo round 3 is state-only")).unwrap();
        let text = canonical::to_canonical(&state_only);
        let view = ConsentView::parse(&text).unwrap();
        assert!(view.inputs.is_empty());
        assert_eq!(view.state.bytes, Some(31));
        let url: ViewInput = serde_json::from_str(doc_block("This is its `inputs` entry")).unwrap();
        let ViewInput::Url { key, url, .. } = url else {
            panic!("not a url input")
        };
        assert_eq!(key, "pay");
        assert_eq!(
            url.full,
            "https://xn--pypal-4ve.com/authorize?session=SECRET-SESSION"
        );
        assert_eq!(
            url.warnings,
            [
                crate::url_view::UrlWarning::Punycode,
                crate::url_view::UrlWarning::MixedScript
            ]
        );
    }

    fn documented() -> Value {
        serde_json::from_str(doc_block("This is the exact `view-json`:")).unwrap()
    }

    fn parses(v: &Value) -> bool {
        ConsentView::parse(&canonical::to_canonical(v)).is_ok()
    }

    /// Anything the writer could not have made is refused, never read in part.
    #[test]
    fn hostile_views_are_refused() {
        assert!(parses(&documented()));
        let mut cases: Vec<Value> = Vec::new();
        let mut with = |f: &dyn Fn(&mut Value)| {
            let mut v = documented();
            f(&mut v);
            cases.push(v);
        };
        with(&|v| v["extra"] = json!(1));
        with(&|v| v["request"]["extra"] = json!(1));
        with(&|v| v["inputs"][0]["extra"] = json!(1));
        with(&|v| v["inputs"][0]["fields"][0]["extra"] = json!(1));
        with(&|v| v["inputs"][0]["kind"] = json!("script"));
        with(&|v| v["state"]["extra"] = json!(1));
        with(&|v| v["state"]["present"] = json!(false));
        with(&|v| v["view"] = json!("mrtr-gate/consent-view/v1"));
        with(&|v| v["round"] = json!(-1));
        with(&|v| v["round"] = json!("1"));
        with(&|v| v["inputs"] = json!({}));
        with(&|v| {
            v.as_object_mut().unwrap().remove("effects");
        });
        with(&|v| {
            v["request"].as_object_mut().unwrap().remove("user_sha256");
        });
        with(&|v| {
            v["inputs"] = json!([{"key": "u", "kind": "url", "message": "m", "url": {
                "ascii_host": "a.example", "full": "https://a.example/", "has_query": false,
                "unicode_host": "a.example", "warnings": [], "extra": true}}]);
        });
        with(&|v| {
            v["inputs"] = json!([{"key": "u", "kind": "url", "message": "m", "url": {
                "ascii_host": "a.example", "full": "https://a.example/", "has_query": false,
                "unicode_host": "a.example", "warnings": ["looks_fine"]}}]);
        });
        for case in &cases {
            assert!(!parses(case), "accepted: {case}");
        }
        let text = canonical::to_canonical(&documented());
        // Not canonical: white space, members out of order, a repeated member, trailing text.
        for bad in [
            format!(" {text}"),
            text.replacen("{\"effects\"", "{ \"effects\"", 1),
            text.replacen("\"max_rounds\":10,", "", 1).replacen(
                "\"inputs\"",
                "\"max_rounds\":10,\"inputs\"",
                1,
            ),
            text.replacen("\"round\":1,", "\"round\":1,\"round\":1,", 1),
            format!("{text}x"),
            String::new(),
            "null".into(),
        ] {
            assert!(ConsentView::parse(&bad).is_err(), "accepted: {bad}");
        }
        assert!(ConsentView::parse(&text).is_ok());
    }

    #[test]
    fn accepted_urls_are_the_url_inputs_the_answers_accept() {
        let mut v = documented();
        v["inputs"] = json!([
            {"key": "later", "kind": "url", "message": "m", "url": {"ascii_host": "x.example",
             "full": "https://x.example/", "has_query": false, "unicode_host": "x.example", "warnings": []}},
            {"key": "pay", "kind": "url", "message": "m", "url": {"ascii_host": "pay.example",
             "full": "https://pay.example/a", "has_query": false, "unicode_host": "pay.example", "warnings": []}}
        ]);
        let view = ConsentView::parse(&canonical::to_canonical(&v)).unwrap();
        let responses = json!({"pay": {"action": "accept"}, "later": {"action": "decline"}});
        assert_eq!(view.accepted_urls(&responses), ["https://pay.example/a"]);
        assert!(view.accepted_urls(&json!({})).is_empty());
        // The documented view's arguments hold no URL input, whatever they read like.
        assert!(
            ConsentView::parse(&canonical::to_canonical(&documented()))
                .unwrap()
                .accepted_urls(&json!({"passenger": {"action": "accept"}}))
                .is_empty()
        );
    }
}
