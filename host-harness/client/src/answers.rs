//! Where a round's answers come from: a person at a terminal form ([`TerminalForm`]), or a
//! file written for scripts ([`AnswersFile`]). Either produces the `inputResponses` object;
//! the gate then checks it against the round's schema and asks for consent, so nothing here
//! is trusted to be right.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::session::OpenRound;
use mrtr_gate_host::consent_screen::shown_name;
use mrtr_gate_host::core::{FieldKind, FormField, SelectOption, ViewInput};
use mrtr_gate_host::shown::{shown_json, shown_text};
use serde_json::{Map, Value, json};
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex, PoisonError};

/// What the answer source decided for a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Send these `inputResponses` (a JSON object, one member per input key).
    Send(String),
    /// Abandon the whole request: nothing is sent.
    Cancel,
}

/// Why no answer came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoAnswer(pub String);

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A source of answers for rounds that ask for input.
pub trait Answerer {
    /// Answer `round` (its view says what is asked).
    fn answer(&mut self, round: &OpenRound) -> Result<Answer, NoAnswer>;
}

/// Answers written in advance. The file holds either one object (input key to the
/// `ElicitResult` to send, used for every round that asks that key) or an array of such
/// objects (the first for round 1, the second for round 2, …).
#[derive(Clone, Debug)]
pub struct AnswersFile {
    rounds: Vec<Map<String, Value>>,
    every_round: bool,
}

impl AnswersFile {
    /// Parse the file's text.
    pub fn parse(text: &str) -> Result<Self, NoAnswer> {
        let bad = |why: &str| NoAnswer(format!("the answers file {why}"));
        match serde_json::from_str::<Value>(text).map_err(|e| bad(&format!("is not json: {e}")))? {
            Value::Object(map) => Ok(Self {
                rounds: vec![map],
                every_round: true,
            }),
            Value::Array(items) => {
                let rounds = items
                    .into_iter()
                    .map(|v| match v {
                        Value::Object(m) => Ok(m),
                        _ => Err(bad("holds an array whose items are not all objects")),
                    })
                    .collect::<Result<_, _>>()?;
                Ok(Self {
                    rounds,
                    every_round: false,
                })
            }
            _ => Err(bad("is neither an object nor an array of objects")),
        }
    }
}

impl Answerer for AnswersFile {
    fn answer(&mut self, round: &OpenRound) -> Result<Answer, NoAnswer> {
        let view = &round.accepted;
        let index = if self.every_round {
            0
        } else {
            view.round.saturating_sub(1) as usize
        };
        let answers = self.rounds.get(index).ok_or_else(|| {
            NoAnswer(format!(
                "the answers file has no answers for round {}",
                view.round
            ))
        })?;
        let mut out = Map::new();
        for key in &view.input_keys {
            let answer = answers.get(key).ok_or_else(|| {
                NoAnswer(format!(
                    "the answers file has no answer for input {} of round {}",
                    shown_name(key),
                    view.round
                ))
            })?;
            out.insert(key.clone(), answer.clone());
        }
        Ok(Answer::Send(Value::Object(out).to_string()))
    }
}

/// The terminal both the form and the consent prompt read from: one reader, so that neither
/// buffers lines meant for the other.
#[derive(Clone)]
pub struct Terminal {
    input: Arc<Mutex<Box<dyn BufRead + Send>>>,
    output: Arc<Mutex<Box<dyn Write + Send>>>,
    /// The terminal device the input comes from, when it is one: what was typed ahead on it
    /// is discarded before each consent prompt.
    #[cfg(unix)]
    device: Option<Arc<std::fs::File>>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Terminal")
    }
}

impl Terminal {
    /// stdin and stderr (stdout is the result's).
    pub fn stdio() -> Self {
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut terminal = Self::with_io(
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        );
        #[cfg(unix)]
        {
            use std::os::fd::AsFd;
            terminal.device = std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .ok()
                .map(|fd| Arc::new(std::fs::File::from(fd)));
        }
        terminal
    }

    /// A terminal device, read and written (its type-ahead discarded before each consent
    /// prompt, as on stdin).
    #[cfg(unix)]
    pub fn on_device(device: std::fs::File) -> std::io::Result<Self> {
        let mut terminal = Self::with_io(
            Box::new(std::io::BufReader::new(device.try_clone()?)),
            Box::new(device.try_clone()?),
        );
        terminal.device = Some(Arc::new(device));
        Ok(terminal)
    }

    /// Any reader and writer (tests).
    pub fn with_io(input: Box<dyn BufRead + Send>, output: Box<dyn Write + Send>) -> Self {
        Self {
            input: Arc::new(Mutex::new(input)),
            output: Arc::new(Mutex::new(output)),
            #[cfg(unix)]
            device: None,
        }
    }

    /// Write `text`.
    pub fn say(&self, text: &str) {
        let mut out = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }

    /// Show `prompt` and read one line (`None` at the end of input).
    pub fn ask(&self, prompt: &str) -> Option<String> {
        self.say(prompt);
        let mut line = String::new();
        let read = self
            .input
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read_line(&mut line);
        match read {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
        }
    }

    /// The consent prompt on this terminal ([`mrtr_gate_host::reference_hosts::TerminalConsent`]):
    /// on a terminal device, only what is typed once the screen is drawn answers it.
    pub fn consent(&self) -> mrtr_gate_host::reference_hosts::TerminalConsent {
        let consent = mrtr_gate_host::reference_hosts::TerminalConsent::with_io(
            Box::new(std::io::BufReader::with_capacity(
                1,
                SharedReader(self.clone()),
            )),
            Box::new(SharedWriter(self.clone())),
        );
        #[cfg(unix)]
        if let Some(device) = self.device.clone() {
            return consent.with_before_prompt(move || {
                mrtr_gate_host::reference_hosts::discard_typed_ahead(&*device);
            });
        }
        consent
    }
}

struct SharedReader(Terminal);

impl std::io::Read for SharedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut input = self.0.input.lock().unwrap_or_else(PoisonError::into_inner);
        let available = input.fill_buf()?;
        let n = available.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), available.get(..n)) {
            dst.copy_from_slice(src);
        }
        input.consume(n);
        Ok(n)
    }
}

struct SharedWriter(Terminal);

impl std::io::Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0
            .output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush()
    }
}

/// A form on the terminal for people: each input of the round in turn, each field with its
/// control (text, number, yes/no, a numbered list) and its constraints; accept, decline or
/// cancel for each input (each an answer the server gets); `q` (or the end of input)
/// abandons the request and sends nothing.
#[derive(Debug)]
pub struct TerminalForm {
    terminal: Terminal,
}

impl TerminalForm {
    /// A form on `terminal`.
    pub fn new(terminal: Terminal) -> Self {
        Self { terminal }
    }

    /// The person's choice for one input: an action to send (`accept`, `decline`, `cancel`:
    /// each an answer the server receives), or `None` to abandon the whole request (`q`, or
    /// the end of input): then nothing is sent.
    fn action(&self, what: &str) -> Option<&'static str> {
        loop {
            let line = self.terminal.ask(&format!(
                "  {what} [a]ccept, [d]ecline, [c]ancel (sent to the server), [q]uit (send nothing): "
            ))?;
            match line.trim().to_ascii_lowercase().as_str() {
                "a" | "accept" => return Some("accept"),
                "d" | "decline" => return Some("decline"),
                "c" | "cancel" => return Some("cancel"),
                "q" | "quit" => return None,
                _ => self.terminal.say("  type a, d, c or q\n"),
            }
        }
    }

    fn field(&self, field: &FormField) -> Result<Option<Value>, NoAnswer> {
        let mut label = shown_name(&field.name);
        if let Some(title) = &field.title {
            label = format!("{} ({label})", shown_text(title));
        }
        let mut hints = Vec::new();
        if let Some(d) = &field.description {
            hints.push(shown_text(d));
        }
        match &field.kind {
            FieldKind::String {
                min_length,
                max_length,
                format,
            } => {
                if let Some(f) = format {
                    hints.push(format!("format {}", shown_text(f)));
                }
                match (min_length, max_length) {
                    (Some(a), Some(b)) => hints.push(format!("{a} to {b} characters")),
                    (Some(a), None) => hints.push(format!("at least {a} characters")),
                    (None, Some(b)) => hints.push(format!("at most {b} characters")),
                    (None, None) => {}
                }
            }
            FieldKind::Number {
                integer,
                minimum,
                maximum,
            } => {
                let what = if *integer {
                    "a whole number"
                } else {
                    "a number"
                };
                let shown = |n: &serde_json::Number| shown_json(&Value::Number(n.clone()));
                let range = match (minimum, maximum) {
                    (Some(a), Some(b)) => format!(" from {} to {}", shown(a), shown(b)),
                    (Some(a), None) => format!(", at least {}", shown(a)),
                    (None, Some(b)) => format!(", at most {}", shown(b)),
                    (None, None) => String::new(),
                };
                hints.push(format!("{what}{range}"));
            }
            FieldKind::Boolean => hints.push("y or n".into()),
            FieldKind::SingleSelect { options } | FieldKind::MultiSelect { options, .. } => {
                let mut list = String::new();
                for (i, o) in options.iter().enumerate() {
                    let title = o
                        .title
                        .as_deref()
                        .map(|t| format!(" {}", shown_text(t)))
                        .unwrap_or_default();
                    list.push_str(&format!(
                        "\n      {}) {}{}",
                        i + 1,
                        shown_name(&o.value),
                        title
                    ));
                }
                hints.push(if matches!(field.kind, FieldKind::MultiSelect { .. }) {
                    format!("numbers separated by commas{list}")
                } else {
                    format!("one number{list}")
                });
            }
        }
        if let Some(d) = &field.default {
            hints.push(format!("empty for the default {}", shown_json(d)));
        } else if !field.required {
            hints.push("empty to leave out".into());
        }
        loop {
            let prompt = format!(
                "    {label}{}: ",
                if hints.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", hints.join("; "))
                }
            );
            let Some(line) = self.terminal.ask(&prompt) else {
                return Err(NoAnswer("the terminal closed".into()));
            };
            let line = line.trim();
            if line.is_empty() {
                if let Some(d) = &field.default {
                    return Ok(Some(d.clone()));
                }
                if !field.required {
                    return Ok(None);
                }
                self.terminal.say("    this field is required\n");
                continue;
            }
            match parse_value(&field.kind, line) {
                // The gate's rules for this field, checked here first for the person's sake
                // (the gate checks again: that check is the one that counts).
                Some(v) => match field.kind.broken_by(&v) {
                    None => return Ok(Some(v)),
                    // The gate's own rule and words, so the form and a refusal agree.
                    Some(broken) => self.terminal.say(&format!(
                        "    {}: {}; try again\n",
                        shown_name(&field.name),
                        shown_text(&broken.to_string())
                    )),
                },
                None => self
                    .terminal
                    .say("    that does not fit this field; try again\n"),
            }
        }
    }
}

/// The value the person typed, in the field's JSON type (its rules are checked after, as the
/// gate checks them: `FieldKind::broken_by`).
fn parse_value(kind: &FieldKind, line: &str) -> Option<Value> {
    let pick = |options: &[SelectOption], token: &str| -> Option<Value> {
        let n: usize = token.trim().parse().ok()?;
        options
            .get(n.checked_sub(1)?)
            .map(|o| Value::String(o.value.clone()))
    };
    match kind {
        FieldKind::String { .. } => Some(Value::String(line.to_owned())),
        // Kept as the number text the person typed (the gate compares numbers exactly).
        FieldKind::Number { .. } => serde_json::from_str(line).ok().filter(Value::is_number),
        FieldKind::Boolean => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Some(Value::Bool(true)),
            "n" | "no" | "false" => Some(Value::Bool(false)),
            _ => None,
        },
        FieldKind::SingleSelect { options } => pick(options, line),
        FieldKind::MultiSelect { options, .. } => line
            .split(',')
            .map(|token| pick(options, token))
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
    }
}

impl Answerer for TerminalForm {
    fn answer(&mut self, round: &OpenRound) -> Result<Answer, NoAnswer> {
        let view = &round.view;
        self.terminal.say(&format!(
            "\n{} asks for input (round {} of at most {}):\n",
            shown_text(&view.server),
            view.round,
            view.max_rounds
        ));
        let mut out = Map::new();
        for input in &view.inputs {
            let key = input.key().to_owned();
            self.terminal
                .say(&format!("\n  input {}: ", shown_name(&key)));
            let answer = match input {
                ViewInput::Form {
                    message, fields, ..
                } => {
                    self.terminal.say(&format!("{}\n", shown_text(message)));
                    let Some(action) = self.action("fill in this form?") else {
                        return Ok(Answer::Cancel);
                    };
                    if action == "accept" {
                        let mut content = Map::new();
                        for field in fields {
                            if let Some(v) = self.field(field)? {
                                content.insert(field.name.clone(), v);
                            }
                        }
                        json!({"action": "accept", "content": content})
                    } else {
                        json!({"action": action})
                    }
                }
                ViewInput::Url { message, url, .. } => {
                    self.terminal.say(&format!("{}\n", shown_text(message)));
                    let warnings: Vec<String> = url
                        .warnings
                        .iter()
                        .filter_map(|w| serde_json::to_value(w).ok())
                        .filter_map(|w| w.as_str().map(shown_text))
                        .collect();
                    self.terminal.say(&format!(
                        "    opens {}\n    host  {}{}{}\n",
                        shown_text(&url.full),
                        shown_text(&url.ascii_host),
                        if url.unicode_host != url.ascii_host {
                            format!(" (shown as {})", shown_text(&url.unicode_host))
                        } else {
                            String::new()
                        },
                        if warnings.is_empty() {
                            String::new()
                        } else {
                            format!("\n    WARNING {}", warnings.join(", "))
                        }
                    ));
                    let Some(action) = self.action("open this page in your browser?") else {
                        return Ok(Answer::Cancel);
                    };
                    json!({"action": action})
                }
                ViewInput::Roots { .. } | ViewInput::Sampling { .. } => {
                    // What the view says of it before the refusal, as for every input.
                    self.terminal.say("\n");
                    return Err(NoAnswer(format!(
                        "input {} is of a kind this form does not answer",
                        shown_name(&key)
                    )));
                }
            };
            out.insert(key, answer);
        }
        Ok(Answer::Send(Value::Object(out).to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round `round` asking `keys`, its view `partial`'s members over a plain view's.
    fn view(round: u32, keys: &[&str], partial: Value) -> OpenRound {
        let accepted = mrtr_gate_host::core::AcceptedRound {
            view_json: view_json(round, partial),
            view_sha256: String::new(),
            round,
            input_keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            request_state_sha256: None,
        };
        OpenRound::read(accepted).unwrap()
    }

    /// The canonical text of round `round`'s view, `partial`'s members over a plain view's.
    fn view_json(round: u32, partial: Value) -> String {
        let mut view = json!({
            "effects": [], "inputs": [], "max_rounds": 10, "round": round,
            "server": "https://s.example/mcp", "state": {"present": false},
            "view": mrtr_gate_host::core::VIEW_FORMAT,
            "request": {"arguments": null, "binding_version": 1, "id": 1, "method": "tools/call",
                "name": "t", "original_id": 1, "params_sha256": "p", "tenant_sha256": "t",
                "user_sha256": "u"},
        });
        for (k, v) in partial.as_object().into_iter().flatten() {
            view[k] = v.clone();
        }
        mrtr_gate_host::core::canonical::to_canonical(&view)
    }

    #[cfg(unix)]
    #[test]
    fn on_a_terminal_only_what_is_typed_once_the_consent_screen_is_drawn_answers_it() {
        use mrtr_gate_host::core::digest::sha256_hex;
        use mrtr_gate_host::core::host::{Consent, ConsentDecision, ConsentPrompt};
        use mrtr_gate_host::reference_hosts::PseudoTerminal;
        const GUARD: std::time::Duration = std::time::Duration::from_secs(60);
        let pty = PseudoTerminal::new().unwrap();
        let consent = Terminal::on_device(pty.open().unwrap()).unwrap().consent();
        let (view, answers) = (view_json(1, json!({})), r#"{"a":{"action":"decline"}}"#);
        let prompt = ConsentPrompt {
            view_sha256: sha256_hex(view.as_bytes()),
            view_json: view,
            responses_sha256: sha256_hex(answers.as_bytes()),
            responses_json: answers.into(),
        };
        // The person answers the `n`th screen with `keys` once it is there.
        let answer = |n: usize, keys: &str| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert!(pty.wait_for("[y/N]", n, GUARD), "screen {n} never came");
                    pty.type_keys(keys).unwrap();
                });
                consent.request_consent(&prompt).unwrap().decision
            })
        };
        // A `y` typed before the screen (for an earlier prompt, or ahead of it) is dropped.
        pty.type_keys("y\n").unwrap();
        assert_eq!(answer(1, "n\n"), ConsentDecision::Refused);
        assert_eq!(answer(2, "y\n"), ConsentDecision::Granted);
    }

    /// What the owner types (`input`) and what the terminal shows, captured.
    fn captured(input: &'static str) -> (Terminal, Arc<Mutex<Vec<u8>>>) {
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Arc::new(Mutex::new(Vec::new()));
        let terminal = Terminal::with_io(
            Box::new(std::io::Cursor::new(input)),
            Box::new(Sink(out.clone())),
        );
        (terminal, out)
    }

    #[test]
    fn a_file_answers_by_key_for_every_round_or_round_by_round() {
        let mut every =
            AnswersFile::parse(r#"{"a":{"action":"decline"},"b":{"action":"cancel"}}"#).ok();
        let v = view(3, &["a"], json!({}));
        assert_eq!(
            every.as_mut().map(|f| f.answer(&v)),
            Some(Ok(Answer::Send(r#"{"a":{"action":"decline"}}"#.into())))
        );
        let mut rounds = AnswersFile::parse(
            r#"[{"a":{"action":"accept","content":{"x":1}}},{"b":{"action":"decline"}}]"#,
        )
        .ok();
        let r2 = rounds
            .as_mut()
            .map(|f| f.answer(&view(2, &["b"], json!({}))));
        assert_eq!(
            r2,
            Some(Ok(Answer::Send(r#"{"b":{"action":"decline"}}"#.into())))
        );
        let r3 = rounds
            .as_mut()
            .map(|f| f.answer(&view(3, &["b"], json!({}))));
        assert!(matches!(r3, Some(Err(_))), "no third round in the file");
        let missing = rounds
            .as_mut()
            .map(|f| f.answer(&view(1, &["zz"], json!({}))));
        assert!(matches!(missing, Some(Err(NoAnswer(m))) if m.contains("\"zz\"")));
    }

    #[test]
    fn hostile_answer_files_are_refused_not_guessed() {
        for bad in ["", "5", "[1]", "{", "\"x\"", "null", "[[]]"] {
            assert!(AnswersFile::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_terminal_form_shows_each_control_and_takes_typed_values() {
        let input = "a\n\n7\n2\n2\nAda\nx\ny\n1,3\n";
        let (terminal, out) = captured(input);
        let fields = json!([
            {"name": "bags", "type": "number", "integer": true, "minimum": 0, "maximum": 3, "required": true},
            {"name": "seat", "type": "single_select", "required": true,
             "options": [{"value": "aisle", "title": "Aisle"}, {"value": "window"}]},
            {"name": "who", "type": "string", "required": true, "max_length": 10},
            {"name": "ok", "type": "boolean", "required": true},
            {"name": "meals", "type": "multi_select", "required": false,
             "options": [{"value": "veg"}, {"value": "fish"}, {"value": "kids"}]}
        ]);
        let v = view(
            1,
            &["p"],
            json!({"server": "https://s/mcp", "round": 1, "max_rounds": 10,
            "inputs": [{"key": "p", "kind": "form", "schema_sha256": "s", "message": "Who?", "fields": fields}]}),
        );
        let answer = TerminalForm::new(terminal).answer(&v);
        assert_eq!(
            answer,
            Ok(Answer::Send(
                json!({"p": {"action": "accept", "content": {
                    "bags": 2, "seat": "window", "who": "Ada", "ok": true, "meals": ["veg", "kids"]}}})
                .to_string()
            ))
        );
        let shown = String::from_utf8_lossy(&out.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned();
        for hint in [
            "a whole number from 0 to 3",
            "1) \"aisle\" Aisle",
            "at most 10 characters",
            "y or n",
            "this field is required",
            // 7 bags: the gate's rule, named with its field.
            "\"bags\": at most 3; try again",
        ] {
            assert!(shown.contains(hint), "{hint} in {shown}");
        }
    }

    #[test]
    fn the_form_shows_every_server_string_escaped() {
        let evil = "\u{1b}[2J\u{1b}[H\r\n  server https://bank.example \u{1b}]8;;https://evil.example/\u{7}x\u{9b}1A\u{202e}\u{200b}";
        let (terminal, out) = captured("a\n\n\na\n");
        let fields = json!([
            {"name": "pick", "type": "single_select", "required": false, "title": evil, "description": evil,
             "default": evil, "options": [{"value": evil, "title": evil}]},
            {"name": "n", "type": "string", "format": evil, "required": false}
        ]);
        let url = json!({"full": evil, "ascii_host": evil, "unicode_host": "x", "has_query": false, "warnings": ["punycode"]});
        let v = view(
            1,
            &["p", "u"],
            json!({"server": evil, "round": 1, "max_rounds": 10, "inputs": [
                {"key": "p", "kind": "form", "schema_sha256": "s", "message": evil, "fields": fields},
                {"key": "u", "kind": "url", "message": evil, "url": url}]}),
        );
        let answer = TerminalForm::new(terminal).answer(&v);
        assert!(matches!(answer, Ok(Answer::Send(_))), "{answer:?}");
        let shown = String::from_utf8_lossy(&out.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned();
        assert!(
            !shown
                .chars()
                .any(|c| c != '\n' && mrtr_gate_host::shown::hidden_or_control(c)),
            "{shown:?}"
        );
        assert!(shown.contains("\\u{001b}[2J"), "{shown}");
    }

    #[test]
    fn the_end_of_input_cancels_the_request() {
        let terminal = Terminal::with_io(
            Box::new(std::io::Cursor::new("")),
            Box::new(std::io::sink()),
        );
        let v = view(
            1,
            &["u"],
            json!({"inputs": [{"key": "u", "kind": "url", "message": "Pay",
            "url": {"full": "https://pay.example.com/x", "ascii_host": "pay.example.com", "unicode_host": "pay.example.com", "has_query": false, "warnings": []}}]}),
        );
        assert_eq!(TerminalForm::new(terminal).answer(&v), Ok(Answer::Cancel));
    }
}
