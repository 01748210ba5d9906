//! Strict JSON parsing for everything that crosses the trust boundary.
//!
//! serde_json's `Value` silently keeps the last of two equal keys; another parser in the
//! client may keep the first. That difference lets a server show the user one value and act
//! on another, so duplicate keys are refused here, anywhere in the document. Size, nesting
//! depth and node count are bounded before anything else looks at the input.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;

/// Bounds applied to one document.
#[derive(Clone, Copy, Debug)]
pub struct JsonLimits {
    /// Largest document, in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of arrays and objects.
    pub max_depth: usize,
    /// Most values (scalars, arrays, objects) in the document.
    pub max_nodes: usize,
}

/// Why a document was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON (or trailing data, or a lone surrogate).
    Syntax(String),
    /// A key appeared twice in one object.
    DuplicateKey(String),
    /// Too many bytes, too deep, or too many values.
    Limit(String),
}

struct Budget {
    depth_left: Cell<usize>,
    nodes_left: Cell<usize>,
    max_depth: usize,
    max_nodes: usize,
}

const DUPLICATE_MARK: &str = "\u{0}mrtr-duplicate-key:";
const LIMIT_MARK: &str = "\u{0}mrtr-limit:";

impl Budget {
    fn take_node<E: de::Error>(&self) -> Result<(), E> {
        let left = self.nodes_left.get();
        if left == 0 {
            return Err(E::custom(format!(
                "{LIMIT_MARK}more than {} json values",
                self.max_nodes
            )));
        }
        self.nodes_left.set(left - 1);
        Ok(())
    }

    fn enter<E: de::Error>(&self) -> Result<(), E> {
        let left = self.depth_left.get();
        if left == 0 {
            return Err(E::custom(format!(
                "{LIMIT_MARK}json nested deeper than {}",
                self.max_depth
            )));
        }
        self.depth_left.set(left - 1);
        Ok(())
    }

    fn leave(&self) {
        self.depth_left.set(self.depth_left.get().saturating_add(1));
    }
}

struct Strict<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.take_node()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.take_node()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.take_node()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.take_node()?;
        // serde_json never yields a non-finite float from text, but stay total.
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.take_node()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.0.take_node()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.take_node()?;
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.take_node()?;
        self.0.enter()?;
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict(self.0))? {
            out.push(item);
        }
        self.0.leave();
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.take_node()?;
        self.0.enter()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE_MARK}{key}")));
            }
            let value = map.next_value_seed(Strict(self.0))?;
            out.insert(key, value);
        }
        self.0.leave();
        Ok(Value::Object(out))
    }
}

/// Parse `text` as one JSON document under `limits`, refusing duplicate keys.
pub fn parse_strict(text: &str, limits: JsonLimits) -> Result<Value, JsonError> {
    if text.len() > limits.max_bytes {
        return Err(JsonError::Limit(format!(
            "document of {} bytes is over {} bytes",
            text.len(),
            limits.max_bytes
        )));
    }
    let budget = Budget {
        depth_left: Cell::new(limits.max_depth),
        nodes_left: Cell::new(limits.max_nodes),
        max_depth: limits.max_depth,
        max_nodes: limits.max_nodes,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    // Our own depth bound is far below serde_json's, so its recursion guard stays on as a backstop.
    let value = Strict(&budget)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| classify(&e))
}

fn classify(e: &serde_json::Error) -> JsonError {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix(DUPLICATE_MARK) {
        // serde_json appends " at line L column C"; keep the key only, bounded.
        let key = rest.rsplit_once(" at line ").map_or(rest, |(k, _)| k);
        return JsonError::DuplicateKey(quoted(key));
    }
    if let Some(rest) = text.strip_prefix(LIMIT_MARK) {
        let what = rest.rsplit_once(" at line ").map_or(rest, |(k, _)| k);
        return JsonError::Limit(what.to_owned());
    }
    JsonError::Syntax(bounded(&text, QUOTED_SYNTAX_CHARS))
}

/// The first key of `obj` outside `allowed`, if any: the one check behind every "only these
/// keys" rule of the gate (JSON-RPC envelopes, input requests, answers, schemas).
pub(crate) fn unexpected_key<'a>(
    obj: &'a serde_json::Map<String, Value>,
    allowed: &[&str],
) -> Option<&'a str> {
    obj.keys()
        .map(String::as_str)
        .find(|k| !allowed.contains(k))
}

/// Ok when `obj` has no key outside `allowed`; otherwise a message naming the first
/// unexpected key (bounded) of the object called `what`.
pub(crate) fn only_keys(
    obj: &serde_json::Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Result<(), String> {
    match unexpected_key(obj, allowed) {
        None => Ok(()),
        Some(k) => Err(format!(
            "`{what}` carries the unexpected field `{}`",
            quoted(k)
        )),
    }
}

/// The most characters of a key, name or method from the peer or the caller that a message
/// quotes.
pub(crate) const QUOTED_CHARS: usize = 64;

/// The most characters of a JSON parser's own message kept in a denial.
const QUOTED_SYNTAX_CHARS: usize = 120;

/// `s` as a message quotes it: at most [`QUOTED_CHARS`] characters.
pub(crate) fn quoted(s: &str) -> String {
    bounded(s, QUOTED_CHARS)
}

/// At most `max` characters of `s`, for messages (never for decisions).
pub fn bounded(s: &str, max: usize) -> String {
    let mut out: String = s.chars().take(max).collect();
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: JsonLimits = JsonLimits {
        max_bytes: 4096,
        max_depth: 8,
        max_nodes: 100,
    };

    #[test]
    fn refuses_duplicate_keys_at_any_depth() {
        assert_eq!(
            parse_strict(r#"{"a":1,"a":2}"#, L),
            Err(JsonError::DuplicateKey("a".into()))
        );
        assert!(matches!(
            parse_strict(r#"{"x":[{"resultType":"complete","resultType":"input_required"}]}"#, L),
            Err(JsonError::DuplicateKey(k)) if k == "resultType"
        ));
        // Escaped spellings of one key are one key.
        assert!(matches!(
            parse_strict(r#"{"a":1,"\u0061":2}"#, L),
            Err(JsonError::DuplicateKey(_))
        ));
    }

    #[test]
    fn bounds_depth_nodes_and_bytes() {
        let deep = "[".repeat(9) + &"]".repeat(9);
        assert!(matches!(parse_strict(&deep, L), Err(JsonError::Limit(_))));
        let ok = "[".repeat(8) + &"]".repeat(8);
        assert!(parse_strict(&ok, L).is_ok());
        let many = format!("[{}]", vec!["1"; 100].join(","));
        assert!(matches!(parse_strict(&many, L), Err(JsonError::Limit(_))));
        let big = format!("\"{}\"", "a".repeat(5000));
        assert!(matches!(parse_strict(&big, L), Err(JsonError::Limit(_))));
    }

    #[test]
    fn refuses_garbage_trailing_data_and_lone_surrogates() {
        for bad in [
            "",
            "{",
            "{} {}",
            "nul",
            "\"\\ud800\"",
            "[1,]",
            "{'a':1}",
            "NaN",
        ] {
            assert!(
                matches!(parse_strict(bad, L), Err(JsonError::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn deep_hostile_input_does_not_overflow_the_stack() {
        let hostile = "[".repeat(200_000);
        let limits = JsonLimits {
            max_bytes: 1 << 20,
            max_depth: 64,
            max_nodes: 1 << 20,
        };
        assert!(parse_strict(&hostile, limits).is_err());
    }
}
