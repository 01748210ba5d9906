//! A scenario's answer to one request, as the bytes the probe writes: placeholders
//! substituted (`{{id}}` the request's id as its raw JSON text, `{{canary}}` the canary's port,
//! `{{n}}` the leg), then a JSON body or SSE events (`event: message` and one `data:` line
//! per message).

use crate::scenario::{Answer, repeat_count};
use serde_json::Value;

/// What is written for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `application/json`, one message.
    Json(String),
    /// `text/event-stream`, one event per message.
    Sse(Vec<String>),
    /// No response: the connection is closed.
    Close,
    /// A held call: `notify` as the first event of a stream kept open until the client
    /// cancels; `late` (under the same id) is for the client's next request.
    Hold {
        /// The notification's text.
        notify: String,
        /// The late answer's text.
        late: String,
    },
}

/// What placeholders stand for in one answer.
#[derive(Clone, Copy, Debug)]
pub struct Fill<'a> {
    /// The request's id, as the raw JSON text the client sent (`7`, `"a"`).
    pub id: &'a str,
    /// The canary listener's port.
    pub canary: u16,
    /// The leg this answer answers.
    pub leg: usize,
}

impl Fill<'_> {
    fn text(&self, text: &str, raw: bool) -> String {
        let mut out = text
            .replace("{{canary}}", &self.canary.to_string())
            .replace("{{n}}", &self.leg.to_string());
        if raw {
            out = out.replace("{{id}}", self.id);
        }
        expand_repeats(&out)
    }

    fn value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s, false)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (self.text(k, false), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// `text` with each `{{x:N}}` replaced by N copies of `x` (validated: N is in bounds).
fn expand_repeats(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{x:") {
        let after = rest.get(open + 2..).unwrap_or_default();
        let close = after.find("}}");
        let count = close.and_then(|c| repeat_count(after.get(..c).unwrap_or_default()));
        match (close, count) {
            (Some(close), Some(count)) => {
                out.push_str(rest.get(..open).unwrap_or_default());
                out.push_str(&"x".repeat(count));
                rest = after.get(close + 2..).unwrap_or_default();
            }
            _ => {
                out.push_str(rest.get(..open + 2).unwrap_or_default());
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The reply to a request with `fill.id`.
pub fn reply(answer: &Answer, fill: &Fill<'_>) -> Reply {
    if answer.close {
        return Reply::Close;
    }
    if let Some(hold) = &answer.hold {
        return Reply::Hold {
            notify: serde_json::to_string(&fill.value(&hold.notify)).unwrap_or_default(),
            late: message(&hold.late, fill),
        };
    }
    if let Some(events) = &answer.sse {
        return Reply::Sse(events.iter().map(|e| message(e, fill)).collect());
    }
    let text = message(answer, fill);
    if answer.as_sse {
        Reply::Sse(vec![text])
    } else {
        Reply::Json(text)
    }
}

/// One JSON-RPC message of an answer (validated: exactly one form is given).
fn message(answer: &Answer, fill: &Fill<'_>) -> String {
    if let Some(raw) = &answer.raw {
        return fill.text(raw, true);
    }
    let (member, value) = match (&answer.result, &answer.error) {
        (Some(result), _) => ("result", fill.value(result)),
        (None, Some(error)) => ("error", fill.value(error)),
        (None, None) => (
            "error",
            serde_json::json!({"code": -32603, "message": "empty answer"}),
        ),
    };
    envelope(fill.id, member, &value)
}

/// `{"jsonrpc":"2.0","id":<id>,"<member>":<value>}` with the id written as received.
pub fn envelope(id: &str, member: &str, value: &Value) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"{member}\":{}}}",
        serde_json::to_string(value).unwrap_or_else(|_| "null".into())
    )
}

impl Reply {
    /// The body's media type.
    pub fn content_type(&self) -> &'static str {
        match self {
            Reply::Json(_) => "application/json",
            Reply::Sse(_) | Reply::Hold { .. } => "text/event-stream",
            Reply::Close => "application/octet-stream",
        }
    }

    /// The body's bytes (a message holds no line break: JSON text never needs one).
    pub fn body(&self) -> String {
        match self {
            Reply::Json(text) => text.clone(),
            Reply::Close => String::new(),
            Reply::Sse(events) => events.iter().map(|e| sse_event(e)).collect(),
            Reply::Hold { notify, .. } => sse_event(notify),
        }
    }
}

/// One SSE event carrying one message.
pub fn sse_event(message: &str) -> String {
    format!(
        "event: message\ndata: {}\n\n",
        message.replace('\n', "\ndata: ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Answer {
        serde_json::from_str(text).unwrap_or_default()
    }

    #[test]
    fn raw_answers_take_the_id_verbatim() {
        let a =
            answer(r#"{"raw": "{\"id\":{{id}},\"result\":{\"a\":1,\"a\":2,\"p\":{{canary}}}}"}"#);
        let fill = Fill {
            id: "\"x-1\"",
            canary: 9,
            leg: 0,
        };
        assert_eq!(
            reply(&a, &fill),
            Reply::Json(r#"{"id":"x-1","result":{"a":1,"a":2,"p":9}}"#.into())
        );
    }

    #[test]
    fn results_are_enveloped_and_filled() {
        let a =
            answer(r#"{"result": {"url": "http://127.0.0.1:{{canary}}/q{{n}}"}, "as_sse": true}"#);
        let fill = Fill {
            id: "7",
            canary: 4000,
            leg: 2,
        };
        let r = reply(&a, &fill);
        assert_eq!(
            r.body(),
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"url\":\"http://127.0.0.1:4000/q2\"}}\n\n"
        );
        assert_eq!(r.content_type(), "text/event-stream");
    }

    #[test]
    fn repeats_expand_in_place() {
        assert_eq!(
            expand_repeats("S-{{x:3}}-{{n}}{{x:0}}"),
            "S-xxx-{{n}}{{x:0}}"
        );
    }
}
