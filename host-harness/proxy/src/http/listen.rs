//! The 2025-era GET stream (a server's messages outside any request), and the upstream's
//! own requests wherever they come. On the GET stream no request of the client's waits, so
//! nothing on it can be judged: notifications pass, a response is dropped, and a request for
//! input (`elicitation/create`, `sampling/createMessage`, `roots/list`) is answered upstream
//! by the engine (unknown method) and never shown to the client, unless the engine is told
//! to let such requests through (`--allow-legacy-server-requests`).

use super::answer::{ProxyBody, Read, empty, read};
use super::bridge::Bridge;
use super::headers;
use super::queue::{EventSender, event_stream};
use super::sse;
use super::upstream::{self, Upstream};
use crate::engine::{Action, Principal};
use crate::ids::MAX_MESSAGE_BYTES;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Response};
use mrtr_gate_host::wire::sse::Parser;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// What answering the upstream's requests needs.
#[derive(Clone, Debug)]
pub struct Listener {
    /// The engine.
    pub bridge: Bridge,
    /// The upstream.
    pub upstream: Upstream,
    /// The protocol session the stream belongs to.
    pub session: Option<HeaderValue>,
    /// The protocol version the client named.
    pub version: Option<HeaderValue>,
    /// Who opened the stream, when trusted headers name each request's principal.
    pub principal: Option<Principal>,
    /// The bytes the principal's event streams may queue, and their cap.
    pub queue: (Arc<Semaphore>, usize),
}

impl Listener {
    /// A request of the upstream's: the engine answers it upstream itself, or lets the
    /// client see it on `tx`.
    pub async fn server_request(&self, text: String, tx: &EventSender) {
        let session = self
            .session
            .as_ref()
            .and_then(|s| s.to_str().ok())
            .map(str::to_owned);
        match self
            .bridge
            .server(self.principal.clone(), session, text)
            .await
        {
            Action::ToServer(answer) => {
                let this = self.clone();
                tokio::spawn(async move { this.answer_upstream(answer).await });
            }
            Action::ToClient(text) => {
                tx.send(sse::message_event(&text)).await;
            }
            Action::Gated { .. } | Action::Drop(_) | Action::AskConsent(..) => {}
        }
    }

    /// POST the engine's answer to a request of the upstream's, under the stream's session.
    async fn answer_upstream(&self, answer: String) {
        let mut out = HeaderMap::new();
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        out.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        out.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        if let Some(s) = &self.session {
            out.insert(headers::SESSION, s.clone());
        }
        if let Some(v) = &self.version {
            out.insert(headers::PROTOCOL_VERSION, v.clone());
        }
        match self
            .upstream
            .send(Method::POST, out, Bytes::from(answer))
            .await
        {
            // Whatever comes back answers nobody's request.
            Ok(response) => {
                let mut body = response.into_body();
                let _ =
                    upstream::read_capped(&mut body, MAX_MESSAGE_BYTES, self.upstream.timeout())
                        .await;
            }
            Err(refusal) => crate::log::warn(
                "upstream_request_unanswered",
                &format!(
                    "could not answer the upstream's request: {}",
                    refusal.message
                ),
                &[("code", &refusal.code)],
            ),
        }
    }

    /// Relay the upstream's GET stream to the client until either side ends it.
    pub fn relay(self, body: Incoming) -> ProxyBody {
        let (tx, stream) = event_stream(Arc::clone(&self.queue.0), self.queue.1);
        tokio::spawn(async move { self.pump(body, tx).await });
        stream
    }

    async fn pump(self, mut body: Incoming, tx: EventSender) {
        // A listening stream lives as long as both sides keep it: no stream cap and no idle
        // limit, only the cap on one event.
        let mut parser = Parser::new(MAX_MESSAGE_BYTES, None);
        let forever = Duration::from_secs(u64::from(u32::MAX));
        loop {
            let next = tokio::select! {
                () = tx.closed() => return,
                next = upstream::next_data(&mut body, forever) => next,
            };
            let events = match next.map(|d| d.map(|bytes| parser.feed(&bytes))) {
                Ok(Some(Ok(events))) => events,
                // The end, a broken stream, or an event past its cap: the stream ends.
                _ => return,
            };
            for event in events {
                let text = match event.message() {
                    Ok(Some(text)) => text,
                    Ok(None) => continue,
                    Err(e) => {
                        crate::log::info(
                            "dropped",
                            &format!("dropped an event on the listening stream: {e}"),
                            &[],
                        );
                        continue;
                    }
                };
                // No response is awaited here: any response is one no reader should take.
                match read(text, &Value::Bool(false)) {
                    Ok(Read::Notification) => {
                        tx.send(sse::message_event(&event.data)).await;
                    }
                    Ok(Read::Request) => self.server_request(event.data, &tx).await,
                    Ok(Read::Response) | Err(_) => {
                        crate::log::info(
                            "dropped",
                            "dropped a message on the listening stream that is no request or notification",
                            &[],
                        );
                    }
                }
            }
        }
    }
}

/// The answer to a GET or DELETE whose upstream answer carries nothing to relay: its status
/// and passed headers.
pub fn status_only(answer: &Response<Incoming>) -> Response<ProxyBody> {
    let mut response = Response::new(empty());
    *response.status_mut() = answer.status();
    *response.headers_mut() = headers::client_response(answer.headers());
    response
}
