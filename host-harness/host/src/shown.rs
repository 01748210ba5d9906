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
