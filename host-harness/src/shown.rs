//! Server text as a screen shows it. Whatever a server writes (a message, a title, an option,
//! a URL, an error, a line on its stderr) reaches a person only through [`shown_text`] or
//! [`shown_json`]: a control character could move the cursor, clear or repaint the screen,
//! or hide a hyperlink (ANSI/OSC sequences); a bidi control could reorder the text around it;
//! an invisible character could make two strings look alike. Each is written visibly as
//! `\u{…}` instead, and a backslash as two, so the rendering is exact and cannot be faked.
//!
//! The same rules are implemented for the Python and JavaScript packages
//! (`mrtr_gate.shown_text`, `shownText` from `mrtr-gate/shown`); the three are held to one
//! set of vectors, `tests/screen/shown_text.json`.

use std::fmt::Write as _;

/// True for a character a screen must not show as it is: the controls (C0, DEL, C1), the
/// line and paragraph separators, the bidi controls, and the characters that render as
/// nothing or act on their neighbours (zero-width characters, fillers, variation selectors,
/// tag characters, other format characters). The list, with the reason for each range, is
/// in `tests/screen/shown_text.json`.
pub fn hidden_or_control(c: char) -> bool {
    // The core's list (what an input key may not hold) plus the prefixed number signs and
    // other format characters that act on their neighbours when shown.
    mrtr_gate_core::hidden_or_control(c)
        || matches!(
            c,
            '\u{0600}'..='\u{0605}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
}

/// `text` as a screen shows it: a backslash as `\\`, every [`hidden_or_control`] character
/// as `\u{h}` (lowercase hex, at least four digits), the rest as it is. Newlines included:
/// a server's text is one line on the screen, so it cannot start a line that passes for the
/// screen's own.
pub fn shown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if hidden_or_control(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// A JSON value as a screen shows it: its compact JSON text with every [`hidden_or_control`]
/// character that JSON leaves raw (DEL, C1, bidi, invisible) written as `\u{h}`. Backslashes
/// are not doubled: in JSON text a backslash already only starts an escape, and `\u{` is
/// never one of JSON's, so the rendering stays exact.
pub fn shown_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden_or_control(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value as JSON text for machines (`--json` output) that a terminal still shows
/// honestly: every [`hidden_or_control`] character is written as a JSON `\uXXXX` escape
/// (a pair for one beyond U+FFFF), so the text holds none of them raw and parses to the
/// same value.
pub fn json_for_terminal(value: &serde_json::Value) -> String {
    json_text_for_terminal(&value.to_string())
}

/// [`json_for_terminal`] for JSON text already written (pretty-printed, say). In valid
/// JSON text these characters stand only inside strings, where the escape means the same.
pub fn json_text_for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden_or_control(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Text of several lines (a tool's text result) as a screen shows it: each line through
/// [`shown_text`], the line breaks (`\n`, and `\r\n` as one) kept.
pub fn shown_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| shown_text(line.strip_suffix('\r').unwrap_or(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn vectors() -> Value {
        serde_json::from_str(include_str!("../../tests/screen/shown_text.json"))
            .unwrap_or(Value::Null)
    }

    fn ranges() -> Vec<(u32, u32)> {
        vectors()["escaped"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let hex = |i: usize| {
                    r.get(i)
                        .and_then(Value::as_str)
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                };
                Some((hex(0)?, hex(1)?))
            })
            .collect()
    }

    #[test]
    fn every_code_point_is_escaped_exactly_when_the_shared_vectors_say() {
        let ranges = ranges();
        assert!(ranges.len() > 20, "the vectors' ranges were read");
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let listed = ranges.iter().any(|&(a, b)| (a..=b).contains(&u32::from(c)));
            assert_eq!(hidden_or_control(c), listed, "U+{:04X}", u32::from(c));
            let shown = shown_text(&c.to_string());
            if listed {
                assert_eq!(shown, format!("\\u{{{:04x}}}", u32::from(c)));
            } else if c != '\\' {
                assert_eq!(shown, c.to_string());
            }
        }
    }

    #[test]
    fn the_shared_cases_are_shown_as_the_vectors_say() {
        let v = vectors();
        let cases = v["cases"].as_array().cloned().unwrap_or_default();
        assert!(cases.len() > 10, "the vectors' cases were read");
        for case in cases {
            let text = case["text"].as_str().unwrap_or_default();
            assert_eq!(
                shown_text(text),
                case["shown"].as_str().unwrap_or_default(),
                "{}",
                case["name"]
            );
        }
    }

    /// Undo [`shown_text`] (what a person reading the screen can do): proves it exact.
    fn unshown(shown: &str) -> Option<String> {
        let mut out = String::new();
        let mut rest = shown;
        while let Some(at) = rest.find('\\') {
            out.push_str(rest.get(..at)?);
            rest = rest.get(at..)?;
            if let Some(r) = rest.strip_prefix("\\\\") {
                out.push('\\');
                rest = r;
            } else {
                let r = rest.strip_prefix("\\u{")?;
                let end = r.find('}')?;
                out.push(char::from_u32(
                    u32::from_str_radix(r.get(..end)?, 16).ok()?,
                )?);
                rest = r.get(end + 1..)?;
            }
        }
        out.push_str(rest);
        Some(out)
    }

    #[test]
    fn hostile_text_never_reaches_the_screen_raw_and_reads_back_exactly() {
        // Strings drawn from the dangerous ranges, their neighbours, backslashes, braces
        // and ordinary text, by a fixed-seed generator (the same run every time).
        let alphabet: Vec<char> = ranges()
            .iter()
            .flat_map(|&(a, b)| [a, b, a.saturating_sub(1), b + 1, (a + b) / 2])
            .filter_map(char::from_u32)
            .chain("\\u{}ab 名😀\u{1b}[".chars())
            .collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % n.max(1)
        };
        for _ in 0..20_000 {
            let len = next(24);
            let text: String = (0..len)
                .filter_map(|_| alphabet.get(next(alphabet.len())).copied())
                .collect();
            let shown = shown_text(&text);
            assert!(
                !shown.chars().any(hidden_or_control),
                "{text:?} -> {shown:?}"
            );
            assert_eq!(unshown(&shown).as_deref(), Some(text.as_str()), "{text:?}");
            let lines = shown_lines(&text);
            assert!(!lines.chars().any(|c| c != '\n' && hidden_or_control(c)));
            let json = Value::String(text.clone());
            assert!(!shown_json(&json).chars().any(hidden_or_control));
            let for_terminal = json_for_terminal(&json);
            assert!(!for_terminal.chars().any(hidden_or_control));
            assert_eq!(
                serde_json::from_str::<Value>(&for_terminal).ok(),
                Some(json)
            );
        }
    }

    #[test]
    fn json_keeps_its_own_escapes_and_marks_the_rest() {
        let v = serde_json::json!({"a\u{202e}": ["x\ny", "\u{9b}2J", "\\"]});
        assert_eq!(
            shown_json(&v),
            "{\"a\\u{202e}\":[\"x\\ny\",\"\\u{009b}2J\",\"\\\\\"]}"
        );
        assert_eq!(
            json_for_terminal(&v),
            "{\"a\\u202e\":[\"x\\ny\",\"\\u009b2J\",\"\\\\\"]}"
        );
        assert_eq!(shown_lines("a\r\nb\u{1b}[2J\n"), "a\nb\\u{001b}[2J\n");
    }
}
