//! Reading JSON text exactly. A client's `requestState` must come back as the same string,
//! and the strings this module compares may hold lone surrogates (a server that cut a
//! JavaScript string), which `serde_json` refuses to decode into a `String`. So members are
//! found as raw text ([`RawValue`] keeps it) and strings are decoded here into UTF-16 code
//! units, the unit JSON's `\u` escapes name, lone surrogates kept.

use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// The raw text of the member at `path` (object keys, outermost first), if every step is an
/// object holding the next key. A duplicated key yields the last one, as most parsers do.
pub fn raw_member<'a>(text: &'a str, path: &[&str]) -> Option<&'a str> {
    let mut current = text;
    for key in path {
        let members: BTreeMap<String, &'a RawValue> = serde_json::from_str(current).ok()?;
        current = members.get(*key)?.get();
    }
    Some(current)
}

/// The UTF-16 code units of a JSON string token (`"…"`, quotes included), escapes decoded
/// and lone surrogates kept; `None` when the text is not one string token.
pub fn decode_string(token: &str) -> Option<Vec<u16>> {
    let inner = token.trim().strip_prefix('"')?.strip_suffix('"')?;
    let mut units = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return None,
            '\\' => {
                let unit = match chars.next()? {
                    '"' => u16::from(b'"'),
                    '\\' => u16::from(b'\\'),
                    '/' => u16::from(b'/'),
                    'b' => 0x08,
                    'f' => 0x0c,
                    'n' => u16::from(b'\n'),
                    'r' => u16::from(b'\r'),
                    't' => u16::from(b'\t'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        if hex.len() != 4 {
                            return None;
                        }
                        u16::from_str_radix(&hex, 16).ok()?
                    }
                    _ => return None,
                };
                units.push(unit);
            }
            c if u32::from(c) < 0x20 => return None,
            c => {
                let mut buffer = [0u16; 2];
                units.extend_from_slice(c.encode_utf16(&mut buffer));
            }
        }
    }
    Some(units)
}

/// The string as a person can read it in a report: JSON-escaped, with a lone surrogate
/// written `\uD83D` so it is visible rather than replaced.
pub fn show_units(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok(c) => match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if u32::from(c) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                    out.push_str(&format!("\\u{:04x}", u32::from(c)));
                }
                c => out.push(c),
            },
            Err(e) => out.push_str(&format!("\\u{:04X}", e.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

/// `text` with every `\uXXXX` escape of a lone surrogate replaced by `\ufffd`, so that the
/// rest of a body holding one can still be read as a [`serde_json::Value`]. Only for
/// matching members other than the exact strings; those are read with [`decode_string`].
pub fn lossy_surrogates(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_string = false;
    let unit_at = |at: usize| -> Option<u16> {
        let escape = bytes.get(at..at + 6)?;
        if escape.first() != Some(&b'\\') || escape.get(1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(escape.get(2..)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    };
    while let Some(&b) = bytes.get(i) {
        if in_string && b == b'\\' {
            if let Some(unit) = unit_at(i) {
                let high = (0xD800..0xDC00).contains(&unit);
                let low = (0xDC00..0xE000).contains(&unit);
                let paired = high && unit_at(i + 6).is_some_and(|u| (0xDC00..0xE000).contains(&u));
                if paired {
                    out.push_str(text.get(i..i + 12).unwrap_or_default());
                    i += 12;
                    continue;
                }
                if high || low {
                    out.push_str("\\ufffd");
                    i += 6;
                    continue;
                }
            }
            out.push_str(text.get(i..i + 2).unwrap_or_default());
            i += 2;
            continue;
        }
        if b == b'"' {
            in_string = !in_string;
        }
        let width = text
            .get(i..)
            .and_then(|rest| rest.chars().next())
            .map_or(1, char::len_utf8);
        out.push_str(text.get(i..i + width).unwrap_or_default());
        i += width;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_is_kept_as_its_unit() {
        let units = decode_string(r#""\u00e9A\ud83d x\u2028\/\"\\""#);
        let expected: Vec<u16> = vec![0xe9, 0x41, 0xd83d, 0x20, 0x78, 0x2028, 0x2f, 0x22, 0x5c];
        assert_eq!(units, Some(expected));
    }

    #[test]
    fn escaped_and_raw_forms_of_one_string_decode_alike() {
        assert_eq!(
            decode_string(r#""\u00e9\ud83e\udd80""#),
            decode_string("\"é🦀\"")
        );
        assert_eq!(decode_string(r#""a"b""#), None);
        assert_eq!(decode_string(r#""\x""#), None);
    }

    #[test]
    fn members_are_found_through_lone_surrogates() {
        let body = r#"{"id":3,"params":{"name":"t","requestState":"\ud83d!"}}"#;
        assert_eq!(
            raw_member(body, &["params", "requestState"]),
            Some(r#""\ud83d!""#)
        );
        assert_eq!(raw_member(body, &["params", "absent"]), None);
        let lossy = lossy_surrogates(body);
        assert!(serde_json::from_str::<serde_json::Value>(&lossy).is_ok());
        assert_eq!(
            lossy_surrogates(r#"["\ud83e\udd80","\\ud83d"]"#),
            r#"["\ud83e\udd80","\\ud83d"]"#
        );
    }

    #[test]
    fn shown_strings_make_surrogates_visible() {
        assert_eq!(show_units(&[0x41, 0xd83d, 0x22]), r#""A\uD83D\"""#);
    }
}
