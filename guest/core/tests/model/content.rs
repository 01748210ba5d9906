//! What a round may hold and what its answers must look like, as docs/errors.md states it (the
//! `peer` codes of `accept-response`, the answer codes of `build-retry`), for the handful of
//! requests and answers the generator writes.

use serde_json::Value;
use std::collections::BTreeMap;

/// One input request a server may put in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A form with the fixture's schema (`form_schema`).
    Form,
    /// A form whose schema uses `pattern`, outside the MCP subset.
    FormBadSchema,
    /// An `https://` URL elicitation.
    Url,
    /// An `http://` URL elicitation.
    UrlUnsafe,
    /// An elicitation in a mode that is neither `form` nor `url`.
    UnknownMode,
    /// A deprecated `roots/list` request.
    Roots,
}

/// How an input request of an open round must be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// Form content valid against the fixture's schema (or no content).
    Form,
    /// A URL-mode elicitation: an action, never content.
    Url,
    /// A `ListRootsResult`.
    Roots,
}

/// What the registration let a round ask for: the capabilities its params declared and the
/// deprecated methods its policy approved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Allowed {
    pub(crate) url_declared: bool,
    pub(crate) roots_declared: bool,
    pub(crate) roots_approved: bool,
}

/// A round's content. A state, if sent, must be a non-empty string (named whatever else is
/// present); a round needs requests or a state; then each request in key order: its method
/// (a deprecated one must be approved), its mode, its form schema or URL, and last whether
/// the client declared the capability it needs.
pub(crate) fn round_content(
    requests: &BTreeMap<String, Request>,
    state: Option<&str>,
    allowed: Allowed,
) -> Result<BTreeMap<String, Input>, &'static str> {
    if state == Some("") {
        return Err("invalid_requestState");
    }
    if requests.is_empty() && state.is_none() {
        return Err("input_required_payload_empty");
    }
    let mut inputs = BTreeMap::new();
    for (key, request) in requests {
        let input = match request {
            Request::Form => Input::Form,
            Request::FormBadSchema => return Err("invalid_form_requestedSchema"),
            Request::UnknownMode => return Err("unknown_elicitation_mode"),
            Request::UrlUnsafe => return Err("unsafe_url_elicitation"),
            Request::Url if !allowed.url_declared => return Err("undeclared_capability"),
            Request::Url => Input::Url,
            Request::Roots if !allowed.roots_approved => {
                return Err("unapproved_deprecated_client_request");
            }
            Request::Roots if !allowed.roots_declared => return Err("undeclared_capability"),
            Request::Roots => Input::Roots,
        };
        inputs.insert(key.clone(), input);
    }
    Ok(inputs)
}

/// The answers must be an object with exactly the round's keys (`{}` for a state-only round);
/// then each answer in key order. An elicitation answer: its shape (only `action`, `content`
/// and `_meta`; a known action), content only on `accept` (before the URL rule), no content
/// for a URL, and accepted form content valid against the schema shown. A `roots/list`
/// answer: a `ListRootsResult`.
pub(crate) fn check_answers(
    answers: &Value,
    inputs: &BTreeMap<String, Input>,
) -> Result<(), &'static str> {
    let Value::Object(answers) = answers else {
        return Err("invalid_input_response");
    };
    if !answers.keys().eq(inputs.keys()) {
        return Err("input_response_population_mismatch");
    }
    for (key, input) in inputs {
        let Value::Object(answer) = &answers[key] else {
            return Err("invalid_input_response");
        };
        if *input == Input::Roots {
            if !is_list_roots_result(answer) {
                return Err("invalid_input_response");
            }
            continue;
        }
        if answer
            .keys()
            .any(|k| !matches!(k.as_str(), "action" | "content" | "_meta"))
        {
            return Err("invalid_input_response");
        }
        let action = answer.get("action").and_then(Value::as_str);
        if !matches!(action, Some("accept" | "decline" | "cancel")) {
            return Err("invalid_input_response");
        }
        let content = answer.get("content");
        if action != Some("accept") && content.is_some() {
            return Err("non_accept_response_must_not_have_content");
        }
        match input {
            Input::Url if content.is_some() => {
                return Err("url_elicitation_response_must_not_have_content");
            }
            Input::Form if action == Some("accept") && !fits_form_schema(content) => {
                return Err("input_response_schema_mismatch");
            }
            _ => {}
        }
    }
    Ok(())
}

/// `{roots: [{uri: "file://…", name?}]}`, nothing else beside `_meta`.
fn is_list_roots_result(answer: &serde_json::Map<String, Value>) -> bool {
    let only_known = answer
        .keys()
        .all(|k| matches!(k.as_str(), "roots" | "_meta"));
    let roots_ok = answer
        .get("roots")
        .and_then(Value::as_array)
        .is_some_and(|roots| {
            roots.iter().all(|root| {
                root.as_object().is_some_and(|r| {
                    let uri_ok = r
                        .get("uri")
                        .and_then(Value::as_str)
                        .is_some_and(|u| u.starts_with("file://"));
                    let name_ok = r.get("name").is_none_or(Value::is_string);
                    let known = r.keys().all(|k| matches!(k.as_str(), "uri" | "name"));
                    uri_ok && name_ok && known
                })
            })
        });
    only_known && roots_ok
}

/// `common::form_schema()`: `login` a required string of 1 to 39 characters, `count` an
/// integer from 1 to 10 (JSON Schema counts `2.0` as an integer), `confirm` a boolean, and no
/// other property.
fn fits_form_schema(content: Option<&Value>) -> bool {
    let Some(Value::Object(c)) = content else {
        return false;
    };
    let each_fits = c.iter().all(|(k, v)| match k.as_str() {
        "login" => v
            .as_str()
            .is_some_and(|s| (1..=39).contains(&s.chars().count())),
        "count" => v
            .as_f64()
            .is_some_and(|n| n.fract() == 0.0 && (1.0..=10.0).contains(&n)),
        "confirm" => v.is_boolean(),
        _ => false,
    });
    each_fits && c.contains_key("login")
}
