//! Strict JSON parsing for everything that crosses the trust boundary.
//!
//! serde_json's `Value` silently keeps the last of two equal keys; another parser in the
//! client may keep the first. That difference lets a server show the user one value and act
//! on another, so duplicate keys are refused here, anywhere in the document. Size, nesting
//! depth and node count are bounded before anything else looks at the input.
//!
//! Numbers keep their source text (serde_json's `arbitrary_precision`): the canonical writer
//! ([`crate::canonical`]) and the schema subset read their exact value, never a double.
//! What the gate does not decide on (a complete result's content) is read with
//! [`parse_members`]: checked for syntax, kept as text, not bounded but by the message size.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::cell::Cell;
use std::collections::BTreeMap;
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

    fn too_deep<E: de::Error>(&self) -> E {
        E::custom(format!(
            "{LIMIT_MARK}json nested deeper than {}",
            self.max_depth
        ))
    }

    fn enter<E: de::Error>(&self) -> Result<(), E> {
        let left = self.depth_left.get();
        if left == 0 {
            return Err(self.too_deep());
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
        // A number also arrives here (below); it takes no depth, so the depth is taken
        // only once the map is known to be an object.
        let at_floor = self.0.depth_left.get() == 0;
        if !at_floor {
            self.0.enter()?;
        }
        let mut out = Map::new();
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            let value = if first && key == NUMBER_TOKEN {
                // serde_json hands each number over as a one-member map under this key
                // (its `arbitrary_precision` form, which keeps the number's text): the
                // member's value then comes as an owned string, which a string in the
                // document never does. An object with this key in the document stays one.
                match map.next_value_seed(NumberOrValue(self.0))? {
                    Either::Number(text) => {
                        if !at_floor {
                            self.0.leave();
                        }
                        return number(&text);
                    }
                    Either::Value(_) if at_floor => return Err(self.0.too_deep()),
                    Either::Value(v) => v,
                }
            } else {
                if at_floor {
                    return Err(self.0.too_deep());
                }
                if out.contains_key(&key) {
                    return Err(de::Error::custom(format!("{DUPLICATE_MARK}{key}")));
                }
                map.next_value_seed(Strict(self.0))?
            };
            first = false;
            out.insert(key, value);
        }
        if at_floor {
            return Err(self.0.too_deep());
        }
        self.0.leave();
        Ok(Value::Object(out))
    }
}

/// The key under which serde_json (with `arbitrary_precision`) passes a number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A number from its text, refused when its value cannot be held exactly
/// ([`canonical::MAX_EXPONENT_DIGITS`](crate::canonical::MAX_EXPONENT_DIGITS)).
fn number<E: de::Error>(text: &str) -> Result<Value, E> {
    if !crate::canonical::exponent_fits(text) {
        return Err(E::custom(format!(
            "{LIMIT_MARK}a number whose exponent has more than {} digits",
            crate::canonical::MAX_EXPONENT_DIGITS
        )));
    }
    text.parse::<serde_json::Number>()
        .map(Value::Number)
        .map_err(|_| E::custom("not a json number"))
}

enum Either {
    Number(String),
    Value(Value),
}

/// The value of the member under [`NUMBER_TOKEN`]: a number's text when serde_json's number
/// map yields it (an owned string), any other value as [`Strict`] reads it.
struct NumberOrValue<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for NumberOrValue<'_> {
    type Value = Either;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Either, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NumberOrValue<'_> {
    type Value = Either;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json value")
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Either, E> {
        Ok(Either::Number(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Either, E> {
        Strict(self.0).visit_bool(v).map(Either::Value)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Either, E> {
        Strict(self.0).visit_i64(v).map(Either::Value)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Either, E> {
        Strict(self.0).visit_u64(v).map(Either::Value)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Either, E> {
        Strict(self.0).visit_f64(v).map(Either::Value)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Either, E> {
        Strict(self.0).visit_str(v).map(Either::Value)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Either, E> {
        Strict(self.0).visit_unit().map(Either::Value)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Either, A::Error> {
        Strict(self.0).visit_seq(seq).map(Either::Value)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Either, A::Error> {
        Strict(self.0).visit_map(map).map(Either::Value)
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
    if text.contains("surrogate") || text.contains("hex escape") {
        // JavaScript servers cut strings mid-emoji; say so rather than quote the parser.
        return JsonError::Syntax(format!(
            "a lone surrogate escape (such as \\ud83d) in a string the gate reads ({})",
            bounded(&text, QUOTED_SYNTAX_CHARS)
        ));
    }
    JsonError::Syntax(bounded(&text, QUOTED_SYNTAX_CHARS))
}

/// Why [`parse_members`] refused text that is not an object.
pub const NOT_AN_OBJECT: &str = "not a json object";

/// The members of the JSON object `text`, each value kept as its source text: checked for
/// syntax (any depth, any string escape, lone surrogates included), not decoded. What the
/// gate reads of a message whose content it does not decide on; a key given twice is
/// refused, at this level only.
pub fn parse_members(
    text: &str,
    max_bytes: usize,
) -> Result<BTreeMap<String, &RawValue>, JsonError> {
    if text.len() > max_bytes {
        return Err(JsonError::Limit(format!(
            "message of {} bytes is over {} bytes",
            text.len(),
            max_bytes
        )));
    }
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(JsonError::Syntax(NOT_AN_OBJECT.into()));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let members = de::Deserializer::deserialize_map(&mut de, MembersVisitor)
        .and_then(|m| de.end().map(|()| m));
    members.map_err(|e| classify(&e))
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = BTreeMap<String, &'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE_MARK}{key}")));
            }
            let value: &'de RawValue = map.next_value()?;
            out.insert(key, value);
        }
        Ok(out)
    }
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
    fn numbers_keep_their_text_and_take_no_depth() {
        let v = parse_strict("[9007199254740993,1.0,-0,1E400,0.10000000000000001]", L);
        let texts: Vec<String> = v
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_number().unwrap().as_str().to_owned())
            .collect();
        // serde_json writes an exponent as `e` with its sign: the same value.
        assert_eq!(
            texts,
            [
                "9007199254740993",
                "1.0",
                "-0",
                "1e+400",
                "0.10000000000000001"
            ]
        );
        // A number at the deepest level allowed, inside arrays and objects.
        let ok = "[".repeat(8) + "1" + &"]".repeat(8);
        assert!(parse_strict(&ok, L).is_ok());
        let ok = r#"{"a":"#.repeat(8) + "1" + &"}".repeat(8);
        assert!(parse_strict(&ok, L).is_ok());
        let deep = r#"{"a":"#.repeat(8) + "{}" + &"}".repeat(8);
        assert!(matches!(parse_strict(&deep, L), Err(JsonError::Limit(_))));
        let deep =
            r#"{"a":"#.repeat(8) + r#"{"$serde_json::private::Number":"1"}"# + &"}".repeat(8);
        assert!(matches!(parse_strict(&deep, L), Err(JsonError::Limit(_))));
        assert!(matches!(
            parse_strict("[1e1000000000000000]", L),
            Err(JsonError::Limit(_))
        ));
        assert!(parse_strict("[1e000000000000000000000001]", L).is_ok());
    }

    /// serde_json passes a number as a map under its private key: a document object with that
    /// key is still an object, never a number.
    #[test]
    fn an_object_with_serde_jsons_number_key_stays_an_object() {
        for text in [
            r#"{"$serde_json::private::Number":"5"}"#,
            r#"{"$serde_json::private::Number":5}"#,
            r#"{"$serde_json::private::Number":"5","b":1}"#,
            r#"{"$serde_json::private::Number":"5"}"#,
            r#"{"$serde_json::private::Number":{"$serde_json::private::Number":"7"}}"#,
        ] {
            let v = parse_strict(text, L).unwrap();
            // (serde_json's own `Value` reader takes the first ones for numbers.)
            assert!(v.is_object(), "{text}");
        }
        assert!(matches!(
            parse_strict(
                r#"{"$serde_json::private::Number":"5","$serde_json::private::Number":1}"#,
                L
            ),
            Err(JsonError::DuplicateKey(_))
        ));
    }

    #[test]
    fn members_are_read_as_text_and_checked_at_their_level_only() {
        let text = r#" {"a":{"x":1,"x":"\ud83d"},"b":[[[[[[[[[[[[1]]]]]]]]]]]],"c":"\udc00"} "#;
        let m = parse_members(text, 1 << 10).unwrap();
        assert_eq!(m.get("a").map(|r| r.get()), Some(r#"{"x":1,"x":"\ud83d"}"#));
        assert_eq!(m.get("c").map(|r| r.get()), Some(r#""\udc00""#));
        assert!(matches!(
            parse_members(r#"{"a":1,"\u0061":2}"#, 64),
            Err(JsonError::DuplicateKey(_))
        ));
        assert!(matches!(
            parse_members(&format!("{{\"a\":\"{}\"}}", "x".repeat(64)), 64),
            Err(JsonError::Limit(_))
        ));
        for bad in [
            "[1]",
            "1",
            "",
            "{",
            r#"{"a":}"#,
            r#"{"a":1} x"#,
            r#"{"a":"\x"}"#,
            r#"{"a":[1,]}"#,
        ] {
            assert!(
                matches!(parse_members(bad, 64), Err(JsonError::Syntax(_))),
                "{bad}"
            );
        }
        // Nesting is checked without recursion: no depth bound, and no stack overflow.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_members(&deep, 1 << 20).is_ok());
        let hostile = format!("{{\"a\":{}", "[".repeat(500_000));
        assert!(matches!(
            parse_members(&hostile, 1 << 20),
            Err(JsonError::Syntax(_))
        ));
    }

    #[test]
    fn a_lone_surrogate_is_named_where_the_gate_reads_strings() {
        for text in [r#""\ud83d""#, r#""\ud83d x""#, r#""\udc00""#] {
            match parse_strict(text, L) {
                Err(JsonError::Syntax(why)) => assert!(why.contains("lone surrogate"), "{why}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(parse_strict(r#""\ud83d\ude00""#, L).is_ok());
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
