//! One `input_required` round: the server's `inputRequests` and `requestState`, checked,
//! turned into input rules (what each answer must look like) and a consent view.

use super::memo::SchemaCache;
use crate::error::{GateError, PeerMisbehaved};
use crate::gate::consent_view::InputView;
use crate::json::{self, bounded, quoted};
use crate::policy::{DeprecatedMethod, Policy, limits};
use crate::schema::FormSchema;
use crate::url_view;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The capabilities the request declared in `_meta`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declared {
    /// `elicitation` with `form` (or `elicitation: {}`).
    pub form: bool,
    /// `elicitation.url`.
    pub url: bool,
    /// `roots`.
    pub roots: bool,
    /// `sampling`.
    pub sampling: bool,
    /// `sampling.tools`.
    pub sampling_tools: bool,
}

/// The `_meta` key that carries the client capabilities.
pub const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

impl Declared {
    /// Read the declared capabilities from the request params.
    pub fn from_params(params: &Map<String, Value>) -> Self {
        let caps = params
            .get("_meta")
            .and_then(|m| m.get(CAPABILITIES_KEY))
            .and_then(Value::as_object);
        let Some(caps) = caps else {
            return Self::default();
        };
        let elicitation = caps.get("elicitation").and_then(Value::as_object);
        let sampling = caps.get("sampling").and_then(Value::as_object);
        Self {
            // `elicitation: {}` means form only (backwards compatibility).
            form: elicitation.is_some_and(|e| {
                e.get("form").is_some_and(Value::is_object)
                    || (!e.contains_key("form") && !e.contains_key("url"))
            }),
            url: elicitation.is_some_and(|e| e.get("url").is_some_and(Value::is_object)),
            roots: caps.get("roots").is_some_and(Value::is_object),
            sampling: sampling.is_some(),
            sampling_tools: sampling.is_some_and(|s| s.get("tools").is_some_and(Value::is_object)),
        }
    }
}

/// What an answer to one input request must look like.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputRule {
    /// Form elicitation: content validated against the schema.
    Form {
        /// The accepted schema.
        schema: FormSchema,
    },
    /// URL elicitation: no content.
    Url {
        /// The URL host, for the audit trail.
        host: String,
    },
    /// `roots/list` (deprecated): a `ListRootsResult`.
    Roots,
    /// `sampling/createMessage` (deprecated): a `CreateMessageResult`.
    Sampling,
}

impl InputRule {
    /// The kind name used in views and audit events.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Form { .. } => "form",
            Self::Url { .. } => "url",
            Self::Roots => "roots",
            Self::Sampling => "sampling",
        }
    }
}

/// A checked round.
#[derive(Clone, Debug)]
pub struct Round {
    /// The exact `requestState`, when present.
    pub state: Option<String>,
    /// One rule per input key.
    pub inputs: BTreeMap<String, InputRule>,
    /// What the consent view shows of each input, in key order.
    pub views: Vec<InputView>,
}

fn invalid(why: impl Into<String>) -> GateError {
    GateError::from(PeerMisbehaved::ServerSentInvalidInputRequest(why.into()))
}

/// Any string the spec allows (e.g. `github:login`) of 1 to [`limits::MAX_KEY_BYTES`]
/// bytes, without a character that could fake or hide what the consent screen shows.
pub fn valid_input_key(key: &str) -> bool {
    crate::policy::shown_name_ok(key, limits::MAX_KEY_BYTES)
}

/// A refused key as a message quotes it: bounded, every control or invisible character
/// escaped as `\u{…}` (a refused key may hold exactly those).
fn shown_key(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars().take(json::QUOTED_CHARS) {
        if crate::policy::hidden_or_control(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    if key.chars().nth(json::QUOTED_CHARS).is_some() {
        out.push('…');
    }
    out
}

fn message(params: &Map<String, Value>, key: &str) -> Result<String, GateError> {
    params
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| m.len() <= limits::MAX_TEXT_BYTES)
        .map(str::to_owned)
        .ok_or_else(|| {
            invalid(format!(
                "`{key}` needs a `message` string of at most {} KiB",
                limits::MAX_TEXT_BYTES / 1024
            ))
        })
}

fn check_one(
    key: &str,
    request: &Value,
    policy: &Policy,
    declared: Declared,
    schemas: &mut SchemaCache,
) -> Result<(InputRule, InputView), GateError> {
    let obj = request
        .as_object()
        .ok_or_else(|| invalid(format!("`{key}` must be an object")))?;
    // Embedded requests have no `jsonrpc` or `id`: they are not JSON-RPC requests.
    json::only_keys(obj, &["method", "params"], key).map_err(invalid)?;
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("`{key}` needs a `method` string")))?;
    let params = obj.get("params");
    match method {
        "elicitation/create" => {
            let params = params
                .and_then(Value::as_object)
                .ok_or_else(|| invalid(format!("`{key}.params` must be an object")))?;
            let mode = match params.get("mode") {
                None => "form",
                Some(Value::String(m)) if m == "form" || m == "url" => m.as_str(),
                Some(_) => {
                    return Err(GateError::from(
                        PeerMisbehaved::ServerSentUnknownElicitationMode,
                    ));
                }
            };
            if mode == "form" {
                json::only_keys(
                    params,
                    &["mode", "message", "requestedSchema", "_meta"],
                    key,
                )
                .map_err(invalid)?;
                let msg = message(params, key)?;
                let schema =
                    schemas.check(params.get("requestedSchema").unwrap_or(&Value::Null))?;
                if !declared.form {
                    return Err(GateError::from(
                        PeerMisbehaved::ServerSentUndeclaredCapability("elicitation.form".into()),
                    ));
                }
                let view = InputView::Form {
                    key: key.to_owned(),
                    message: msg,
                    fields: schema.fields.clone(),
                    schema_sha256: schema.schema_sha256.clone(),
                };
                Ok((InputRule::Form { schema }, view))
            } else {
                // `elicitationId` is a 2025-11-25 field; tolerated, never used.
                json::only_keys(
                    params,
                    &["mode", "message", "url", "elicitationId", "_meta"],
                    key,
                )
                .map_err(invalid)?;
                let msg = message(params, key)?;
                let raw = params.get("url").and_then(Value::as_str).ok_or_else(|| {
                    GateError::from(PeerMisbehaved::ServerSentUnsafeUrl(
                        "`url` must be a string".into(),
                    ))
                })?;
                let (view, _) = url_view::check_url(raw)?;
                if !declared.url {
                    return Err(GateError::from(
                        PeerMisbehaved::ServerSentUndeclaredCapability("elicitation.url".into()),
                    ));
                }
                Ok((
                    InputRule::Url {
                        host: view.ascii_host.clone(),
                    },
                    InputView::Url {
                        key: key.to_owned(),
                        message: msg,
                        url: view,
                    },
                ))
            }
        }
        "roots/list" => {
            if !policy.allows(DeprecatedMethod::RootsList) {
                return Err(GateError::from(
                    PeerMisbehaved::ServerSentUnapprovedDeprecatedRequest,
                ));
            }
            if let Some(p) = params {
                let p = p
                    .as_object()
                    .ok_or_else(|| invalid(format!("`{key}.params` must be an object")))?;
                json::only_keys(p, &["_meta"], key).map_err(invalid)?;
            }
            if !declared.roots {
                return Err(GateError::from(
                    PeerMisbehaved::ServerSentUndeclaredCapability("roots".into()),
                ));
            }
            Ok((
                InputRule::Roots,
                InputView::Roots {
                    key: key.to_owned(),
                },
            ))
        }
        "sampling/createMessage" => {
            if !policy.allows(DeprecatedMethod::SamplingCreateMessage) {
                return Err(GateError::from(
                    PeerMisbehaved::ServerSentUnapprovedDeprecatedRequest,
                ));
            }
            let p = params
                .and_then(Value::as_object)
                .ok_or_else(|| invalid(format!("`{key}.params` must be an object")))?;
            json::only_keys(
                p,
                &[
                    "messages",
                    "modelPreferences",
                    "systemPrompt",
                    "includeContext",
                    "temperature",
                    "maxTokens",
                    "stopSequences",
                    "metadata",
                    "tools",
                    "toolChoice",
                    "_meta",
                ],
                key,
            )
            .map_err(invalid)?;
            let messages = p
                .get("messages")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(format!("`{key}.params.messages` must be an array")))?;
            let max_tokens = p
                .get("maxTokens")
                .and_then(crate::schema::non_negative_integer)
                .ok_or_else(|| invalid(format!("`{key}.params.maxTokens` must be an integer")))?;
            let include_context = match p.get("includeContext") {
                None => "none",
                Some(Value::String(s)) => match s.as_str() {
                    "none" => "none",
                    "thisServer" => "thisServer",
                    "allServers" => "allServers",
                    _ => {
                        return Err(invalid(format!("`{key}.params.includeContext` is invalid")));
                    }
                },
                Some(_) => {
                    return Err(invalid(format!("`{key}.params.includeContext` is invalid")));
                }
            };
            let tools = p.get("tools").is_some() || p.get("toolChoice").is_some();
            if !declared.sampling || (tools && !declared.sampling_tools) {
                return Err(GateError::from(
                    PeerMisbehaved::ServerSentUndeclaredCapability(
                        if tools { "sampling.tools" } else { "sampling" }.into(),
                    ),
                ));
            }
            let system_prompt = p
                .get("systemPrompt")
                .and_then(Value::as_str)
                .map(|s| bounded(s, limits::MAX_SHOWN_SYSTEM_PROMPT_CHARS));
            Ok((
                InputRule::Sampling,
                InputView::Sampling {
                    key: key.to_owned(),
                    messages: messages.len(),
                    max_tokens,
                    include_context,
                    system_prompt,
                    tools,
                },
            ))
        }
        _ => Err(GateError::from(
            PeerMisbehaved::ServerSentUnapprovedDeprecatedRequest,
        )),
    }
}

/// Check the `input_required` result `result` (already known to carry that `resultType`).
pub fn check_round(
    result: &Map<String, Value>,
    policy: &Policy,
    declared: Declared,
    schemas: &mut SchemaCache,
) -> Result<Round, GateError> {
    // Only the spec's fields (plus `_meta`) may stand beside `resultType`.
    if let Some(k) = json::unexpected_key(
        result,
        &["resultType", "inputRequests", "requestState", "_meta"],
    ) {
        return Err(GateError::from(
            PeerMisbehaved::ServerSentMalformedResponse(format!(
                "an `input_required` result carries the unexpected field `{}`",
                quoted(k)
            )),
        ));
    }
    let requests = match result.get("inputRequests") {
        None => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => {
            return Err(invalid("`inputRequests` must be an object"));
        }
    };
    let state = match result.get("requestState") {
        None => None,
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= policy.max_request_state_bytes as usize =>
        {
            Some(s.clone())
        }
        Some(_) => return Err(GateError::from(PeerMisbehaved::ServerSentInvalidState)),
    };
    let has_requests = requests.is_some_and(|r| !r.is_empty());
    if !has_requests && state.is_none() {
        return Err(GateError::from(
            PeerMisbehaved::ServerSentEmptyInputRequired,
        ));
    }
    let mut inputs = BTreeMap::new();
    let mut views = Vec::new();
    if let Some(requests) = requests {
        if requests.len() > limits::MAX_INPUT_REQUESTS {
            return Err(GateError::from(PeerMisbehaved::ServerExceededLimit(
                format!(
                    "more than {} input requests in one round",
                    limits::MAX_INPUT_REQUESTS
                ),
            )));
        }
        let mut sorted: Vec<_> = requests.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (key, request) in sorted {
            if !valid_input_key(key) {
                return Err(invalid(format!(
                    "the input key `{}` is not 1 to {} bytes without control or invisible characters",
                    shown_key(key),
                    limits::MAX_KEY_BYTES
                )));
            }
            let (rule, view) = check_one(key, request, policy, declared, schemas)?;
            inputs.insert(key.clone(), rule);
            views.push(view);
        }
    }
    Ok(Round {
        state,
        inputs,
        views,
    })
}
