//! Server-sent events, read as the HTML standard's parsing reads them (plus a last event left
//! without its blank line, as the SDK adapters read it), event by event: the one reader of
//! the proxy's upstream streams and the client library's HTTP transport, which also take an
//! event's message the same way ([`Event::message`]).

/// One event as dispatched: its type (`message` when none was named) and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, `message` by default.
    pub kind: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

impl Event {
    /// The JSON-RPC message this event carries: its data when it is a `message` event,
    /// nothing for an event of another type (a heartbeat, an extension's), and a refusal
    /// when such an event holds JSON: some reader takes every event whatever its type, so
    /// it could be taken for a message the gate never saw.
    pub fn message(&self) -> Result<Option<&str>, TypedJson> {
        if self.kind == "message" {
            return Ok(Some(&self.data));
        }
        if serde_json::from_str::<&serde_json::value::RawValue>(&self.data).is_ok() {
            return Err(TypedJson);
        }
        Ok(None)
    }
}

/// JSON in an event whose type is not `message` (`typed_event`: the peer's fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypedJson;

impl std::fmt::Display for TypedJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the server sent json in an event that is not a message")
    }
}

impl std::error::Error for TypedJson {}

/// Why a stream could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamError {
    /// A line, an event, or the whole stream went past its cap.
    TooLarge,
    /// The bytes are not UTF-8.
    NotText,
}

/// An incremental event-stream parser: bytes in, whole events out.
#[derive(Debug)]
pub struct Parser {
    /// Bytes of the line being read.
    line: Vec<u8>,
    /// The last byte fed was a `\r` (a `\n` right after it ends no second line).
    after_cr: bool,
    /// Whether the stream's first bytes were looked at (a leading BOM is dropped).
    started: bool,
    kind: String,
    data: String,
    /// Whether a `data` field was seen in the event being read.
    has_data: bool,
    /// Bytes of the event being read, against `max_event`.
    event_bytes: usize,
    /// The largest event.
    max_event: usize,
    /// Bytes read so far, and the cap on them (`None`: no cap on the stream, only on events).
    total: usize,
    max_total: Option<usize>,
}

impl Parser {
    /// A parser refusing an event over `max_event` bytes and, if given, a stream over
    /// `max_total` bytes.
    pub fn new(max_event: usize, max_total: Option<usize>) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            started: false,
            kind: String::new(),
            data: String::new(),
            has_data: false,
            event_bytes: 0,
            max_event,
            total: 0,
            max_total,
        }
    }

    /// Feed the next bytes; the events they complete.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<Event>, StreamError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.max_total.is_some_and(|max| self.total > max) {
            return Err(StreamError::TooLarge);
        }
        if !self.started && !bytes.is_empty() {
            self.started = true;
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        let mut events = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = b == b'\r';
                    if let Some(event) = self.end_line()? {
                        events.push(event);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.event_bytes += 1;
                    if self.event_bytes > self.max_event {
                        return Err(StreamError::TooLarge);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(events)
    }

    /// The stream ended: an event whose blank line never came is still dispatched.
    pub fn finish(mut self) -> Result<Option<Event>, StreamError> {
        if !self.line.is_empty() {
            self.end_line()?;
        }
        Ok(self.dispatch())
    }

    fn end_line(&mut self) -> Result<Option<Event>, StreamError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        let line = String::from_utf8(line).map_err(|_| StreamError::NotText)?;
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.kind),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(value);
            }
            // `id` and `retry` steer a client's reconnection, which neither reader offers;
            // anything else is ignored by the standard.
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<Event> {
        let kind = std::mem::take(&mut self.kind);
        let data = std::mem::take(&mut self.data);
        let had_data = std::mem::replace(&mut self.has_data, false);
        self.event_bytes = 0;
        // The standard dispatches no event whose data is empty (a priming event, a comment).
        if !had_data || data.is_empty() {
            return None;
        }
        Some(Event {
            kind: if kind.is_empty() {
                "message".into()
            } else {
                kind
            },
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Result<Vec<Event>, StreamError> {
        let mut p = Parser::new(1 << 20, None);
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.feed(c)?);
        }
        out.extend(p.finish()?);
        Ok(out)
    }

    fn ev(kind: &str, data: &str) -> Event {
        Event {
            kind: kind.into(),
            data: data.into(),
        }
    }

    #[test]
    fn events_are_read_across_chunks_and_every_line_ending() {
        let events = parse(&[
            b"\xEF\xBB\xBF: comment\r\nid: 7\r\nretry: 10\r\ndata: {\"a\":\r",
            b"\ndata:1}\r\rev",
            b"ent: other\ndata: x\n\n",
            b"data: last, no blank line",
        ])
        .unwrap();
        assert_eq!(
            events,
            [
                ev("message", "{\"a\":\n1}"),
                ev("other", "x"),
                ev("message", "last, no blank line")
            ]
        );
    }

    #[test]
    fn priming_events_and_bare_fields_dispatch_nothing() {
        assert_eq!(
            parse(&[b"id: 1\ndata: \n\ndata\n\nevent: x\n\n"]).unwrap(),
            []
        );
        assert_eq!(parse(&[b"data\ndata\n\n"]).unwrap(), [ev("message", "\n")]);
    }

    #[test]
    fn only_a_message_event_carries_a_message_and_json_elsewhere_is_refused() {
        assert_eq!(ev("message", "{}").message(), Ok(Some("{}")));
        assert_eq!(ev("heartbeat", "ping").message(), Ok(None));
        assert_eq!(ev("mrtr", r#"{"id":1}"#).message(), Err(TypedJson));
        assert_eq!(ev("mrtr", " 7 ").message(), Err(TypedJson));
    }

    #[test]
    fn caps_and_broken_text_are_refused() {
        let mut p = Parser::new(8, None);
        assert_eq!(p.feed(b"data: 123456789"), Err(StreamError::TooLarge));
        let mut p = Parser::new(8, Some(10));
        assert!(p.feed(b"data: 1\n\n").is_ok());
        assert_eq!(p.feed(b"data: 2\n\n"), Err(StreamError::TooLarge));
        assert_eq!(parse(&[b"data: \xff\n\n"]), Err(StreamError::NotText));
        // A cap on one event is not a cap on the stream.
        let mut p = Parser::new(16, None);
        for _ in 0..100 {
            assert_eq!(p.feed(b"data: 1234567\n\n").unwrap().len(), 1);
        }
    }
}
