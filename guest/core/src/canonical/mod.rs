//! Canonical JSON (RFC 8785, JCS): the text every digest of the gate is taken over
//! ([`crate::digest`]), so any host in any language can recompute one: keys sorted by UTF-16
//! code units, no insignificant white space, strings escaped minimally, numbers in the
//! layout of ECMAScript's `Number.prototype.toString`, exact (`number`: one text per value,
//! where JCS would give two values one text beyond a double's precision).

use serde_json::Value;

mod number;

pub(crate) use number::{
    Decimal, MAX_EXPONENT_DIGITS, exponent_fits, write_i64, write_i64_exact, write_number,
    write_u64, write_u64_digits,
};

/// The canonical JSON text of `value`.
pub fn to_canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// `value`'s canonical JSON text but for its numbers, each written with the digits and signs
/// its source text had (`1.0`, `-0`, `12345678901234567890123` as they came; an exponent as
/// serde_json's exact numbers write it, `e` and its sign: `1E2` as `1e+2`). What the gate sends a
/// server of a client's params: the canonical layout writes an integer past 21 digits with an
/// exponent, which the official Python SDK server reads as a float, so a value the gate
/// compares as equal would reach the tool as another. The same keys in the same order as
/// [`to_canonical`], so [`CanonicalObject`] reads either.
pub fn to_sent_form(value: &Value) -> String {
    let mut out = String::new();
    write_value_with(&mut out, value, write_number_as_sent);
    out
}

/// A number as its source text (serde_json's arbitrary precision keeps it).
fn write_number_as_sent(out: &mut String, n: &serde_json::Number) {
    out.push_str(n.as_str());
}

/// The text of the top-level member `key` of `object`, canonical JSON text this crate wrote
/// (the registered params): found by one scan of the bytes, with nothing parsed or allocated
/// (the consent view shows a request's `arguments` every round). None when `object` is not
/// an object or has no such member. A property test holds it to [`CanonicalObject::member`].
pub(crate) fn top_level_member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    let mut wanted = String::with_capacity(key.len().saturating_add(2));
    write_string(&mut wanted, key);
    let bytes = object.as_bytes();
    if bytes.first() != Some(&b'{') {
        return None;
    }
    let mut at = 1;
    while bytes.get(at) == Some(&b'"') {
        let key_end = string_end(bytes, at)?;
        let key_text = object.get(at..key_end)?;
        if bytes.get(key_end) != Some(&b':') {
            return None;
        }
        let value_start = key_end.saturating_add(1);
        let value_end = value_end(bytes, value_start)?;
        if key_text == wanted {
            return object.get(value_start..value_end);
        }
        match bytes.get(value_end) {
            Some(b',') => at = value_end.saturating_add(1),
            _ => return None,
        }
    }
    None
}

/// The position just after the JSON string that starts at `start` (its opening quote).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start.saturating_add(1);
    loop {
        match bytes.get(at)? {
            b'\\' => at = at.saturating_add(2),
            b'"' => return Some(at.saturating_add(1)),
            _ => at = at.saturating_add(1),
        }
    }
}

/// The position of the `,` or `}` that ends the member value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = start;
    loop {
        match bytes.get(at)? {
            b'"' => {
                at = string_end(bytes, at)?;
                continue;
            }
            b'{' | b'[' => depth = depth.saturating_add(1),
            b'}' | b']' if depth > 0 => depth -= 1,
            b',' | b'}' if depth == 0 => return Some(at),
            _ => {}
        }
        at = at.saturating_add(1);
    }
}

/// The members of an object whose text is already canonical JSON, in their order, the values
/// kept as text: a retry adds two members to the registered params without parsing them
/// into values and writing them out again.
pub struct CanonicalObject<'a> {
    members: Vec<(String, &'a serde_json::value::RawValue)>,
}

impl<'a> CanonicalObject<'a> {
    /// The members of `text`, which must be canonical JSON (its values are copied as they
    /// are); none unless it is an object whose keys are in canonical order, each once.
    pub fn parse(text: &'a str) -> Option<Self> {
        let Members(members) = serde_json::from_str(text).ok()?;
        let ordered = members.windows(2).all(|pair| match pair {
            [(a, _), (b, _)] => a.encode_utf16().cmp(b.encode_utf16()).is_lt(),
            _ => true,
        });
        ordered.then_some(Self { members })
    }

    /// The members, in order: each key with its value's canonical text.
    pub(crate) fn members(&self) -> impl Iterator<Item = (&str, &'a str)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v.get()))
    }

    /// The text of the member `key`, when the object has one.
    pub fn member(&self, key: &str) -> Option<&'a str> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.get())
    }

    /// The canonical text of the object with `extra` members (each value canonical JSON
    /// text) added; none when an extra key is already there or given twice.
    pub fn with(&self, extra: &[(&str, &str)]) -> Option<String> {
        let mut extra = extra.to_vec();
        extra.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        let given_twice = extra.windows(2).any(|pair| match pair {
            [(a, _), (b, _)] => a == b,
            _ => false,
        });
        if given_twice {
            return None;
        }
        let len = self
            .members
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4);
        let len = len.chain(extra.iter().map(|(k, v)| k.len() + v.len() + 4));
        let mut out = String::with_capacity(len.sum::<usize>().saturating_add(2));
        out.push('{');
        let mut mine = self.members.iter().peekable();
        let mut theirs = extra.iter().peekable();
        let mut first = true;
        loop {
            let next = match (mine.peek(), theirs.peek()) {
                (Some((a, _)), Some((b, _))) => match a.encode_utf16().cmp(b.encode_utf16()) {
                    std::cmp::Ordering::Less => mine.next().map(|(k, v)| (k.as_str(), v.get())),
                    std::cmp::Ordering::Greater => theirs.next().copied(),
                    std::cmp::Ordering::Equal => return None,
                },
                (Some(_), None) => mine.next().map(|(k, v)| (k.as_str(), v.get())),
                (None, Some(_)) => theirs.next().copied(),
                (None, None) => None,
            };
            let Some((key, value)) = next else { break };
            if !first {
                out.push(',');
            }
            first = false;
            write_string(&mut out, key);
            out.push(':');
            out.push_str(value);
        }
        out.push('}');
        Some(out)
    }
}

/// An object's members in document order (a map type would reorder them).
struct Members<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a json object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Append the canonical JSON text of `value`.
pub fn write_value(out: &mut String, value: &Value) {
    write_value_with(out, value, write_number);
}

/// The canonical layout, each number written by `number`.
fn write_value_with(out: &mut String, value: &Value, number: fn(&mut String, &serde_json::Number)) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value_with(out, item, number);
            }
            out.push(']');
        }
        Value::Object(map) if in_utf16_order(map) => {
            write_entries(out, map.iter(), number);
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            write_entries(out, entries.into_iter(), number);
        }
    }
}

fn write_entries<'a>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    number: fn(&mut String, &serde_json::Number),
) {
    out.push('{');
    for (i, (key, item)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_value_with(out, item, number);
    }
    out.push('}');
}

/// True when the map already iterates in JCS order (UTF-16 code units), so no sort is
/// needed: keys strictly increasing by code point (how serde_json's default map iterates;
/// checked rather than assumed, since a feature elsewhere may make it keep insertion
/// order), and no key holds a character at or above U+E000 (the only range where code
/// point order and UTF-16 order differ).
fn in_utf16_order(map: &serde_json::Map<String, Value>) -> bool {
    let mut prev: Option<&str> = None;
    for key in map.keys() {
        // U+E000 and above start with a byte of 0xEE or more in UTF-8.
        if key.bytes().any(|b| b >= 0xee) || prev.is_some_and(|p| p >= key.as_str()) {
            return false;
        }
        prev = Some(key);
    }
    true
}

/// A JSON string with JCS escaping: `"` and `\\`, and control characters below U+0020
/// (the short forms where JSON has them, `\u00xx` with lowercase hex otherwise).
pub fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len().saturating_add(2));
    out.push('"');
    // Every byte that needs an escape is ASCII, and no byte of a multi-byte UTF-8 sequence
    // is ASCII, so scanning bytes finds exactly the characters to escape; the runs in
    // between are copied in one go (and most strings are one run).
    let bytes = s.as_bytes();
    let mut run_start = 0;
    while let Some(at) = next_escape(bytes, run_start) {
        out.push_str(s.get(run_start..at).unwrap_or_default());
        match bytes.get(at).copied().unwrap_or(b' ') {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x09 => out.push_str("\\t"),
            0x0a => out.push_str("\\n"),
            0x0c => out.push_str("\\f"),
            0x0d => out.push_str("\\r"),
            b => {
                out.push_str("\\u00");
                out.push(char::from(
                    HEX_DIGITS.get(usize::from(b >> 4)).copied().unwrap_or(b'0'),
                ));
                out.push(char::from(
                    HEX_DIGITS
                        .get(usize::from(b & 0x0f))
                        .copied()
                        .unwrap_or(b'0'),
                ));
            }
        }
        run_start = at.saturating_add(1);
    }
    out.push_str(s.get(run_start..).unwrap_or_default());
    out.push('"');
}

/// The position of the first byte at or after `from` that needs an escape. Eight bytes are
/// tested at once where none does (a byte loop was a large share of a round inside wasm).
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut words = rest.chunks_exact(8);
    let mut offset = 0usize;
    for word in words.by_ref() {
        let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        if word_needs_escape(w) {
            break;
        }
        offset = offset.saturating_add(8);
    }
    rest.get(offset..)?
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .map(|p| from.saturating_add(offset).saturating_add(p))
}

pub(crate) const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Does any of the eight bytes of `w` need an escape (below 0x20, `"` or `\\`)? Exact:
/// the classic "has a zero byte" test, `(v - 0x01..) & !v & 0x80..`, never errs on whether
/// some byte matches (only on which one, which is not asked).
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS != 0;
    let below_space = w.wrapping_sub(ONES.wrapping_mul(0x20)) & !w & HIGHS != 0;
    below_space
        || has_zero(w ^ ONES.wrapping_mul(u64::from(b'"')))
        || has_zero(w ^ ONES.wrapping_mul(u64::from(b'\\')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::{
        bytes_equal, digest, digest_str, is_sha256_hex, sha256_hex, text_sha256_hex,
    };
    use serde_json::json;

    fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\"\\\\{}\\[\\],:é😀\u{1}]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("arguments".to_owned()),
                        Just("argument".to_owned()),
                        "[a-z\"{},:]{0,6}"
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The byte scan finds exactly the member the parse finds, in any canonical object.
        #[test]
        fn top_level_member_is_the_parsed_member(
            members in proptest::collection::btree_map(
                proptest::prop_oneof![
                    proptest::strategy::Just("arguments".to_owned()),
                    proptest::strategy::Just("_meta".to_owned()),
                    "[a-z\"{},:]{0,6}"
                ],
                arb_value(),
                0..5,
            ),
            key in proptest::prop_oneof![
                proptest::strategy::Just("arguments".to_owned()),
                "[a-z\"{},:]{0,6}"
            ],
        ) {
            let text = to_canonical(&Value::Object(members.into_iter().collect()));
            let parsed = CanonicalObject::parse(&text).and_then(|o| o.member(&key));
            proptest::prop_assert_eq!(top_level_member(&text, &key), parsed);
        }
    }

    #[test]
    fn top_level_member_refuses_what_is_not_an_object() {
        assert_eq!(top_level_member("[1]", "a"), None);
        assert_eq!(top_level_member("", "a"), None);
        assert_eq!(top_level_member("{\"a\":", "a"), None);
        assert_eq!(
            top_level_member("{\"a\":{\"b\":1}}", "a"),
            Some("{\"b\":1}")
        );
        assert_eq!(top_level_member("{\"a\":{\"b\":1}}", "b"), None);
    }

    #[test]
    fn members_are_added_in_canonical_order_and_collisions_refused() {
        let members = CanonicalObject::parse(r#"{"_meta":{"a":1},"arguments":{},"name":"t"}"#);
        let added = members
            .as_ref()
            .and_then(|m| m.with(&[("requestState", r#""s""#), ("inputResponses", "{}")]));
        assert_eq!(
            added.as_deref(),
            Some(
                r#"{"_meta":{"a":1},"arguments":{},"inputResponses":{},"name":"t","requestState":"s"}"#
            )
        );
        let again = members.as_ref().and_then(|m| m.with(&[("name", "1")]));
        assert_eq!(again, None, "a key already there");
        let twice = members
            .as_ref()
            .and_then(|m| m.with(&[("x", "1"), ("x", "2")]));
        assert_eq!(twice, None, "a key given twice");
        assert_eq!(
            CanonicalObject::parse("{}").and_then(|m| m.with(&[])),
            Some("{}".into())
        );
    }

    #[test]
    fn only_objects_with_keys_in_canonical_order_are_read() {
        for text in [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            "[1]",
            "\"{}\"",
            "{",
            "",
            r#"{"a":1}x"#,
            // Code point order, not UTF-16 order: U+10000 (a surrogate pair, from 0xD800)
            // sorts before U+FFFF in UTF-16 units.
            "{\"\u{ffff}\":2,\"\u{10000}\":1}",
        ] {
            assert!(CanonicalObject::parse(text).is_none(), "{text}");
        }
        assert!(CanonicalObject::parse("{\"\u{10000}\":1,\"\u{ffff}\":2}").is_some());
    }

    fn num(text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        to_canonical(&v)
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // Vectors from RFC 8785 appendix B and ECMAScript.
        assert_eq!(num("0"), "0");
        assert_eq!(num("-0.0"), "0");
        assert_eq!(num("1.0"), "1");
        assert_eq!(num("1e21"), "1e+21");
        assert_eq!(num("1e20"), "100000000000000000000");
        assert_eq!(num("123456789012345680000"), "123456789012345680000");
        assert_eq!(num("0.000001"), "0.000001");
        assert_eq!(num("0.0000001"), "1e-7");
        assert_eq!(num("1.5e-7"), "1.5e-7");
        assert_eq!(num("4.50"), "4.5");
        assert_eq!(num("2e-3"), "0.002");
        assert_eq!(num("1.7976931348623157e308"), "1.7976931348623157e+308");
        assert_eq!(num("5e-324"), "5e-324");
        assert_eq!(num("-9007199254740992"), "-9007199254740992");
        assert_eq!(num("333333333.3333333"), "333333333.3333333");
        assert_eq!(num("1E2"), "100");
        assert_eq!(num("10e-1"), "1");
        assert_eq!(num("-0"), "0");
        assert_eq!(num("-0e5"), "0");
        assert_eq!(num("0.0e-7"), "0");
        assert_eq!(num("-1.25e-7"), "-1.25e-7");
        assert_eq!(
            num("00.5e1").as_str(),
            "null",
            "not json: the reader refuses it"
        );
    }

    /// Where JCS's text (the nearest double's shortest digits) would denote another value,
    /// the canonical text is the exact value in the same layout.
    #[test]
    fn numbers_no_double_holds_keep_their_exact_value() {
        assert_eq!(num("9007199254740993"), "9007199254740993");
        assert_eq!(num("-9007199254740993"), "-9007199254740993");
        assert_eq!(num("333333333.33333329"), "333333333.33333329");
        assert_eq!(num("0.10000000000000001"), "0.10000000000000001");
        assert_eq!(
            num("0.1234567890123456789012345678901234567890"),
            "0.123456789012345678901234567890123456789"
        );
        assert_eq!(num("1e400"), "1e+400");
        assert_eq!(num("-1.5E-400"), "-1.5e-400");
        assert_eq!(
            num("123456789012345678901234567890"),
            "1.2345678901234567890123456789e+29"
        );
        assert_eq!(num("18446744073709551617"), "18446744073709551617");
        assert_eq!(num("1e000000000000000000000002"), "100");
    }

    /// One value, one text; two values, two texts (and so two digests).
    #[test]
    fn number_texts_collide_only_for_equal_values() {
        let texts = [
            "9007199254740992",
            "9007199254740993",
            "9.007199254740993e15",
            "0.1",
            "0.10000000000000001",
            "1",
            "1.0",
            "10e-1",
            "100e-2",
            "-0",
            "0",
            "0e10",
            "1e400",
            "1e401",
            "10e399",
            "-1",
            "-1.0",
            "1.5",
            "15e-1",
            "0.000001",
            "1e-6",
            "1e-7",
            "1e21",
            "1000000000000000000000",
            "1e20",
        ];
        for a in texts {
            for b in texts {
                let (x, y) = (Decimal::parse(a).unwrap(), Decimal::parse(b).unwrap());
                let same = x.cmp_value(&y).is_eq();
                assert_eq!(num(a) == num(b), same, "{a} vs {b}");
                assert_eq!(x == y, same, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn decimals_order_and_integrality_are_exact() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let d = |s: &str| Decimal::parse(s).unwrap();
        for (a, b, want) in [
            ("9007199254740993", "9007199254740992", Greater),
            ("-9007199254740993", "-9007199254740992", Less),
            ("0.30000000000000001", "0.3", Greater),
            ("-0", "0", Equal),
            ("1e400", "1e399", Greater),
            ("-1e400", "1e-400", Less),
            ("12", "123", Less),
            ("0.12", "0.123", Less),
            ("1.0", "1", Equal),
            ("-2", "-10", Greater),
        ] {
            assert_eq!(d(a).cmp_value(&d(b)), want, "{a} vs {b}");
            assert_eq!(d(b).cmp_value(&d(a)), want.reverse(), "{b} vs {a}");
        }
        for (s, int) in [
            ("1.0", true),
            ("1e2", true),
            ("1.5e1", true),
            ("1.25e1", false),
            ("1.0000000000000001", false),
            ("0", true),
            ("-0.0", true),
            ("123456789012345678901234567890", true),
            ("1e-400", false),
        ] {
            assert_eq!(d(s).is_integer(), int, "{s}");
        }
        for bad in [
            "",
            "-",
            "01",
            "1.",
            ".5",
            "1e",
            "1e+",
            "+1",
            "1e1234567890123456",
        ] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
        for (text, fits) in [
            ("1", true),
            ("1e123456789012345", true),
            ("1E-0000123456789012345", true),
            ("1e1234567890123456", false),
            ("-2.5e+1234567890123456", false),
        ] {
            assert_eq!(exponent_fits(text), fits, "{text}");
            assert_eq!(Decimal::parse(text).is_some(), fits, "{text}");
        }
    }

    #[test]
    fn keys_sort_by_utf16_and_strings_escape_minimally() {
        let v = json!({"\u{20ac}": 1, "\r": 2, "\u{1f600}": 3, "1": 4, "\u{80}": 5, "\u{fb33}": 6});
        assert_eq!(
            to_canonical(&v),
            "{\"\\r\":2,\"1\":4,\"\u{80}\":5,\"\u{20ac}\":1,\"\u{1f600}\":3,\"\u{fb33}\":6}"
        );
        assert_eq!(
            to_canonical(&json!("a\u{1}\u{7f}/\"")),
            "\"a\\u0001\u{7f}/\\\"\""
        );
    }

    #[test]
    fn digest_of_string_matches_value_digest() {
        assert_eq!(digest_str("st\"ate"), digest(&json!("st\"ate")));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = "x".repeat(300);
        assert_eq!(text_sha256_hex(&long), sha256_hex(long.as_bytes()));
    }

    /// What the `digest` import may answer: exactly 64 lowercase hex digits (anything else is
    /// taken as no answer, and the guest hashes itself).
    #[test]
    fn a_digest_is_64_lowercase_hex_digits_and_nothing_else() {
        assert!(is_sha256_hex(&sha256_hex(b"abc")));
        let bad = [
            String::new(),
            "0".repeat(63),
            "0".repeat(65),
            "A".repeat(64),
            "g".repeat(64),
            format!(" {}", "0".repeat(63)),
            format!("{}\n", "0".repeat(63)),
            "\u{e9}".repeat(32),
            "\u{661}".repeat(32),
        ];
        for s in bad {
            assert!(!is_sha256_hex(&s), "{s:?}");
        }
    }

    /// The reference: always sort by UTF-16.
    fn sorted(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                let inner: Vec<String> = entries
                    .into_iter()
                    .map(|(k, v)| {
                        format!("{}:{}", to_canonical(&Value::String(k.clone())), sorted(v))
                    })
                    .collect();
                format!("{{{}}}", inner.join(","))
            }
            Value::Array(items) => format!(
                "[{}]",
                items.iter().map(sorted).collect::<Vec<_>>().join(",")
            ),
            other => to_canonical(other),
        }
    }

    proptest::proptest! {
        #[test]
        fn object_order_matches_a_full_utf16_sort(
            keys in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "Z", "é", "\u{e000}", "\u{ffff}", "\u{10000}", "\u{1f600}", "ab", ""]),
                0..8,
            )
        ) {
            let mut inner = serde_json::Map::new();
            for (i, k) in keys.iter().enumerate() {
                inner.insert((*k).to_owned(), json!(i));
            }
            let v = json!({"outer": Value::Object(inner.clone()), "\u{f000}": [Value::Object(inner)]});
            proptest::prop_assert_eq!(to_canonical(&v), sorted(&v));
        }
    }

    proptest::proptest! {
        #[test]
        fn integers_are_written_as_serde_json_writes_them_within_2_pow_53(i in -(1i64 << 53)..=(1i64 << 53)) {
            let mut out = String::new();
            write_i64(&mut out, i);
            proptest::prop_assert_eq!(out, i.to_string());
        }
    }

    #[test]
    fn integer_edges() {
        for (i, text) in [
            (0, "0"),
            (-1, "-1"),
            (1 << 53, "9007199254740992"),
            (-(1 << 53), "-9007199254740992"),
            ((1 << 53) + 1, "9007199254740993"),
            (i64::MAX, "9223372036854775807"),
            (i64::MIN, "-9223372036854775808"),
        ] {
            let mut out = String::new();
            write_i64(&mut out, i);
            assert_eq!(out, text, "{i}");
            assert_eq!(num(&i.to_string()), text, "{i} through a Value");
        }
        let mut out = String::new();
        write_u64_digits(&mut out, u64::MAX);
        assert_eq!(out, u64::MAX.to_string());
    }

    #[test]
    fn the_word_test_agrees_with_a_byte_test_on_every_byte_in_every_lane() {
        let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        for lane in 0..8 {
            for b in 0..=255u8 {
                for filler in [b'a', 0x7f, 0x80, 0xff, 0x21, 0x5d] {
                    let mut word = [filler; 8];
                    word[lane] = b;
                    let expected = word.iter().any(|&x| needs(x));
                    assert_eq!(
                        word_needs_escape(u64::from_le_bytes(word)),
                        expected,
                        "{word:?}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn bytes_equal_is_slice_equality(a in proptest::collection::vec(0u8..4, 0..40), flip in 0usize..40) {
            let mut b = a.clone();
            proptest::prop_assert!(bytes_equal(&a, &b));
            if let Some(x) = b.get_mut(flip) {
                *x ^= 1;
            }
            proptest::prop_assert_eq!(bytes_equal(&a, &b), a == b);
            b.push(0);
            proptest::prop_assert!(!bytes_equal(&a, &b));
        }
    }

    proptest::proptest! {
        /// Strings round-trip, and come out exactly as serde_json writes them (whose string
        /// escaping is JCS's: `"`, `\\`, short forms, `\\u00xx` lowercase, nothing else).
        #[test]
        fn strings_round_trip_and_match_serde_json(s in "(\\PC|[\\x00-\\x1f\"\\\\\\x7f])*") {
            let mut out = String::new();
            write_string(&mut out, &s);
            proptest::prop_assert_eq!(serde_json::from_str::<String>(&out).ok(), Some(s.clone()));
            proptest::prop_assert_eq!(out, serde_json::to_string(&s).unwrap_or_default());
        }
    }
}
