//! A server's `requestedSchema` against the MCP primitive subset, by whitelist.

use super::{FORMATS, FieldKind, FormField, FormSchema, SelectOption};
use crate::canonical;
use crate::digest;
use crate::error::{GateError, PeerMisbehaved};
use crate::policy::limits;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// `$schema` values accepted (the spec's dialect, and draft-07 which SDKs still emit).
const DIALECTS: [&str; 4] = [
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-07/schema#",
];

fn bad(why: impl Into<String>) -> GateError {
    GateError::Peer(PeerMisbehaved::ServerSentInvalidSchema(why.into()))
}

fn text(obj: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>, GateError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if s.len() <= limits::MAX_TEXT_BYTES => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!(
            "`{at}.{key}` must be a string of at most {} KiB",
            limits::MAX_TEXT_BYTES / 1024
        ))),
    }
}

/// The largest integer a JSON number written with a fraction or an exponent (`3.0`, `1e2`)
/// still names exactly: 2^53. Beyond it two different counts would read as one.
const MAX_EXACT_FLOAT_COUNT: f64 = 9_007_199_254_740_992.0;

/// A count (`minLength`, `maxItems`, `maxTokens`, ...): a non-negative integer, however it
/// is spelled. JSON Schema counts a number with a zero fraction as an integer, and Python's
/// `json` writes a float-typed count as `3.0`; `3.5`, negatives and counts beyond 2^53 are
/// refused.
pub(crate) fn non_negative_integer(v: &Value) -> Option<u64> {
    if let Some(u) = v.as_u64() {
        return Some(u);
    }
    let f = v.as_f64()?;
    if f.fract() == 0.0 && (0.0..=MAX_EXACT_FLOAT_COUNT).contains(&f) {
        // Exact: an integer-valued f64 within 0..=2^53 converts without loss.
        Some(f as u64)
    } else {
        None
    }
}

fn count(obj: &Map<String, Value>, key: &str, at: &str) -> Result<Option<u64>, GateError> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => non_negative_integer(v)
            .map(Some)
            .ok_or_else(|| bad(format!("`{at}.{key}` must be a non-negative integer"))),
    }
}

fn number(
    obj: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<serde_json::Number>, GateError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.clone())),
        Some(_) => Err(bad(format!("`{at}.{key}` must be a number"))),
    }
}

/// Only the subset's keywords (and never `$ref`, named apart: it is the attack).
fn only_keys(obj: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), GateError> {
    match crate::json::unexpected_key(obj, allowed) {
        None => Ok(()),
        Some("$ref") => Err(bad(format!(
            "`{at}` uses `$ref`; references are not allowed"
        ))),
        Some(key) => Err(bad(format!(
            "`{at}` has the keyword `{}`, outside the primitive subset",
            crate::json::quoted(key)
        ))),
    }
}

/// The options of an enum keyword: an array of 1 to `MAX_ENUM_OPTIONS` entries (`what`
/// names the array in the message when it is not one).
fn option_array<'a>(v: &'a Value, at: &str, what: &str) -> Result<&'a Vec<Value>, GateError> {
    let items = v
        .as_array()
        .ok_or_else(|| bad(format!("`{at}` must be {what}")))?;
    if items.is_empty() || items.len() > limits::MAX_ENUM_OPTIONS {
        return Err(bad(format!(
            "`{at}` must have 1 to {} entries",
            limits::MAX_ENUM_OPTIONS
        )));
    }
    Ok(items)
}

fn string_list(v: &Value, at: &str) -> Result<Vec<String>, GateError> {
    let items = option_array(v, at, "an array of strings")?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let s = item
            .as_str()
            .filter(|s| s.len() <= limits::MAX_TEXT_BYTES)
            .ok_or_else(|| bad(format!("`{at}` must hold strings only")))?;
        if !seen.insert(s) {
            return Err(bad(format!("`{at}` repeats `{}`", crate::json::quoted(s))));
        }
        out.push(s.to_owned());
    }
    Ok(out)
}

/// `[{const, title}]` (titled options).
fn titled_options(v: &Value, at: &str) -> Result<Vec<SelectOption>, GateError> {
    let items = option_array(v, at, "an array")?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let obj = item
            .as_object()
            .ok_or_else(|| bad(format!("`{at}` entries must be objects")))?;
        only_keys(obj, &["const", "title"], at)?;
        let value = obj
            .get("const")
            .and_then(Value::as_str)
            .filter(|s| s.len() <= limits::MAX_TEXT_BYTES)
            .ok_or_else(|| bad(format!("`{at}` entries need a string `const`")))?;
        let title = text(obj, "title", at)?
            .ok_or_else(|| bad(format!("`{at}` entries need a string `title`")))?;
        if !seen.insert(value.to_owned()) {
            return Err(bad(format!("`{at}` repeats a `const`")));
        }
        out.push(SelectOption {
            value: value.to_owned(),
            title: Some(title),
        });
    }
    Ok(out)
}

fn check_default(default: Option<&Value>, kind: &FieldKind, at: &str) -> Result<(), GateError> {
    let Some(d) = default else { return Ok(()) };
    let fits = match kind {
        FieldKind::String { .. } => d.is_string(),
        // JSON Schema's `integer` holds every number with a zero fraction (`2.0` too).
        FieldKind::Number { integer, .. } => {
            d.is_number()
                && (!integer
                    || d.as_i64().is_some()
                    || d.as_u64().is_some()
                    || d.as_f64().is_some_and(|f| f.fract() == 0.0))
        }
        FieldKind::Boolean => d.is_boolean(),
        FieldKind::SingleSelect { options } => d
            .as_str()
            .is_some_and(|s| options.iter().any(|o| o.value == s)),
        FieldKind::MultiSelect { options, .. } => d.as_array().is_some_and(|a| {
            a.iter().all(|x| {
                x.as_str()
                    .is_some_and(|s| options.iter().any(|o| o.value == s))
            })
        }),
    };
    if fits {
        Ok(())
    } else {
        Err(bad(format!("`{at}.default` does not fit the field")))
    }
}

fn field(name: &str, prop: &Value, required: bool) -> Result<FormField, GateError> {
    let at = format!("properties.{}", crate::json::quoted(name));
    let obj = prop
        .as_object()
        .ok_or_else(|| bad(format!("`{at}` must be an object")))?;
    let ty = obj.get("type").and_then(Value::as_str);
    let kind = match ty {
        Some("string") if obj.contains_key("enum") => {
            only_keys(
                obj,
                &[
                    "type",
                    "title",
                    "description",
                    "enum",
                    "enumNames",
                    "default",
                ],
                &at,
            )?;
            let values = string_list(
                obj.get("enum").unwrap_or(&Value::Null),
                &format!("{at}.enum"),
            )?;
            let names = match obj.get("enumNames") {
                None => None,
                Some(v) => {
                    let names = v
                        .as_array()
                        .filter(|a| a.len() == values.len())
                        .ok_or_else(|| bad(format!("`{at}.enumNames` must match `enum`")))?;
                    let mut out = Vec::with_capacity(names.len());
                    for n in names {
                        out.push(
                            n.as_str()
                                .filter(|s| s.len() <= limits::MAX_TEXT_BYTES)
                                .ok_or_else(|| bad(format!("`{at}.enumNames` must hold strings")))?
                                .to_owned(),
                        );
                    }
                    Some(out)
                }
            };
            let options = values
                .into_iter()
                .enumerate()
                .map(|(i, value)| SelectOption {
                    title: names.as_ref().and_then(|n| n.get(i).cloned()),
                    value,
                })
                .collect();
            FieldKind::SingleSelect { options }
        }
        Some("string") if obj.contains_key("oneOf") => {
            only_keys(
                obj,
                &["type", "title", "description", "oneOf", "default"],
                &at,
            )?;
            FieldKind::SingleSelect {
                options: titled_options(
                    obj.get("oneOf").unwrap_or(&Value::Null),
                    &format!("{at}.oneOf"),
                )?,
            }
        }
        Some("string") => {
            only_keys(
                obj,
                &[
                    "type",
                    "title",
                    "description",
                    "minLength",
                    "maxLength",
                    "format",
                    "default",
                ],
                &at,
            )?;
            let format = text(obj, "format", &at)?;
            if let Some(f) = &format
                && !FORMATS.contains(&f.as_str())
            {
                return Err(bad(format!(
                    "`{at}.format` must be email, uri, date or date-time"
                )));
            }
            let min_length = count(obj, "minLength", &at)?;
            let max_length = count(obj, "maxLength", &at)?;
            if let (Some(lo), Some(hi)) = (min_length, max_length)
                && lo > hi
            {
                return Err(bad(format!("`{at}` has `minLength` above `maxLength`")));
            }
            FieldKind::String {
                min_length,
                max_length,
                format,
            }
        }
        Some(t @ ("number" | "integer")) => {
            only_keys(
                obj,
                &[
                    "type",
                    "title",
                    "description",
                    "minimum",
                    "maximum",
                    "default",
                ],
                &at,
            )?;
            let minimum = number(obj, "minimum", &at)?;
            let maximum = number(obj, "maximum", &at)?;
            if let (Some(lo), Some(hi)) = (&minimum, &maximum)
                && lo.as_f64() > hi.as_f64()
            {
                return Err(bad(format!("`{at}` has `minimum` above `maximum`")));
            }
            FieldKind::Number {
                integer: t == "integer",
                minimum,
                maximum,
            }
        }
        Some("boolean") => {
            only_keys(obj, &["type", "title", "description", "default"], &at)?;
            FieldKind::Boolean
        }
        Some("array") => {
            only_keys(
                obj,
                &[
                    "type",
                    "title",
                    "description",
                    "minItems",
                    "maxItems",
                    "items",
                    "default",
                ],
                &at,
            )?;
            let items = obj
                .get("items")
                .and_then(Value::as_object)
                .ok_or_else(|| bad(format!("`{at}.items` must be an object")))?;
            let items_at = format!("{at}.items");
            let options = if items.contains_key("anyOf") {
                only_keys(items, &["anyOf"], &items_at)?;
                titled_options(
                    items.get("anyOf").unwrap_or(&Value::Null),
                    &format!("{items_at}.anyOf"),
                )?
            } else {
                only_keys(items, &["type", "enum"], &items_at)?;
                if items.get("type").and_then(Value::as_str) != Some("string") {
                    return Err(bad(format!("`{items_at}.type` must be `string`")));
                }
                string_list(
                    items.get("enum").unwrap_or(&Value::Null),
                    &format!("{items_at}.enum"),
                )?
                .into_iter()
                .map(|value| SelectOption { value, title: None })
                .collect()
            };
            let min_items = count(obj, "minItems", &at)?;
            let max_items = count(obj, "maxItems", &at)?;
            if let (Some(lo), Some(hi)) = (min_items, max_items)
                && lo > hi
            {
                return Err(bad(format!("`{at}` has `minItems` above `maxItems`")));
            }
            FieldKind::MultiSelect {
                options,
                min_items,
                max_items,
            }
        }
        _ => {
            // Plain pydantic writes `Optional[T]` so; the MCP Python SDK renders it as `T`
            // left out of `required`, which is how the subset says "optional".
            let nullable_union = obj.get("anyOf").and_then(Value::as_array).is_some_and(|a| {
                a.iter()
                    .any(|s| s.get("type").and_then(Value::as_str) == Some("null"))
            });
            if nullable_union {
                return Err(bad(format!(
                    "`{at}` is a union with `null` (`anyOf`), outside the primitive subset: an optional field is one left out of `required`"
                )));
            }
            if obj.contains_key("$ref") {
                return Err(bad(format!(
                    "`{at}` uses `$ref`; references are not allowed"
                )));
            }
            return Err(bad(format!(
                "`{at}.type` must be string, number, integer, boolean or array"
            )));
        }
    };
    check_default(obj.get("default"), &kind, &at)?;
    Ok(FormField {
        name: name.to_owned(),
        title: text(obj, "title", &at)?,
        description: text(obj, "description", &at)?,
        required,
        default: obj.get("default").cloned(),
        kind,
    })
}

/// Check a form `requestedSchema` against the primitive subset.
#[cfg(test)]
pub fn check_form_schema(schema: &Value) -> Result<FormSchema, GateError> {
    check_measured(schema).map(|(checked, _)| checked)
}

/// The same, with the length of the schema's canonical JSON (the text its digest covers).
pub(crate) fn check_measured(schema: &Value) -> Result<(FormSchema, usize), GateError> {
    let obj = schema
        .as_object()
        .ok_or_else(|| bad("`requestedSchema` must be an object"))?;
    only_keys(
        obj,
        &[
            "$schema",
            "type",
            "properties",
            "required",
            "title",
            "description",
        ],
        "requestedSchema",
    )?;
    if let Some(dialect) = obj.get("$schema")
        && !dialect.as_str().is_some_and(|d| DIALECTS.contains(&d))
    {
        return Err(bad("`$schema` names an unsupported dialect"));
    }
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err(bad("`type` must be `object`"));
    }
    text(obj, "title", "requestedSchema")?;
    text(obj, "description", "requestedSchema")?;
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("`properties` must be an object"))?;
    if props.len() > limits::MAX_FORM_FIELDS {
        return Err(bad(format!(
            "more than {} properties",
            limits::MAX_FORM_FIELDS
        )));
    }
    let mut required = BTreeSet::new();
    if let Some(req) = obj.get("required") {
        let req = req
            .as_array()
            .ok_or_else(|| bad("`required` must be an array of strings"))?;
        for r in req {
            let name = r
                .as_str()
                .ok_or_else(|| bad("`required` must be an array of strings"))?;
            if !props.contains_key(name) {
                return Err(bad(format!(
                    "`required` names `{}`, which is not a property",
                    crate::json::quoted(name)
                )));
            }
            if !required.insert(name) {
                return Err(bad("`required` repeats a name"));
            }
        }
    }
    let mut fields = Vec::with_capacity(props.len());
    for (name, prop) in props {
        if !crate::policy::shown_name_ok(name, limits::MAX_KEY_BYTES) {
            return Err(bad(format!(
                "property names must be 1 to {} bytes without control or invisible characters",
                limits::MAX_KEY_BYTES
            )));
        }
        fields.push(field(name, prop, required.contains(name.as_str()))?);
    }
    fields.sort_by(|a, b| a.name.cmp(&b.name));
    let text = canonical::to_canonical(schema);
    let checked = FormSchema {
        schema_sha256: digest::text_sha256_hex(&text),
        fields,
    };
    Ok((checked, text.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(schema: Value) -> FormSchema {
        match check_form_schema(&schema) {
            Ok(s) => s,
            Err(e) => panic!("{schema} refused: {e}"),
        }
    }

    #[test]
    fn accepts_every_primitive_variant() {
        let s = ok(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "title": "t", "description": "d",
            "properties": {
                "s": {"type": "string", "title": "S", "minLength": 1, "maxLength": 20, "format": "email", "default": "a@b.c"},
                "n": {"type": "number", "minimum": 0.5, "maximum": 9, "default": 1},
                "i": {"type": "integer", "minimum": 0},
                "b": {"type": "boolean", "default": false},
                "e": {"type": "string", "enum": ["x", "y"], "enumNames": ["X", "Y"]},
                "o": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
                "m": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}, "minItems": 1, "maxItems": 2},
                "t": {"type": "array", "items": {"anyOf": [{"const": "p", "title": "P"}]}}
            },
            "required": ["s", "b"]
        }));
        assert_eq!(s.fields.len(), 8);
        let good = json!({"s": "a@b.co", "b": true, "i": 3, "m": ["p"], "e": "x"});
        assert!(s.check_content("k", &good).is_ok());
        for bad in [
            json!({"b": true}),
            json!({"s": "a@b.co", "b": "yes"}),
            json!({"s": "a@b.co", "b": true, "extra": 1}),
            json!({"s": "a@b.co", "b": true, "i": 1.5}),
            json!({"s": "a@b.co", "b": true, "e": "z"}),
            json!({"s": "not-an-email", "b": true}),
            json!({"s": "a@b.co", "b": true, "m": ["p", "q", "p"]}),
            json!({"s": "a@b.co", "b": true, "m": []}),
            json!([]),
        ] {
            assert!(s.check_content("k", &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_are_integers_however_spelled() {
        for (v, want) in [
            (json!(3), Some(3)),
            (json!(3.0), Some(3)),
            (json!(-0.0), Some(0)),
            (json!(1e3), Some(1000)),
            (json!(9007199254740992.0), Some(1 << 53)),
            (json!(u64::MAX), Some(u64::MAX)),
            (json!(3.5), None),
            (json!(-1), None),
            (json!(-1.0), None),
            (json!(9007199254740994.0), None),
            (json!(1e300), None),
            (json!("3"), None),
            (json!(null), None),
        ] {
            assert_eq!(non_negative_integer(&v), want, "{v}");
        }
    }

    #[test]
    fn refuses_everything_outside_the_subset() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "#/defs/x"}}}),
            json!({"$ref": "#", "type": "object", "properties": {}}),
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^a$"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}),
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
            json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3.5}}}),
            json!({"type": "object", "properties": {"a\u{202E}": {"type": "string"}}}),
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
            json!({"type": "object", "properties": {}, "required": ["ghost"]}),
            json!({"type": "array", "properties": {}}),
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 5, "maxLength": 1}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "x"]}}}),
            json!({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}),
            json!({"$schema": "https://evil.example/meta", "type": "object", "properties": {}}),
            json!("object"),
        ] {
            assert!(
                matches!(
                    check_form_schema(&schema),
                    Err(GateError::Peer(PeerMisbehaved::ServerSentInvalidSchema(_)))
                ),
                "{schema}"
            );
        }
    }
}
