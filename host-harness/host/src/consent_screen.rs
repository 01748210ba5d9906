//! The consent screen as text: what a person is shown before the gate asks for a receipt
//! (the consent view of a round, and the answers about to be sent). [`TerminalConsent`]
//! prints it; a client with a dialog can use it as the reference of what to show.
//!
//! [`TerminalConsent`]: crate::reference_hosts::TerminalConsent

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::shown::{shown_json, shown_text};
use mrtr_gate_core::{ConsentView, FieldKind, FormField, ViewInput};
use serde_json::Value;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

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

/// The most columns a line of the screen takes. A longer line is broken here rather than by
/// the terminal: a terminal's own wrap would start a visual line with whatever server text
/// falls there, and a server could pad its text so that a line reading `  │ server   …`
/// starts there. Lines this renderer breaks go on after [`CONTINUED`] instead.
pub const WIDTH: usize = 76;

/// How a broken line goes on: a dashed bar, never the frame's `│`, and indented, so no
/// continuation can pass for a line of the screen's own.
pub const CONTINUED: &str = "  ┆     ";

/// Columns a character may take: one below U+1100 (ASCII, Latin, Greek, Cyrillic, …) and
/// for the box drawing the frame is made of, two for everything else (wide CJK, emoji).
/// Counting a narrow one as two only breaks a line early.
fn columns(c: char) -> usize {
    if c < '\u{1100}' || ('\u{2500}'..='\u{257F}').contains(&c) {
        1
    } else {
        2
    }
}

/// `screen` with every line over [`WIDTH`] columns broken, the rest after [`CONTINUED`].
fn keep_to_width(screen: &str) -> String {
    let mut out = String::with_capacity(screen.len());
    for (i, line) in screen.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut used = 0;
        let mut limit = WIDTH;
        for c in line.chars() {
            if used + columns(c) > limit {
                out.push('\n');
                out.push_str(CONTINUED);
                used = CONTINUED.chars().map(columns).sum();
                limit = WIDTH;
            }
            out.push(c);
            used += columns(c);
        }
    }
    out
}

/// The consent view a host read last (the client, when the gate accepted the round), shared
/// with the consent screen of the same round: the screen renders that typed view when the
/// prompt carries the very same bytes, and reads the prompt's text only when it does not. So
/// a round's view is read once, whoever shows it.
#[derive(Clone, Debug, Default)]
pub struct LastView(Arc<Mutex<Option<ReadView>>>);

/// A view's text and the view read from it.
type ReadView = (String, Arc<ConsentView>);

impl LastView {
    /// Remember `view`, read from `view_json`.
    pub fn remember(&self, view_json: &str, view: Arc<ConsentView>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((view_json.to_owned(), view));
    }

    /// [`render_view_text`] of `view_json`, from the view remembered when it is of these bytes.
    pub fn render(&self, view_json: &str) -> (String, bool) {
        let known = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|(text, _)| text == view_json)
            .map(|(_, view)| Arc::clone(view));
        match known {
            Some(view) => (render_view(&view), true),
            None => {
                let (screen, view) = render_view_text(view_json);
                (screen, view.is_some())
            }
        }
    }
}

/// Render a consent view's text as a person would see it on a consent screen: the view read
/// once ([`ConsentView::parse`], strictly), then [`render_view`]; a text that is not a view
/// renders as a refusal (`None` with it: nothing may be granted on it).
pub fn render_view_text(view_json: &str) -> (String, Option<ConsentView>) {
    match ConsentView::parse(view_json) {
        Ok(view) => (render_view(&view), Some(view)),
        Err(_) => ("  (unreadable consent view: refuse)".into(), None),
    }
}

/// Render a consent view as a person would see it on a consent screen.
/// Every string in it is shown through [`shown_text`] (JSON values through [`shown_json`]).
pub fn render_view(v: &ConsentView) -> String {
    // Every string of the view reaches the screen through `shown_text`: the server picked
    // most of them, and a control or bidi character in one could repaint the lines around it.
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  ┌─ consent ─────────────────────────────────────────────"
    );
    let _ = writeln!(out, "  │ server   {}", shown_text(&v.server));
    let _ = writeln!(
        out,
        "  │ request  {} `{}` (round {} of at most {})",
        shown_text(&v.request.method),
        shown_text(&v.request.name),
        v.round,
        v.max_rounds
    );
    // What the tool or prompt will do with what the user gives it: the arguments as
    // registered, or their size when they are too large to show.
    if let Some(a) = &v.request.arguments {
        match &a.value {
            None => {
                let _ = writeln!(
                    out,
                    "  │ arguments ({} bytes, too large to show; params sha256 {})",
                    a.bytes,
                    shown_text(&v.request.params_sha256)
                );
            }
            Some(value) => {
                let _ = writeln!(out, "  │ arguments {}", shown_json(value));
            }
        }
    }
    for input in &v.inputs {
        let key = shown_name(input.key());
        match input {
            ViewInput::Form {
                message, fields, ..
            } => {
                let _ = writeln!(out, "  │ [{key}] form: {}", shown_text(message));
                for f in fields {
                    render_field(&mut out, f);
                }
            }
            ViewInput::Url { message, url, .. } => {
                let _ = writeln!(out, "  │ [{key}] open a page: {}", shown_text(message));
                let _ = writeln!(out, "  │     url      {}", shown_text(&url.full));
                let _ = writeln!(
                    out,
                    "  │     host     {} (shown as {})",
                    shown_text(&url.ascii_host),
                    shown_text(&url.unicode_host)
                );
                if !url.warnings.is_empty() {
                    let warnings = serde_json::to_value(&url.warnings).unwrap_or(Value::Null);
                    let _ = writeln!(out, "  │     WARNING  {}", shown_json(&warnings));
                }
            }
            ViewInput::Roots { .. } => {
                let _ = writeln!(out, "  │ [{key}] roots (deprecated request)");
            }
            ViewInput::Sampling { .. } => {
                let _ = writeln!(out, "  │ [{key}] sampling (deprecated request)");
            }
        }
    }
    if let (true, Some(bytes), Some(sha256)) = (v.state.present, v.state.bytes, &v.state.sha256) {
        let _ = writeln!(
            out,
            "  │ state    {bytes} bytes, sha256 {}…",
            &shown_text(sha256).chars().take(16).collect::<String>()
        );
    }
    for e in &v.effects {
        let _ = writeln!(out, "  │ effect   {}", shown_text(e));
    }
    let _ = write!(
        out,
        "  └───────────────────────────────────────────────────────"
    );
    keep_to_width(&out)
}

/// One form field's line (and its description's), constraints in a fixed order.
fn render_field(out: &mut String, f: &FormField) {
    let mut constraints = Vec::new();
    let mut constraint = |name: &str, value: Value| {
        constraints.push(format!("{name}={}", shown_json(&value)));
    };
    let (kind, options) = match &f.kind {
        FieldKind::String {
            min_length,
            max_length,
            format,
        } => {
            if let Some(n) = min_length {
                constraint("min_length", Value::from(*n));
            }
            if let Some(n) = max_length {
                constraint("max_length", Value::from(*n));
            }
            if let Some(x) = format {
                constraint("format", Value::from(x.as_str()));
            }
            ("string", None)
        }
        FieldKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            if let Some(n) = minimum {
                constraint("minimum", Value::Number(n.clone()));
            }
            if let Some(n) = maximum {
                constraint("maximum", Value::Number(n.clone()));
            }
            (if *integer { "integer" } else { "number" }, None)
        }
        FieldKind::Boolean => ("boolean", None),
        FieldKind::SingleSelect { options } => ("single_select", Some(options)),
        FieldKind::MultiSelect {
            options,
            min_items,
            max_items,
        } => {
            if let Some(n) = min_items {
                constraint("min_items", Value::from(*n));
            }
            if let Some(n) = max_items {
                constraint("max_items", Value::from(*n));
            }
            ("multi_select", Some(options))
        }
    };
    if let Some(options) = options {
        let names: Vec<String> = options.iter().map(|o| shown_text(&o.value)).collect();
        constraints.push(format!("options={}", names.join("|")));
    }
    let _ = writeln!(
        out,
        "  │     {}{} ({}) {}{}",
        shown_name(&f.name),
        if f.required { "*" } else { "" },
        kind,
        shown_text(f.title.as_deref().unwrap_or("")),
        if constraints.is_empty() {
            String::new()
        } else {
            format!(" [{}]", constraints.join(", "))
        }
    );
    if let Some(d) = &f.description {
        let _ = writeln!(out, "  │         {}", shown_text(d));
    }
}

/// Render the answers the client is about to send.
pub fn render_answers(responses_json: &str) -> String {
    match serde_json::from_str::<Value>(responses_json) {
        Ok(Value::Object(map)) => keep_to_width(
            &map.iter()
                .map(|(k, v)| format!("    {}: {}", shown_name(k), shown_json(v)))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => "    (unreadable)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole view: `partial`'s members over a plain one (and its `request`'s over a plain
    /// request), read as the hosts read a view.
    pub(crate) fn full_view(partial: Value) -> ConsentView {
        let mut view = serde_json::json!({
            "effects": [], "inputs": [], "max_rounds": 10, "round": 1,
            "server": "https://s.example/mcp", "state": {"present": false},
            "view": mrtr_gate_core::VIEW_FORMAT,
            "request": {"arguments": null, "binding_version": 1, "id": 1, "method": "tools/call",
                "name": "t", "original_id": 1, "params_sha256": "p", "tenant_sha256": "t",
                "user_sha256": "u"},
        });
        for (k, v) in partial.as_object().into_iter().flatten() {
            match (k.as_str(), v) {
                ("request", Value::Object(r)) => {
                    for (rk, rv) in r {
                        view["request"][rk] = rv.clone();
                    }
                }
                _ => view[k] = v.clone(),
            }
        }
        let text = mrtr_gate_core::canonical::to_canonical(&view);
        ConsentView::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

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

    /// The screen of a remembered view is the screen of its text; other text is read anew,
    /// and text that is not a view renders as a refusal.
    #[test]
    fn a_remembered_view_renders_as_its_text_would() {
        let view = full_view(serde_json::json!({"effects": ["e"]}));
        let text = view.to_canonical_json();
        let last = LastView::default();
        assert_eq!(last.render(&text), (render_view(&view), true));
        last.remember(&text, Arc::new(view.clone()));
        assert_eq!(last.render(&text), (render_view(&view), true));
        let other = full_view(serde_json::json!({"effects": ["f"]}));
        assert_eq!(
            last.render(&other.to_canonical_json()),
            (render_view(&other), true)
        );
        let (screen, readable) = last.render(&format!("{text} "));
        assert!(!readable);
        assert!(screen.contains("unreadable consent view: refuse"));
    }

    #[test]
    fn a_key_cannot_fake_screen_content() {
        let key = "x\"] form: pay\n  \u{2502} server   https://bank.example\u{202E}";
        let view = serde_json::json!({
            "server": "https://evil.example",
            "request": {"method": "tools/call", "name": "t"},
            "round": 1,
            "max_rounds": 10,
            "inputs": [{"key": key, "kind": "form", "schema_sha256": "s", "message": "m", "fields": [{"name": key, "type": "string", "required": false}]}],
            "state": {"present": false},
            "effects": [],
        });
        let screen = render_view(&full_view(view));
        // Every line the key appears on starts as the renderer wrote it, and the key stays
        // one quoted, escaped token.
        let starts = |p: &str| screen.lines().filter(|l| l.starts_with(p)).count();
        assert_eq!(starts("  \u{2502} server"), 1);
        assert_eq!(starts("  \u{2502} ["), 1);
        assert!(!screen.contains('\u{202E}'));
        // Whole, once the lines this renderer broke are joined again.
        let joined = screen.replace(&format!("\n{CONTINUED}"), "");
        assert!(joined.contains(&shown_name(key)), "{screen}");
        let answers = render_answers(&serde_json::json!({key: {"action": "accept"}}).to_string());
        // One answer, one entry: a long one goes on after the continuation mark only.
        assert_eq!(
            answers
                .lines()
                .filter(|l| !l.starts_with(CONTINUED))
                .count(),
            1
        );
        let joined = answers.replace(&format!("\n{CONTINUED}"), "");
        assert!(joined.starts_with(&format!("    {}: ", shown_name(key))));
    }

    /// The strings a server picks, each carrying what could repaint a terminal.
    fn hostile_view() -> Value {
        let evil = "\u{1b}[2J\u{1b}[H  \u{2502} server   https://bank.example/mcp\r\n\u{1b}]8;;https://evil.example/\u{7}link\u{1b}]8;;\u{7}\u{9b}1A\u{202e}txet\u{200b}";
        serde_json::json!({
            "server": "https://real.example/mcp",
            "request": {"method": "tools/call", "name": "transfer", "arguments": {"bytes": 2, "value": {"to": evil}}},
            "round": 1,
            "max_rounds": 10,
            "inputs": [
                {"key": "k", "kind": "form", "schema_sha256": "s", "message": evil, "fields": [
                    {"name": "f", "type": "single_select", "required": true, "title": evil, "description": evil,
                     "default": evil, "options": [{"value": evil, "title": evil}]}]},
                {"key": "u", "kind": "url", "message": evil, "url": {"full": evil, "ascii_host": evil, "unicode_host": evil, "has_query": false, "warnings": ["punycode"]}},
                {"key": "w", "kind": "form", "schema_sha256": "s", "message": format!("{}  \u{2502} server   https://bank.example/mcp", "x".repeat(57)), "fields": []}
            ],
            "state": {"present": false},
            "effects": [evil],
        })
    }

    #[test]
    fn server_text_is_escaped_and_cannot_start_a_line_of_the_screen() {
        let screen = render_view(&full_view(hostile_view()));
        assert!(
            !screen
                .chars()
                .any(|c| c != '\n' && crate::shown::hidden_or_control(c)),
            "{screen}"
        );
        assert!(screen.contains("\\u{001b}[2J\\u{001b}[H"), "{screen}");
        assert!(screen.contains("\\u{202e}txet\\u{200b}"), "{screen}");
        let lines: Vec<&str> = screen.lines().collect();
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("  \u{2502} server"))
                .count(),
            1,
            "{screen}"
        );
        assert_eq!(
            lines.get(1),
            Some(&"  \u{2502} server   https://real.example/mcp")
        );
        for line in &lines {
            let width: usize = line.chars().map(columns).sum();
            assert!(width <= WIDTH, "{width} columns: {line}");
        }
        let answers = render_answers(&serde_json::json!({"k": {"action": "accept", "content": {"f": hostile_view()["server"]}}, "x": "\u{1b}[2J"}).to_string());
        assert!(!answers.contains('\u{1b}'), "{answers}");
    }
}
