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
