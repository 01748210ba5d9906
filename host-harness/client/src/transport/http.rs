//! The streamable HTTP transport: each request a POST to the endpoint with the MCP headers;
//! the response is a JSON body, or an SSE stream one of whose events carries it.

use super::{
    MAX_MESSAGE_BYTES, Outgoing, Routed, TICK, Transport, TransportCode, TransportError, Waiting,
    answer_server_request, route,
};
use base64::Engine as _;
use mrtr_gate_host::core::ServerIdentity;
use mrtr_gate_host::wire::sse::{Event, Parser, StreamError};
use std::io::Read;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How long one request may take in all before the transport gives up. A round the user
/// takes long over is not waiting on the transport: the answers are collected between
/// requests.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// One streamable HTTP endpoint.
pub struct HttpTransport {
    url: String,
    server: ServerIdentity,
    agent: ureq::Agent,
    session: Option<String>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// What came back for one POST.
struct Reply {
    text: Option<String>,
    session: Option<String>,
}

/// The `Mcp-Name` value for `name`: as it is when it is printable ASCII without edge spaces,
/// else `=?base64?…?=` of its UTF-8 (a header cannot carry other bytes as they are).
pub fn mcp_name_header(name: &str) -> String {
    let plain = !name.is_empty()
        && name.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !name.starts_with(' ')
        && !name.ends_with(' ');
    if plain {
        name.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(name.as_bytes())
        )
    }
}

impl HttpTransport {
    /// Talk to the endpoint at `url`. The URL is normalised once ([`ServerIdentity::origin`]:
    /// lowercased scheme and host, IDNA, default port dropped); requests go to exactly that
    /// URL and the gate binds rounds to it.
    pub fn connect(url: &str) -> Result<Self, TransportError> {
        let server = ServerIdentity::origin(url)
            .map_err(|e| TransportError::new(TransportCode::InvalidUrl, e.to_string()))?;
        let ServerIdentity::Origin(normalised) = &server else {
            return Err(TransportError::new(
                TransportCode::InvalidUrl,
                "not an http(s) url",
            ));
        };
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            // A redirect would post the request (its arguments, the user's answers) to an
            // endpoint the gate did not bind.
            .max_redirects(0)
            .build();
        Ok(Self {
            url: normalised.clone(),
            server,
            agent: config.into(),
            session: None,
        })
    }

    /// The URL requests go to (normalised).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn post(
        agent: &ureq::Agent,
        url: &str,
        session: Option<&str>,
        request: &Owned,
    ) -> Result<Reply, TransportError> {
        let mut builder = agent
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", &request.protocol_version)
            .header("Mcp-Method", &request.method);
        if let Some(name) = &request.name {
            builder = builder.header("Mcp-Name", mcp_name_header(name));
        }
        if let Some(session) = session {
            builder = builder.header("Mcp-Session-Id", session);
        }
        let response = builder.send(request.json.as_str()).map_err(|e| {
            TransportError::new(
                TransportCode::TransportFailed,
                format!("post to the server: {e}"),
            )
        })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let session = header("mcp-session-id");
        let content_type = header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let mut body = response.into_body();
        if request.id.is_none() || status == 202 || status == 204 {
            return Ok(Reply {
                text: None,
                session,
            });
        }
        if content_type.starts_with("text/event-stream") {
            let text =
                Self::read_events(agent, url, session.as_deref(), request, body.into_reader())?;
            return Ok(Reply {
                text: Some(text),
                session,
            });
        }
        if content_type.starts_with("application/json") {
            // Any status: a JSON-RPC error (e.g. -32022 on a 400) is the server's answer,
            // and the gate ends the binding on it.
            let text = body
                .with_config()
                .limit(MAX_MESSAGE_BYTES as u64)
                .read_to_string()
                .map_err(|e| {
                    TransportError::new(
                        TransportCode::TransportFailed,
                        format!("reading the response: {e}"),
                    )
                })?;
            return Ok(Reply {
                text: Some(text),
                session,
            });
        }
        let code = if status == 404 && session.is_some() {
            TransportCode::SessionExpired
        } else {
            TransportCode::HttpStatus
        };
        Err(TransportError::new(
            code,
            format!("the server answered http {status} with no json-rpc message"),
        ))
    }

    /// Read an SSE stream until the event that carries the response to `request`.
    fn read_events(
        agent: &ureq::Agent,
        url: &str,
        session: Option<&str>,
        request: &Owned,
        mut reader: impl Read,
    ) -> Result<String, TransportError> {
        let Some(id) = &request.id else {
            return Err(TransportError::new(
                TransportCode::NoResponse,
                "a notification got a stream",
            ));
        };
        // The proxy's reader, with the same caps: an event, and the whole stream, at most
        // the message cap.
        let mut parser = Parser::new(MAX_MESSAGE_BYTES, Some(MAX_MESSAGE_BYTES));
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = reader.read(&mut buf).map_err(|e| {
                TransportError::new(
                    TransportCode::TransportFailed,
                    format!("reading the event stream: {e}"),
                )
            })?;
            let Some(read) = buf.get(..n).filter(|read| !read.is_empty()) else {
                break;
            };
            for event in parser.feed(read).map_err(stream_error)? {
                if let Some(response) = Self::on_event(agent, url, session, request, id, event)? {
                    return Ok(response);
                }
            }
        }
        // An event whose blank line never came is still read, as the proxy reads it.
        if let Some(event) = parser.finish().map_err(stream_error)?
            && let Some(response) = Self::on_event(agent, url, session, request, id, event)?
        {
            return Ok(response);
        }
        Err(TransportError::new(
            TransportCode::NoResponse,
            "the event stream ended without the response",
        ))
    }

    /// Take one event as the proxy does: the response ends the stream; a server request is
    /// answered; a notification is passed over; JSON in an event of another type, or a
    /// response under another id, is refused.
    fn on_event(
        agent: &ureq::Agent,
        url: &str,
        session: Option<&str>,
        request: &Owned,
        id: &mrtr_gate_host::core::RequestId,
        event: Event,
    ) -> Result<Option<String>, TransportError> {
        let text = event
            .message()
            .map_err(|e| TransportError::new(TransportCode::InvalidMessage, e.to_string()))?;
        let Some(text) = text else {
            return Ok(None);
        };
        match route(text, id) {
            Routed::Response => Ok(Some(event.data)),
            Routed::ServerRequest(sid, method) => {
                let answer = Owned {
                    id: None,
                    method: method.clone(),
                    name: None,
                    protocol_version: request.protocol_version.clone(),
                    json: answer_server_request(&sid, &method),
                };
                let _ = Self::post(agent, url, session, &answer)?;
                Ok(None)
            }
            Routed::OtherResponse => Err(TransportError::new(
                TransportCode::InvalidMessage,
                "the server answered under an id the request did not carry",
            )),
            Routed::Other => Ok(None),
        }
    }
}

/// A stream past its cap, or not text.
fn stream_error(e: StreamError) -> TransportError {
    match e {
        StreamError::TooLarge => TransportError::new(
            TransportCode::MessageTooLarge,
            format!("the event stream passed {MAX_MESSAGE_BYTES} bytes"),
        ),
        StreamError::NotText => {
            TransportError::new(TransportCode::InvalidUtf8, "the event stream is not utf-8")
        }
        _ => TransportError::new(
            TransportCode::TransportFailed,
            "the event stream could not be read",
        ),
    }
}

/// An [`Outgoing`] that a worker thread can own.
struct Owned {
    id: Option<mrtr_gate_host::core::RequestId>,
    method: String,
    name: Option<String>,
    protocol_version: String,
    json: String,
}

impl Transport for HttpTransport {
    fn server(&self) -> &ServerIdentity {
        &self.server
    }

    fn request(
        &mut self,
        request: Outgoing<'_>,
        waiting: &mut dyn Waiting,
    ) -> Result<String, TransportError> {
        let owned = Owned {
            id: Some(request.id.clone()),
            method: request.method.to_owned(),
            name: request.name.map(str::to_owned),
            protocol_version: request.protocol_version.to_owned(),
            json: request.json.to_owned(),
        };
        let (agent, url, session) = (self.agent.clone(), self.url.clone(), self.session.clone());
        let (tx, rx) = channel();
        // The POST runs on its own thread so the wait can show progress and be cancelled.
        std::thread::spawn(move || {
            let _ = tx.send(Self::post(&agent, &url, session.as_deref(), &owned));
        });
        let started = Instant::now();
        let reply = loop {
            match rx.recv_timeout(TICK) {
                Ok(reply) => break reply,
                Err(RecvTimeoutError::Timeout) => {
                    if !waiting.tick(started.elapsed()) {
                        return Err(TransportError::new(
                            TransportCode::Cancelled,
                            "the wait was cancelled",
                        ));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TransportError::new(
                        TransportCode::TransportFailed,
                        "the request was lost",
                    ));
                }
            }
        };
        let reply = reply.inspect_err(|e| {
            if e.code == TransportCode::SessionExpired {
                self.session = None;
            }
        })?;
        if reply.session.is_some() {
            self.session = reply.session;
        }
        reply.text.ok_or_else(|| {
            TransportError::new(
                TransportCode::NoResponse,
                "the server sent no response to a request",
            )
        })
    }

    fn notify(&mut self, method: &str, json: &str) -> Result<(), TransportError> {
        let owned = Owned {
            id: None,
            method: method.to_owned(),
            name: None,
            protocol_version: crate::PROTOCOL_VERSION.to_owned(),
            json: json.to_owned(),
        };
        Self::post(&self.agent, &self.url, self.session.as_deref(), &owned).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_a_header_cannot_carry_are_base64() {
        assert_eq!(mcp_name_header("book_flight"), "book_flight");
        assert_eq!(mcp_name_header("file:///a b.txt"), "file:///a b.txt");
        assert_eq!(mcp_name_header("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(
            mcp_name_header("a\r\nX-Injected: 1"),
            "=?base64?YQ0KWC1JbmplY3RlZDogMQ==?="
        );
        assert_eq!(mcp_name_header(" edge"), "=?base64?IGVkZ2U=?=");
    }

    #[test]
    fn only_http_urls_without_userinfo_are_endpoints() {
        for bad in [
            "ftp://x/mcp",
            "https://user:pw@x/mcp",
            "https://x/mcp#frag",
            "not a url",
        ] {
            assert_eq!(
                HttpTransport::connect(bad).err().map(|e| e.code),
                Some(TransportCode::InvalidUrl),
                "{bad}"
            );
        }
        let t = HttpTransport::connect("HTTP://LocalHost:80/mcp").ok();
        assert_eq!(
            t.map(|t| t.url().to_owned()).as_deref(),
            Some("http://localhost/mcp")
        );
    }
}
