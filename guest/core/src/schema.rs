//! Form `requestedSchema`: the MCP primitive subset, checked by whitelist.
//!
//! The spec allows a flat object of primitive properties (string, number/integer, boolean,
//! single- and multi-select enums) plus pure annotations. Anything else (`$ref`, nesting,
//! `pattern`, unknown keywords, `additionalProperties`, ...) is refused rather than
//! ignored: a keyword the gate does not understand is a keyword it cannot show the user.
//!
//! An accepted schema becomes a [`FormSchema`]: the fields as the consent view shows them
//! and the digest of the schema as the server sent it. The fields are also the compiled
//! form of the schema: [`FormSchema::validate`] checks content against them directly, with
//! no schema compiler in the sandbox (that keeps the component small and a never-seen
//! schema as cheap as a known one). Content may hold no field outside the schema
//! (`additionalProperties: false`): the user consented to the fields shown, nothing more.
//! [`FormSchema::json_schema`] gives the equivalent JSON Schema, which the differential
//! tests run through `jsonschema` as the reference.

use crate::canonical;
use crate::digest;
use crate::error::{CallerMisuse, GateError, PeerMisbehaved};
use crate::policy::limits;
use serde::{Deserialize, Serialize};
#[cfg(test)]
use serde_json::json;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The formats the spec allows on string fields.
pub const FORMATS: [&str; 4] = ["email", "uri", "date", "date-time"];

/// `$schema` values accepted (the spec's dialect, and draft-07 which SDKs still emit).
const DIALECTS: [&str; 4] = [
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-07/schema#",
];

/// One option of a select field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelectOption {
    /// The value sent.
    pub value: String,
    /// The label shown, when the server gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The kind and constraints of a field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FieldKind {
    /// Free text.
    String {
        /// Fewest characters.
        #[serde(skip_serializing_if = "Option::is_none")]
        min_length: Option<u64>,
        /// Most characters.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_length: Option<u64>,
        /// `email`, `uri`, `date` or `date-time`.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<String>,
    },
    /// A number (`integer` when whole numbers only).
    Number {
        /// Whole numbers only.
        integer: bool,
        /// Smallest value.
        #[serde(skip_serializing_if = "Option::is_none")]
        minimum: Option<serde_json::Number>,
        /// Largest value.
        #[serde(skip_serializing_if = "Option::is_none")]
        maximum: Option<serde_json::Number>,
    },
    /// Yes or no.
    Boolean,
    /// One of the options.
    SingleSelect {
        /// The options, in the server's order.
        options: Vec<SelectOption>,
    },
    /// Some of the options.
    MultiSelect {
        /// The options, in the server's order.
        options: Vec<SelectOption>,
        /// Fewest options.
        #[serde(skip_serializing_if = "Option::is_none")]
        min_items: Option<u64>,
        /// Most options.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_items: Option<u64>,
    },
}

/// A field as the consent view shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormField {
    /// The property name (the key in `content`).
    pub name: String,
    /// The server's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Must the user fill it in.
    pub required: bool,
    /// The server's suggested value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Kind and constraints.
    #[serde(flatten)]
    pub kind: FieldKind,
}

/// An accepted form schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormSchema {
    /// SHA-256 of the schema as the server sent it (canonical JSON).
    pub schema_sha256: String,
    /// The fields, sorted by name.
    pub fields: Vec<FormField>,
}

fn number_cmp(a: &serde_json::Number, b: &serde_json::Number) -> Option<std::cmp::Ordering> {
    // Exact for integers (any mix of i64/u64); through f64 otherwise.
    let int = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

impl FieldKind {
    /// Does `value` fit this field?
    pub fn accepts(&self, value: &Value) -> bool {
        match self {
            Self::String {
                min_length,
                max_length,
                format,
            } => value.as_str().is_some_and(|s| {
                // JSON Schema counts code points.
                let n = s.chars().count() as u64;
                min_length.is_none_or(|m| n >= m)
                    && max_length.is_none_or(|m| n <= m)
                    && format
                        .as_deref()
                        .is_none_or(|f| crate::formats::check(f, s))
            }),
            Self::Number {
                integer,
                minimum,
                maximum,
            } => match value {
                Value::Number(n) => {
                    (!integer || is_integer(n))
                        && minimum
                            .as_ref()
                            .is_none_or(|m| number_cmp(n, m).is_some_and(std::cmp::Ordering::is_ge))
                        && maximum
                            .as_ref()
                            .is_none_or(|m| number_cmp(n, m).is_some_and(std::cmp::Ordering::is_le))
                }
                _ => false,
            },
            Self::Boolean => value.is_boolean(),
            Self::SingleSelect { options } => value
                .as_str()
                .is_some_and(|s| options.iter().any(|o| o.value == s)),
            Self::MultiSelect {
                options,
                min_items,
                max_items,
            } => value.as_array().is_some_and(|items| {
                let n = items.len() as u64;
                let mut seen = BTreeSet::new();
                min_items.is_none_or(|m| n >= m)
                    && max_items.is_none_or(|m| n <= m)
                    && items.iter().all(|item| {
                        item.as_str()
                            .is_some_and(|s| options.iter().any(|o| o.value == s) && seen.insert(s))
                    })
            }),
        }
    }
}

impl FormSchema {
    /// Does `content` (an accepted form's answers) fit the schema: an object, every
    /// required field present, no field outside the schema, every value fitting its field?
    pub fn validate(&self, content: &Value) -> bool {
        let Some(obj) = content.as_object() else {
            return false;
        };
        let known = |k: &String| {
            self.fields
                .binary_search_by(|f| f.name.as_str().cmp(k.as_str()))
                .is_ok()
        };
        obj.keys().all(known)
            && self.fields.iter().all(|f| match obj.get(&f.name) {
                None => !f.required,
                Some(v) => f.kind.accepts(v),
            })
    }

    /// Validate accepted form `content` for input `key`.
    pub fn check_content(&self, key: &str, content: &Value) -> Result<(), GateError> {
        if self.validate(content) {
            Ok(())
        } else {
            Err(GateError::Caller(CallerMisuse::ResponseSchemaMismatch(
                key.to_owned(),
            )))
        }
    }

    /// The JSON Schema (draft-07 and 2020-12 alike) equivalent to [`FormSchema::validate`].
    #[cfg(test)]
    pub fn json_schema(&self) -> Value {
        let properties: Map<String, Value> = self
            .fields
            .iter()
            .map(|f| (f.name.clone(), normalized_property(&f.kind)))
            .collect();
        let required: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name.as_str())
            .collect();
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }
}

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

fn count(obj: &Map<String, Value>, key: &str, at: &str) -> Result<Option<u64>, GateError> {
    match obj.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
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
            crate::json::bounded(key, 64)
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
            return Err(bad(format!(
                "`{at}` repeats `{}`",
                crate::json::bounded(s, 64)
            )));
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
        FieldKind::Number { integer, .. } => {
            d.is_number() && (!integer || d.as_i64().is_some() || d.as_u64().is_some())
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
    let at = format!("properties.{}", crate::json::bounded(name, 64));
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

/// One field as JSON Schema.
#[cfg(test)]
fn normalized_property(kind: &FieldKind) -> Value {
    let mut out = Map::new();
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_owned(), v);
    };
    match kind {
        FieldKind::String {
            min_length,
            max_length,
            format,
        } => {
            put("type", json!("string"));
            if let Some(n) = min_length {
                put("minLength", json!(n));
            }
            if let Some(n) = max_length {
                put("maxLength", json!(n));
            }
            if let Some(f) = format {
                put("format", json!(f));
            }
        }
        FieldKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            put("type", json!(if *integer { "integer" } else { "number" }));
            if let Some(n) = minimum {
                put("minimum", Value::Number(n.clone()));
            }
            if let Some(n) = maximum {
                put("maximum", Value::Number(n.clone()));
            }
        }
        FieldKind::Boolean => put("type", json!("boolean")),
        FieldKind::SingleSelect { options } => {
            put("type", json!("string"));
            put(
                "enum",
                Value::Array(options.iter().map(|o| json!(o.value)).collect()),
            );
        }
        FieldKind::MultiSelect {
            options,
            min_items,
            max_items,
        } => {
            put("type", json!("array"));
            put(
                "items",
                json!({"type": "string", "enum": options.iter().map(|o| json!(o.value)).collect::<Vec<_>>()}),
            );
            // A multi-select picks each option at most once.
            put("uniqueItems", json!(true));
            if let Some(n) = min_items {
                put("minItems", json!(n));
            }
            if let Some(n) = max_items {
                put("maxItems", json!(n));
            }
        }
    }
    Value::Object(out)
}

/// Check a form `requestedSchema` against the primitive subset.
#[cfg(test)]
pub fn check_form_schema(schema: &Value) -> Result<FormSchema, GateError> {
    check_measured(schema).map(|(checked, _)| checked)
}

/// The same, with the length of the schema's canonical JSON (the text its digest covers).
fn check_measured(schema: &Value) -> Result<(FormSchema, usize), GateError> {
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
        return Err(bad("more than 128 properties"));
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
                    crate::json::bounded(name, 64)
                )));
            }
            if !required.insert(name) {
                return Err(bad("`required` repeats a name"));
            }
        }
    }
    let mut fields = Vec::with_capacity(props.len());
    for (name, prop) in props {
        if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            return Err(bad(
                "property names must be 1 to 128 bytes without control characters",
            ));
        }
        fields.push(field(name, prop, required.contains(name.as_str()))?);
    }
    fields.sort_by(|a, b| a.name.cmp(&b.name));
    let text = canonical::to_canonical(schema);
    let checked = FormSchema {
        schema_sha256: digest::sha256_hex(text.as_bytes()),
        fields,
    };
    Ok((checked, text.len()))
}

/// FNV-1a (a word at a time) over a value's structure: types, keys, strings and numbers as stored (an integer
/// and a float with the same value differ, as they do to `==`). Equal values always have
/// equal fingerprints except for floats `0.0` and `-0.0`, which only costs a miss.
fn fingerprint(value: &Value) -> u64 {
    fn mix(h: &mut u64, bytes: &[u8]) {
        // Eight bytes a step (the last chunk zero-padded; lengths are mixed in separately).
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            for (w, b) in word.iter_mut().zip(chunk) {
                *w = *b;
            }
            *h ^= u64::from_le_bytes(word);
            *h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn walk(h: &mut u64, value: &Value) {
        match value {
            Value::Null => mix(h, b"n"),
            Value::Bool(b) => mix(h, if *b { b"t" } else { b"f" }),
            Value::Number(n) => {
                if let Some(u) = n.as_u64().filter(|_| n.is_u64()) {
                    mix(h, b"u");
                    mix(h, &u.to_le_bytes());
                } else if let Some(i) = n.as_i64() {
                    mix(h, b"i");
                    mix(h, &i.to_le_bytes());
                } else {
                    mix(h, b"d");
                    mix(h, &n.as_f64().unwrap_or(0.0).to_bits().to_le_bytes());
                }
            }
            Value::String(s) => {
                mix(h, b"s");
                mix(h, &s.len().to_le_bytes());
                mix(h, s.as_bytes());
            }
            Value::Array(items) => {
                mix(h, b"a");
                mix(h, &items.len().to_le_bytes());
                for item in items {
                    walk(h, item);
                }
            }
            Value::Object(map) => {
                mix(h, b"o");
                mix(h, &map.len().to_le_bytes());
                for (k, v) in map {
                    mix(h, &k.len().to_le_bytes());
                    mix(h, k.as_bytes());
                    walk(h, v);
                }
            }
        }
    }
    let mut h = 0xcbf2_9ce4_8422_2325;
    walk(&mut h, value);
    h
}

/// How many checked schemas a [`SchemaCache`] keeps.
pub const SCHEMA_CACHE_ENTRIES: usize = 8;
/// How many fingerprints of schemas seen once a [`SchemaCache`] remembers.
const SEEN_ONCE_ENTRIES: usize = 32;
/// The largest schema a [`SchemaCache`] keeps, in bytes of its canonical JSON.
pub const SCHEMA_CACHE_MAX_BYTES: usize = 4096;

/// Form schemas already checked, remembered by value: a server that asks for the same form
/// round after round has it checked and hashed once. The check is a pure function of the
/// schema's value and an entry is used only for an equal value (`1` and `1.0` are different
/// values here, as they are to the check), so the cache never changes a verdict. Refusals are
/// not kept, and a schema is kept from its second acceptance on. Bounded: at most
/// [`SCHEMA_CACHE_ENTRIES`] schemas, each at most [`SCHEMA_CACHE_MAX_BYTES`] of canonical
/// JSON; the oldest goes first.
#[derive(Debug, Default)]
pub struct SchemaCache {
    /// (fingerprint, the schema's value, its verdict), oldest first.
    entries: std::collections::VecDeque<(u64, Value, FormSchema)>,
    /// Fingerprints of schemas accepted once and not kept: a schema is kept the second time
    /// it is seen, so a server whose every schema is new pays no copies for the cache.
    seen_once: std::collections::VecDeque<u64>,
}

impl SchemaCache {
    /// [`check_form_schema`], answered from the cache when this value was accepted before.
    pub fn check(&mut self, schema: &Value) -> Result<FormSchema, GateError> {
        // The fingerprint only narrows the search (one walk instead of one comparison per
        // entry); an entry answers only for a value equal to the one it was checked for.
        let print = fingerprint(schema);
        let known = self
            .entries
            .iter()
            .find(|(p, value, _)| *p == print && value == schema);
        if let Some((_, _, checked)) = known {
            return Ok(checked.clone());
        }
        let (checked, canonical_len) = check_measured(schema)?;
        if canonical_len > SCHEMA_CACHE_MAX_BYTES {
            return Ok(checked);
        }
        if let Some(at) = self.seen_once.iter().position(|p| *p == print) {
            self.seen_once.remove(at);
            if self.entries.len() >= SCHEMA_CACHE_ENTRIES {
                self.entries.pop_front();
            }
            self.entries
                .push_back((print, schema.clone(), checked.clone()));
        } else {
            if self.seen_once.len() >= SEEN_ONCE_ENTRIES {
                self.seen_once.pop_front();
            }
            self.seen_once.push_back(print);
        }
        Ok(checked)
    }

    /// How many schemas are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none is.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_field(max_length: Value) -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": max_length}}})
    }

    #[test]
    fn the_schema_cache_gives_the_checks_own_verdicts() {
        let mut cache = SchemaCache::default();
        let good = one_field(json!(5));
        let first = cache.check(&good);
        assert_eq!(first, check_form_schema(&good));
        assert!(first.is_ok());
        assert!(cache.is_empty(), "kept from the second acceptance on");
        assert_eq!(cache.check(&good), first);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.check(&good), first, "a hit is the same verdict");
        // `1.0` is not `1` to the check (a count must be an integer), nor to the cache.
        let one = one_field(json!(1));
        let one_point_zero = one_field(json!(1.0));
        for _ in 0..2 {
            assert!(cache.check(&one).is_ok());
        }
        assert_eq!(cache.len(), 2);
        for _ in 0..2 {
            assert!(cache.check(&one_point_zero).is_err());
        }
        assert!(check_form_schema(&one_point_zero).is_err());
        // Refusals are not kept.
        assert_eq!(cache.len(), 2);
        for _ in 0..2 {
            assert!(cache.check(&json!({"type": "object"})).is_err());
        }
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn the_schema_cache_is_bounded() {
        let mut cache = SchemaCache::default();
        for n in 0..(SCHEMA_CACHE_ENTRIES as u64 * 3) {
            for _ in 0..2 {
                assert!(cache.check(&one_field(json!(n + 1))).is_ok());
            }
            assert!(cache.len() <= SCHEMA_CACHE_ENTRIES);
        }
        assert_eq!(cache.len(), SCHEMA_CACHE_ENTRIES);
        // Schemas seen once are not kept, however many pass.
        let mut cache = SchemaCache::default();
        for n in 0..1000 {
            assert!(cache.check(&one_field(json!(n + 1))).is_ok());
        }
        assert!(cache.is_empty());
        // A schema over the size bound is checked but not kept.
        let long = "x".repeat(SCHEMA_CACHE_MAX_BYTES);
        let big = json!({"type": "object", "title": long,
            "properties": {"name": {"type": "string"}}});
        for _ in 0..3 {
            assert!(cache.check(&big).is_ok());
        }
        assert!(cache.is_empty());
    }

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
    fn refuses_everything_outside_the_subset() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "#/defs/x"}}}),
            json!({"$ref": "#", "type": "object", "properties": {}}),
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^a$"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}),
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
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
