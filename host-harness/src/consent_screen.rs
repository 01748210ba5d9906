//! The consent screen as text: what a person is shown before the gate asks for a receipt
//! (the consent view of a round, and the answers about to be sent). [`TerminalConsent`]
//! prints it; a client with a dialog can use it as the reference of what to show.
//!
//! [`TerminalConsent`]: crate::reference_hosts::TerminalConsent

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use serde_json::Value;
use std::fmt::Write as _;

/// A name the server picked (an input key, a field name, an answer's key) as the screen
/// shows it: in double quotes, with `"` and `\\` escaped and every character that is not a
/// letter, a digit, printable ASCII or a space written as `\u{…}`. The spec allows any
/// string as a key, so a key must not be able to close its quotes, start a line, reorder
/// the text around it (bidi controls) or hide (zero-width characters): whatever it holds,
/// it reads as one quoted name.
pub fn shown_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c == ' ' || c.is_ascii_graphic() || (!c.is_ascii() && c.is_alphanumeric()) => {
                out.push(c)
            }
            c => {
                let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Render a consent view (its canonical JSON) as a person would see it on a consent screen.
pub fn render_view(view_json: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(view_json) else {
        return "  (unreadable consent view: refuse)".into();
    };
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  ┌─ consent ─────────────────────────────────────────────"
    );
    let _ = writeln!(out, "  │ server   {}", s("/server"));
    let _ = writeln!(
        out,
        "  │ request  {} `{}` (round {} of at most {})",
        s("/request/method"),
        s("/request/name"),
        v["round"],
        v["max_rounds"]
    );
    // What the tool or prompt will do with what the user gives it: the arguments as
    // registered, or their size when they are too large to show.
    if let Some(Value::Object(a)) = v.pointer("/request/arguments") {
        match a.get("value") {
            Some(Value::Null) | None => {
                let _ = writeln!(
                    out,
                    "  │ arguments ({} bytes, too large to show; params sha256 {})",
                    a.get("bytes").unwrap_or(&Value::Null),
                    s("/request/params_sha256")
                );
            }
            Some(value) => {
                let _ = writeln!(out, "  │ arguments {value}");
            }
        }
    }
    for input in v["inputs"].as_array().into_iter().flatten() {
        let key = shown_name(input["key"].as_str().unwrap_or("?"));
        let message = input["message"].as_str().unwrap_or("");
        match input["kind"].as_str() {
            Some("form") => {
                let _ = writeln!(out, "  │ [{key}] form: {message}");
                for f in input["fields"].as_array().into_iter().flatten() {
                    let mut constraints = Vec::new();
                    for c in [
                        "min_length",
                        "max_length",
                        "format",
                        "minimum",
                        "maximum",
                        "min_items",
                        "max_items",
                    ] {
                        if let Some(x) = f.get(c) {
                            constraints.push(format!("{c}={x}"));
                        }
                    }
                    if let Some(opts) = f["options"].as_array() {
                        let names: Vec<String> = opts
                            .iter()
                            .map(|o| o["value"].as_str().unwrap_or("?").to_owned())
                            .collect();
                        constraints.push(format!("options={}", names.join("|")));
                    }
                    let _ = writeln!(
                        out,
                        "  │     {}{} ({}) {}{}",
                        shown_name(f["name"].as_str().unwrap_or("?")),
                        if f["required"].as_bool() == Some(true) {
                            "*"
                        } else {
                            ""
                        },
                        if f["integer"] == true {
                            "integer"
                        } else {
                            f["type"].as_str().unwrap_or("?")
                        },
                        f["title"].as_str().unwrap_or(""),
                        if constraints.is_empty() {
                            String::new()
                        } else {
                            format!(" [{}]", constraints.join(", "))
                        }
                    );
                    if let Some(d) = f["description"].as_str() {
                        let _ = writeln!(out, "  │         {d}");
                    }
                }
            }
            Some("url") => {
                let _ = writeln!(out, "  │ [{key}] open a page: {message}");
                let _ = writeln!(
                    out,
                    "  │     url      {}",
                    input["url"]["full"].as_str().unwrap_or("?")
                );
                let _ = writeln!(
                    out,
                    "  │     host     {} (shown as {})",
                    input["url"]["ascii_host"].as_str().unwrap_or("?"),
                    input["url"]["unicode_host"].as_str().unwrap_or("?")
                );
                if let Some(w) = input["url"]["warnings"]
                    .as_array()
                    .filter(|w| !w.is_empty())
                {
                    let _ = writeln!(out, "  │     WARNING  {}", Value::Array(w.clone()));
                }
            }
            Some(kind) => {
                let _ = writeln!(out, "  │ [{key}] {kind} (deprecated request)");
            }
            None => {}
        }
    }
    if v["state"]["present"].as_bool() == Some(true) {
        let _ = writeln!(
            out,
            "  │ state    {} bytes, sha256 {}…",
            v["state"]["bytes"],
            &s("/state/sha256").chars().take(16).collect::<String>()
        );
    }
    for e in v["effects"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  │ effect   {}", e.as_str().unwrap_or(""));
    }
    let _ = write!(
        out,
        "  └───────────────────────────────────────────────────────"
    );
    out
}

/// Render the answers the client is about to send.
pub fn render_answers(responses_json: &str) -> String {
    match serde_json::from_str::<Value>(responses_json) {
        Ok(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| format!("    {}: {v}", shown_name(k)))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => "    (unreadable)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shown_quoted_and_escaped() {
        assert_eq!(shown_name("github:login"), "\"github:login\"");
        assert_eq!(shown_name("名前"), "\"名前\"");
        assert_eq!(shown_name("a\"] form: b"), "\"a\\\"] form: b\"");
        assert_eq!(shown_name("a\\b"), "\"a\\\\b\"");
        assert_eq!(shown_name("a\u{202E}b"), "\"a\\u{202e}b\"");
        assert_eq!(shown_name("a\u{200B}\nb"), "\"a\\u{200b}\\u{000a}b\"");
        assert_eq!(shown_name("a\u{1F600}"), "\"a\\u{1f600}\"");
    }

    #[test]
    fn a_key_cannot_fake_screen_content() {
        let key = "x\"] form: pay\n  \u{2502} server   https://bank.example\u{202E}";
        let view = serde_json::json!({
            "server": "https://evil.example",
            "request": {"method": "tools/call", "name": "t"},
            "round": 1,
            "max_rounds": 10,
            "inputs": [{"key": key, "kind": "form", "message": "m", "fields": [{"name": key, "type": "string", "required": false}]}],
            "state": {"present": false},
            "effects": [],
        });
        let screen = render_view(&view.to_string());
        // Every line the key appears on starts as the renderer wrote it, and the key stays
        // one quoted, escaped token.
        let starts = |p: &str| screen.lines().filter(|l| l.starts_with(p)).count();
        assert_eq!(starts("  \u{2502} server"), 1);
        assert_eq!(starts("  \u{2502} ["), 1);
        assert!(!screen.contains('\u{202E}'));
        assert!(screen.contains(&shown_name(key)));
        let answers = render_answers(&serde_json::json!({key: {"action": "accept"}}).to_string());
        assert_eq!(answers.lines().count(), 1);
        assert!(answers.starts_with(&format!("    {}: ", shown_name(key))));
    }
}
