//! What one scenario run saw: every request the client sent (raw), the canary's connections,
//! the opener shim's calls, what the client said it cannot do, and how it ended. The judge
//! reads only this, after the client's process tree has exited.

use crate::hold::HoldRecord;
use crate::json_text::{decode_string, lossy_surrogates, raw_member};
use serde_json::Value;
use std::time::Instant;

/// One message to the MCP endpoint: an HTTP request, or a line on a stdio relay connection.
#[derive(Clone, Debug)]
pub struct Request {
    /// Order of arrival, from 0.
    pub seq: usize,
    /// When its body had been read.
    pub at: Instant,
    /// When its first byte was seen: an HTTP request's head read, a stdio line read whole
    /// (the pacing check's start).
    pub started: Instant,
    /// When the probe had its answer: an HTTP response about to be written (for a stream, its
    /// first event), a stdio answer line written.
    pub answered: Option<Instant>,
    /// `POST`, `GET`, `DELETE`, ...; on stdio `LINE` or `OVERSIZED_LINE` (its body not kept).
    pub http_method: String,
    /// The request's path; on stdio the connection, `relay:<n>` (n from 1).
    pub path: String,
    /// The body (the line, on stdio) as received (invalid UTF-8 replaced).
    pub body: String,
    /// The body read as JSON (lone surrogates read as U+FFFD), if it is JSON.
    pub value: Option<Value>,
    /// The JSON-RPC method.
    pub method: Option<String>,
    /// The JSON-RPC id as its raw text.
    pub id: Option<String>,
    /// `tools/call`: the tool's name.
    pub tool: Option<String>,
    /// `tools/call`: which call of that tool this is (0 = the first).
    pub leg: Option<usize>,
    /// `params.requestState` as UTF-16 units, exactly as sent (`None`: absent or not a
    /// string).
    pub state: Option<Vec<u16>>,
    /// `params.requestState` present at all, whatever its type.
    pub has_state: bool,
}

impl Request {
    /// Reads what can be read of a body; `leg` is filled in by the server.
    pub fn read(seq: usize, http_method: &str, path: &str, body: String) -> Request {
        let value = serde_json::from_str(&body)
            .or_else(|_| serde_json::from_str(&lossy_surrogates(&body)))
            .ok();
        let text = |v: &Option<Value>, pointer: &str| {
            v.as_ref()
                .and_then(|v| v.pointer(pointer))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let method = text(&value, "/method");
        let tool = if method.as_deref() == Some("tools/call") {
            text(&value, "/params/name")
        } else {
            None
        };
        let raw_state = raw_member(&body, &["params", "requestState"]);
        let now = Instant::now();
        Request {
            seq,
            at: now,
            started: now,
            answered: None,
            http_method: http_method.to_owned(),
            path: path.to_owned(),
            id: raw_member(&body, &["id"]).map(str::to_owned),
            state: raw_state.and_then(decode_string),
            has_state: raw_state.is_some(),
            value,
            method,
            tool,
            leg: None,
            body,
        }
    }

    /// A JSON-RPC request (a method and an id), as opposed to a notification or a response.
    pub fn is_call(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    /// One line naming the request for a report.
    pub fn describe(&self) -> String {
        let is_response = self
            .value
            .as_ref()
            .is_some_and(|v| v.get("result").is_some() || v.get("error").is_some());
        if self.method.is_none() && is_response {
            return format!(
                "a response to id {}",
                self.id.as_deref().unwrap_or("(none)")
            );
        }
        let mut out = self.method.clone().unwrap_or_else(|| {
            if self.http_method == crate::stdio::OVERSIZED_LINE {
                format!("a line over the limit on {}", self.path)
            } else if self.http_method == crate::stdio::LINE {
                format!("a line that is no JSON-RPC request on {}", self.path)
            } else {
                format!("{} {}", self.http_method, self.path)
            }
        });
        if let Some(tool) = &self.tool {
            out.push(' ');
            out.push_str(tool);
        }
        if let Some(id) = &self.id {
            out.push_str(&format!(", id {id}"));
        }
        if let Some(leg) = self.leg {
            out.push_str(&format!(", leg {leg}"));
        }
        out
    }
}

/// One connection to the canary listener.
#[derive(Clone, Debug, Default)]
pub struct CanaryHit {
    /// The first line the client wrote, if it wrote one before closing (a TLS ClientHello
    /// shows as bytes).
    pub first_line: String,
}

/// The whole recording of a run.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Requests, in order of arrival.
    pub requests: Vec<Request>,
    /// Connections to the canary.
    pub canary: Vec<CanaryHit>,
    /// The argument lists the opener shim was called with.
    pub opened: Vec<String>,
    /// `mrtr-probe: unsupported: <what>` lines of the client's stdout.
    pub unsupported: Vec<String>,
    /// The client's stdout.
    pub stdout: String,
    /// The client's stderr.
    pub stderr: String,
    /// The client's exit status (`None`: killed by a signal or not reaped).
    pub exit_code: Option<i32>,
    /// The hang guard ended the client.
    pub timed_out: bool,
    /// A connection to the probe stayed open after the client's process tree had exited.
    pub lingering: bool,
    /// How long the client ran, in milliseconds.
    pub duration_ms: u128,
    /// The held call, if the scenario held one and the client made it.
    pub hold: Option<HoldRecord>,
}

impl Recording {
    /// The `tools/call` requests of `tool`.
    pub fn calls_of<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a Request> + 'a {
        self.requests
            .iter()
            .filter(move |r| r.tool.as_deref() == Some(tool))
    }
}
