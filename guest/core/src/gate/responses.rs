//! The caller's `inputResponses`: exactly the round's keys, each in the shape its request
//! demands, form content valid against the schema the user saw.

use crate::error::{CallerMisuse, GateError};
use crate::gate::round::InputRule;
use crate::json;
use crate::policy::limits;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

fn invalid(why: impl Into<String>) -> GateError {
    GateError::Caller(CallerMisuse::InvalidInputResponse(why.into()))
}

/// Check `responses` against the round's rules.
pub fn check_responses(
    responses: &Map<String, Value>,
    rules: &BTreeMap<String, InputRule>,
) -> Result<(), GateError> {
    if responses.len() != rules.len() || !responses.keys().all(|k| rules.contains_key(k)) {
        return Err(GateError::Caller(CallerMisuse::ResponsePopulationMismatch));
    }
    for (key, rule) in rules {
        let response = responses
            .get(key)
            .ok_or(GateError::Caller(CallerMisuse::ResponsePopulationMismatch))?;
        let obj = response
            .as_object()
            .ok_or_else(|| invalid(format!("`{key}` must be an object")))?;
        match rule {
            InputRule::Form { .. } | InputRule::Url { .. } => {
                json::only_keys(obj, &["action", "content", "_meta"], key).map_err(invalid)?;
                let action = obj.get("action").and_then(Value::as_str);
                if !matches!(action, Some("accept" | "decline" | "cancel")) {
                    return Err(invalid(format!(
                        "`{key}.action` must be accept, decline or cancel"
                    )));
                }
                let content = obj.get("content");
                if action != Some("accept") && content.is_some() {
                    return Err(GateError::Caller(CallerMisuse::NonAcceptResponseHadContent));
                }
                match rule {
                    InputRule::Url { .. } if content.is_some() => {
                        return Err(GateError::Caller(CallerMisuse::UrlResponseHadContent));
                    }
                    InputRule::Form { schema } if action == Some("accept") => {
                        schema.check_content(key, content.unwrap_or(&Value::Null))?;
                    }
                    _ => {}
                }
            }
            InputRule::Roots => check_roots(key, obj)?,
            InputRule::Sampling => check_sampling(key, obj)?,
        }
    }
    Ok(())
}

/// `ListRootsResult`: `{roots: [{uri: "file://…", name?}]}`.
fn check_roots(key: &str, obj: &Map<String, Value>) -> Result<(), GateError> {
    json::only_keys(obj, &["roots", "_meta"], key).map_err(invalid)?;
    let roots = obj
        .get("roots")
        .and_then(Value::as_array)
        .filter(|r| r.len() <= limits::MAX_ROOTS)
        .ok_or_else(|| {
            invalid(format!(
                "`{key}.roots` must be an array of at most {} roots",
                limits::MAX_ROOTS
            ))
        })?;
    for root in roots {
        let root = root
            .as_object()
            .ok_or_else(|| invalid(format!("`{key}.roots` entries must be objects")))?;
        json::only_keys(root, &["uri", "name", "_meta"], key).map_err(invalid)?;
        let uri_ok = root
            .get("uri")
            .and_then(Value::as_str)
            .is_some_and(|u| u.starts_with("file://") && u.len() <= limits::MAX_ROOT_URI_BYTES);
        let name_ok = root.get("name").is_none_or(Value::is_string);
        if !uri_ok || !name_ok {
            return Err(invalid(format!(
                "`{key}.roots` entries need a `file://` uri and an optional string name"
            )));
        }
    }
    Ok(())
}

/// `CreateMessageResult`: `{role, content, model, stopReason?}`.
fn check_sampling(key: &str, obj: &Map<String, Value>) -> Result<(), GateError> {
    json::only_keys(
        obj,
        &["role", "content", "model", "stopReason", "_meta"],
        key,
    )
    .map_err(invalid)?;
    if !matches!(
        obj.get("role").and_then(Value::as_str),
        Some("assistant" | "user")
    ) {
        return Err(invalid(format!("`{key}.role` must be assistant or user")));
    }
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err(invalid(format!("`{key}.model` must be a string")));
    }
    if obj.get("stopReason").is_some_and(|s| !s.is_string()) {
        return Err(invalid(format!("`{key}.stopReason` must be a string")));
    }
    let block_ok = |b: &Value| {
        matches!(
            b.get("type").and_then(Value::as_str),
            Some("text" | "image" | "audio" | "tool_use" | "tool_result")
        )
    };
    let content_ok = match obj.get("content") {
        Some(Value::Array(blocks)) => !blocks.is_empty() && blocks.iter().all(block_ok),
        Some(block @ Value::Object(_)) => block_ok(block),
        _ => false,
    };
    if content_ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "`{key}.content` must be one or more sampling content blocks"
        )))
    }
}
