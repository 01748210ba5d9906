//! The user's answers against an accepted schema: the fields are the compiled schema, so
//! content is checked against them directly, with no schema compiler in the sandbox.

use super::{FieldKind, FormSchema};
use crate::canonical::Decimal;
use crate::error::{CallerMisuse, GateError};
use serde_json::Value;
#[cfg(test)]
use serde_json::{Map, json};
use std::collections::BTreeSet;

/// The exact order of two numbers (any size, any fraction: a bound of `9007199254740993`
/// is not the double `9007199254740992`); none for text no JSON parser yields.
fn number_cmp(a: &serde_json::Number, b: &serde_json::Number) -> Option<std::cmp::Ordering> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return Some(x.cmp(&y));
    }
    Some(Decimal::of(a)?.cmp_value(&Decimal::of(b)?))
}

/// Is the number's exact value an integer (`1.0` and `1e2` are; `1.0000000000000001` is
/// not, though its double is)?
fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || Decimal::of(n).is_some_and(|d| d.is_integer())
}

/// The longest name or bound a [`SchemaMismatch`] quotes, in characters: names are the
/// server's text, and a denial's message must stay short enough to show.
const MAX_QUOTED_CHARS: usize = 64;

/// The rule of a requested schema that an answer broke, as the denial names it (the bound is
/// the schema's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken<'a> {
    /// The content is not an object.
    NotAnObject,
    /// A field the schema does not have (the user was never shown it).
    NotInSchema,
    /// A required field is missing.
    Required,
    /// A text field got something else.
    NotText,
    /// Text shorter than `minLength`.
    FewerCharacters(u64),
    /// Text longer than `maxLength`.
    MoreCharacters(u64),
    /// Text not in the field's `format`.
    NotFormat(&'a str),
    /// A number field got something else.
    NotANumber,
    /// An integer field got a fraction.
    NotWhole,
    /// A number under `minimum`.
    Below(&'a serde_json::Number),
    /// A number over `maximum`.
    Above(&'a serde_json::Number),
    /// A yes/no field got something else.
    NotABoolean,
    /// A single select got something that is not one of its options.
    NotAnOption,
    /// A multi-select got something that is not a list of its options.
    NotOptions,
    /// Fewer choices than `minItems`.
    FewerChoices(u64),
    /// More choices than `maxItems`.
    MoreChoices(u64),
    /// An option chosen twice.
    RepeatedChoice,
}

impl std::fmt::Display for Broken<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAnObject => f.write_str("must be an object of fields"),
            Self::NotInSchema => f.write_str("not in the schema"),
            Self::Required => f.write_str("required"),
            Self::NotText => f.write_str("must be text"),
            Self::FewerCharacters(n) => write!(f, "at least {n} characters"),
            Self::MoreCharacters(n) => write!(f, "at most {n} characters"),
            Self::NotFormat(format) => {
                f.write_str("must be a valid ")?;
                quoted(f, format)
            }
            Self::NotANumber => f.write_str("must be a number"),
            Self::NotWhole => f.write_str("must be a whole number"),
            Self::Below(m) => {
                f.write_str("at least ")?;
                quoted(f, &m.to_string())
            }
            Self::Above(m) => {
                f.write_str("at most ")?;
                quoted(f, &m.to_string())
            }
            Self::NotABoolean => f.write_str("must be true or false"),
            Self::NotAnOption => f.write_str("must be one of its options"),
            Self::NotOptions => f.write_str("must be a list of its options"),
            Self::FewerChoices(n) => write!(f, "at least {n} choices"),
            Self::MoreChoices(n) => write!(f, "at most {n} choices"),
            Self::RepeatedChoice => f.write_str("each option at most once"),
        }
    }
}

/// `text`, cut to [`MAX_QUOTED_CHARS`] (a cut marked with `…`).
fn quoted(f: &mut std::fmt::Formatter<'_>, text: &str) -> std::fmt::Result {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((at, _)) => {
            f.write_str(text.get(..at).unwrap_or_default())?;
            f.write_str("…")
        }
        None => f.write_str(text),
    }
}

/// Why accepted form content was refused: the input, the field (none when the content as a
/// whole is wrong) and the rule it broke. For the person who answered: the message quotes
/// the server's names (cut to a bounded length; hosts escape them where shown), the audit
/// trail keeps only the code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaMismatch {
    /// The input key.
    pub key: String,
    /// The field, when one field is to blame.
    pub field: Option<String>,
    /// The rule broken, in words (its bound included).
    pub rule: String,
}

impl std::fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the content for `")?;
        quoted(f, &self.key)?;
        f.write_str("` does not match its requested schema: ")?;
        if let Some(field) = &self.field {
            f.write_str("`")?;
            quoted(f, field)?;
            f.write_str("`: ")?;
        }
        f.write_str(&self.rule)
    }
}

impl FieldKind {
    /// Does `value` fit this field?
    pub fn accepts(&self, value: &Value) -> bool {
        self.broken_by(value).is_none()
    }

    /// The first rule of this field `value` breaks, if any.
    #[inline]
    pub fn broken_by(&self, value: &Value) -> Option<Broken<'_>> {
        match self {
            Self::String {
                min_length,
                max_length,
                format,
            } => {
                let Some(s) = value.as_str() else {
                    return Some(Broken::NotText);
                };
                if min_length.is_some() || max_length.is_some() {
                    // JSON Schema counts code points.
                    let n = s.chars().count() as u64;
                    if let Some(m) = min_length.filter(|m| n < *m) {
                        return Some(Broken::FewerCharacters(m));
                    }
                    if let Some(m) = max_length.filter(|m| n > *m) {
                        return Some(Broken::MoreCharacters(m));
                    }
                }
                format
                    .as_deref()
                    .filter(|f| !crate::formats::check(f, s))
                    .map(Broken::NotFormat)
            }
            Self::Number {
                integer,
                minimum,
                maximum,
            } => {
                let Value::Number(n) = value else {
                    return Some(if *integer {
                        Broken::NotWhole
                    } else {
                        Broken::NotANumber
                    });
                };
                if *integer && !is_integer(n) {
                    return Some(Broken::NotWhole);
                }
                if let Some(m) = minimum
                    .as_ref()
                    .filter(|m| !number_cmp(n, m).is_some_and(std::cmp::Ordering::is_ge))
                {
                    return Some(Broken::Below(m));
                }
                maximum
                    .as_ref()
                    .filter(|m| !number_cmp(n, m).is_some_and(std::cmp::Ordering::is_le))
                    .map(Broken::Above)
            }
            Self::Boolean => (!value.is_boolean()).then_some(Broken::NotABoolean),
            Self::SingleSelect { options } => {
                let chosen = value
                    .as_str()
                    .is_some_and(|s| options.iter().any(|o| o.value == s));
                (!chosen).then_some(Broken::NotAnOption)
            }
            Self::MultiSelect {
                options,
                min_items,
                max_items,
            } => {
                let Some(items) = value.as_array() else {
                    return Some(Broken::NotOptions);
                };
                let n = items.len() as u64;
                if let Some(m) = min_items.filter(|m| n < *m) {
                    return Some(Broken::FewerChoices(m));
                }
                if let Some(m) = max_items.filter(|m| n > *m) {
                    return Some(Broken::MoreChoices(m));
                }
                let mut seen = BTreeSet::new();
                for item in items {
                    let Some(s) = item
                        .as_str()
                        .filter(|s| options.iter().any(|o| o.value == *s))
                    else {
                        return Some(Broken::NotOptions);
                    };
                    if !seen.insert(s) {
                        return Some(Broken::RepeatedChoice);
                    }
                }
                None
            }
        }
    }
}

impl FormSchema {
    /// Does `content` (an accepted form's answers) fit the schema: an object, every
    /// required field present, no field outside the schema, every value fitting its field?
    #[cfg(test)]
    pub fn validate(&self, content: &Value) -> bool {
        self.mismatch(content).is_none()
    }

    /// The first field of `content` that does not fit the schema (none when the content is
    /// not an object) and the rule it broke; none when the content fits.
    #[inline]
    pub fn mismatch<'a>(&'a self, content: &'a Value) -> Option<(Option<&'a str>, Broken<'a>)> {
        let Some(obj) = content.as_object() else {
            return Some((None, Broken::NotAnObject));
        };
        let known = |k: &String| {
            self.fields
                .binary_search_by(|f| f.name.as_str().cmp(k.as_str()))
                .is_ok()
        };
        if let Some(unknown) = obj.keys().find(|k| !known(k)) {
            return Some((Some(unknown.as_str()), Broken::NotInSchema));
        }
        self.fields.iter().find_map(|f| {
            let broken = match obj.get(&f.name) {
                None => f.required.then_some(Broken::Required),
                Some(v) => f.kind.broken_by(v),
            };
            broken.map(|b| (Some(f.name.as_str()), b))
        })
    }

    /// Validate accepted form `content` for input `key`: a refusal names the field and the
    /// rule it broke.
    pub fn check_content(&self, key: &str, content: &Value) -> Result<(), GateError> {
        match self.mismatch(content) {
            None => Ok(()),
            // Boxed: every `Result<_, GateError>` stays as small as before.
            Some((field, broken)) => Err(GateError::Caller(CallerMisuse::ResponseSchemaMismatch(
                Box::new(SchemaMismatch {
                    key: key.to_owned(),
                    field: field.map(str::to_owned),
                    rule: broken.to_string(),
                }),
            ))),
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
