//! The upstream's answer to one request of the client's, read the way the SDK adapters read
//! it (docs/adapters.md): exactly one response under the request's id, as a JSON body or
//! among the events of a stream; anything a client's reader could take for another response
//! (one under another id, a batch, a typed event carrying JSON, a message that is both a
//! request and a response) refuses the answer; on a stream, the first response ends it, and
//! nothing after it is read. The gate judges the one response of
//! a gated call; the client gets the judged text, on a JSON body or as the last event of a
//! stream the proxy writes itself, after the notifications that came before it.

use super::bridge::{Bridge, CancelGuard, engine_gone};
use super::headers;
use super::listen::Listener;
use super::queue::{EventSender, event_stream};
use super::sse;
use super::upstream::{self, Upstream};
use crate::engine::{Action, Principal};
use crate::errors::Refusal;
use crate::ids::MAX_MESSAGE_BYTES;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use mrtr_gate_host::core::RequestId;
use mrtr_gate_host::wire::sse::{Event, Parser, StreamError};
use mrtr_gate_host::wire::{FromServer, from_server};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The body of every answer the proxy gives.
pub type ProxyBody = BoxBody<Bytes, Infallible>;

/// A body of `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into()).boxed()
}

/// No body.
pub fn empty() -> ProxyBody {
    Empty::new().boxed()
}

/// A JSON answer.
pub fn json(status: StatusCode, mut headers: HeaderMap, text: String) -> Response<ProxyBody> {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let mut response = Response::new(full(text));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// What a request of the client's waits for.
#[derive(Debug)]
pub enum Call {
    /// A gated call, sent upstream under a minted id; its guard ends it `cancelled` if the
    /// client goes before it is answered.
    Gated {
        /// The id it went upstream under.
        upstream_id: RequestId,
        /// Armed until the client has its answer.
        guard: CancelGuard,
    },
    /// A request relayed as it came, under the client's own id.
    Relayed,
}

/// One request of the client's on its way through the proxy.
#[derive(Debug)]
pub struct Exchange {
    /// The engine.
    pub bridge: Bridge,
    /// The upstream.
    pub upstream: Upstream,
    /// What the request waits for.
    pub call: Call,
    /// The client's id, its exact JSON text.
    pub client_id: String,
    /// The 2025-era protocol session the request came under.
    pub session: Option<HeaderValue>,
    /// The protocol version the client named (`MCP-Protocol-Version`).
    pub version: Option<HeaderValue>,
    /// The principal trusted headers named for the request (`None`: the configured one).
    pub principal: Option<Principal>,
    /// The bytes its event streams may queue, and their cap.
    pub queue: (Arc<Semaphore>, usize),
}

/// A message of the upstream's, read against the id a response must carry.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Read {
    Response,
    Request,
    Notification,
}

fn refused(code: &str, message: &str) -> Refusal {
    Refusal::upstream(code, message)
}

/// Read one message of the upstream's (as every reader does: [`from_server`]); `expected` is
/// the id its response carries.
pub(super) fn read(text: &str, expected: &Value) -> Result<Read, Refusal> {
    if text.trim_start().starts_with('[') {
        return Err(refused(
            "batch_message",
            "the upstream answered with a batch",
        ));
    }
    match from_server(text) {
        FromServer::Request(..) => Ok(Read::Request),
        FromServer::Notification => Ok(Read::Notification),
        // The id compared as JSON: a relayed request's id may be any the client chose.
        FromServer::Response { raw_id, .. }
            if serde_json::from_str::<Value>(raw_id).ok().as_ref() == Some(expected) =>
        {
            Ok(Read::Response)
        }
        FromServer::Response { .. } => Err(refused(
            "foreign_response",
            "the upstream answered under an id the request did not carry",
        )),
        FromServer::Unreadable => Err(refused(
            "malformed_message",
            "the upstream sent what is not one json-rpc message",
        )),
    }
}

impl Exchange {
    /// The id a response to this request carries upstream.
    fn expected(&self) -> Value {
        match &self.call {
            Call::Gated { upstream_id, .. } => match upstream_id {
                RequestId::Text(s) => Value::String(s.clone()),
                RequestId::Number(n) => Value::from(*n),
            },
            Call::Relayed => serde_json::from_str(&self.client_id).unwrap_or(Value::Null),
        }
    }

    fn session_text(&self) -> Option<String> {
        self.session
            .as_ref()
            .and_then(|s| s.to_str().ok())
            .map(str::to_owned)
    }

    /// What the client gets for the one response `text`: the judged text of a gated call,
    /// the engine's answer to a relayed one (the text as it came).
    async fn deliver(&mut self, text: String) -> String {
        let session = self.session_text();
        match &mut self.call {
            // The engine sees every response, so whatever it checks of an ungated one holds
            // over HTTP as over stdio; it gives the text back as it came.
            Call::Relayed => match self
                .bridge
                .server(self.principal.clone(), session, text)
                .await
            {
                Action::ToClient(text) => text,
                _ => engine_gone().response(&self.client_id),
            },
            Call::Gated { upstream_id, guard } => {
                let action = self
                    .bridge
                    .response(upstream_id.clone(), text, session)
                    .await;
                guard.disarm();
                match action {
                    Action::ToClient(judged) => judged,
                    _ => engine_gone().response(&self.client_id),
                }
            }
        }
    }

    /// What the client gets when the answer is refused: the refusal under its id; a gated
    /// call's binding ends with the refusal's code.
    async fn refuse(&mut self, refusal: Refusal) -> String {
        match &mut self.call {
            Call::Relayed => refusal.response(&self.client_id),
            Call::Gated { upstream_id, guard } => {
                let action = self
                    .bridge
                    .failed(upstream_id.clone(), refusal.clone())
                    .await;
                guard.disarm();
                match action {
                    Action::ToClient(text) => text,
                    _ => refusal.response(&self.client_id),
                }
            }
        }
    }

    /// The client's answer when the upstream could not be asked (or answered a redirect).
    pub async fn failed(mut self, refusal: Refusal) -> Response<ProxyBody> {
        let text = self.refuse(refusal).await;
        json(StatusCode::OK, HeaderMap::new(), text)
    }

    /// The client's answer to the upstream's `answer`.
    pub async fn answer(mut self, answer: Response<Incoming>) -> Response<ProxyBody> {
        let (parts, mut body) = answer.into_parts();
        let status = parts.status;
        let passed = headers::client_response(&parts.headers);
        let failing = status.is_client_error() || status.is_server_error();
        if headers::encoded(&parts.headers) {
            let text = self
                .refuse(refused(
                    "content_encoding",
                    "the upstream encoded its answer; the gate judges text only",
                ))
                .await;
            return json(StatusCode::OK, passed, text);
        }
        let media = headers::media_type(&parts.headers);
        if media.as_deref() == Some("text/event-stream") && status.is_success() {
            let (tx, stream) = event_stream(Arc::clone(&self.queue.0), self.queue.1);
            tokio::spawn(self.pump(body, tx));
            let mut response = Response::new(stream);
            let mut out = passed;
            out.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            out.insert("x-accel-buffering", HeaderValue::from_static("no"));
            *response.headers_mut() = out;
            return response;
        }
        let status_refusal = || {
            refused(
                "http_status",
                &format!("the upstream answered http {}", status.as_u16()),
            )
        };
        let text = if media.as_deref() == Some("application/json")
            && status != StatusCode::ACCEPTED
            && status != StatusCode::NO_CONTENT
        {
            let read_body =
                upstream::read_capped(&mut body, MAX_MESSAGE_BYTES, self.upstream.timeout())
                    .await
                    .and_then(upstream::text);
            let expected = self.expected();
            match read_body.and_then(|t| read(&t, &expected).map(|r| (r, t))) {
                Ok((Read::Response, t)) => self.deliver(t).await,
                Ok(_) if failing => self.refuse(status_refusal()).await,
                Ok(_) => {
                    self.refuse(refused(
                        "no_response",
                        "the upstream's answer holds no response",
                    ))
                    .await
                }
                Err(_) if failing => self.refuse(status_refusal()).await,
                Err(r) => self.refuse(r).await,
            }
        } else if failing {
            self.refuse(status_refusal()).await
        } else {
            self.refuse(refused(
                "no_response",
                "the upstream's answer holds no response",
            ))
            .await
        };
        // An error status stays an error status (a client acts on 404: its session is
        // gone); the proxy's own refusals of a readable exchange are answers.
        let status = if failing { status } else { StatusCode::OK };
        json(status, passed, text)
    }

    /// Relay the upstream's event stream to the client: notifications (and the upstream's
    /// requests the engine lets through) as they come, then the response as soon as it comes,
    /// judged, and the upstream's stream closed; a refusal in its place otherwise.
    async fn pump(mut self, mut body: Incoming, tx: EventSender) {
        // The client gone: the guard, dropped with `self`, ends a gated call `cancelled`,
        // and the upstream's body dropped closes its stream.
        let Some(outcome) = self.read_stream(&mut body, &tx).await else {
            return;
        };
        drop(body);
        let text = match outcome {
            Ok(response) => self.deliver(response).await,
            Err(r) => self.refuse(r).await,
        };
        tx.send(sse::message_event(&text)).await;
    }

    /// The one response of the upstream's stream, or why there is none; `None`: the client
    /// went away.
    async fn read_stream(
        &self,
        body: &mut Incoming,
        tx: &EventSender,
    ) -> Option<Result<String, Refusal>> {
        let mut parser = Parser::new(MAX_MESSAGE_BYTES, Some(MAX_MESSAGE_BYTES));
        let expected = self.expected();
        let idle = self.upstream.timeout();
        let mut held: Option<String> = None;
        loop {
            let next = tokio::select! {
                () = tx.closed() => return None,
                next = upstream::next_data(body, idle) => next,
            };
            let events = match next {
                Err(r) => return Some(Err(r)),
                Ok(Some(bytes)) => match parser.feed(&bytes) {
                    Ok(events) => events,
                    Err(e) => return Some(Err(stream_refusal(&e))),
                },
                Ok(None) => {
                    let last = match parser.finish() {
                        Ok(last) => last,
                        Err(e) => return Some(Err(stream_refusal(&e))),
                    };
                    if let Some(event) = last
                        && let Err(r) = self.on_event(event, &expected, &mut held, tx).await
                    {
                        return Some(Err(r));
                    }
                    return Some(held.take().ok_or_else(|| {
                        refused(
                            "no_response",
                            "the upstream's stream ended with no response",
                        )
                    }));
                }
            };
            for event in events {
                if let Err(r) = self.on_event(event, &expected, &mut held, tx).await {
                    return Some(Err(r));
                }
                // The response ends the answer: the client has it now, even from a server
                // that keeps the stream open after it (the specification asks it to close, but
                // only SHOULD). What follows is never read, so it never reaches the client.
                if let Some(response) = held.take() {
                    return Some(Ok(response));
                }
            }
        }
    }

    async fn on_event(
        &self,
        event: Event,
        expected: &Value,
        held: &mut Option<String>,
        tx: &EventSender,
    ) -> Result<(), Refusal> {
        let Some(text) = event
            .message()
            .map_err(|e| refused("typed_event", &e.to_string()))?
        else {
            return Ok(());
        };
        match read(text, expected)? {
            Read::Notification => {
                tx.send(sse::message_event(&event.data)).await;
            }
            Read::Request => {
                let session = self.session.clone();
                let version = self.version.clone();
                let listener = Listener {
                    bridge: self.bridge.clone(),
                    upstream: self.upstream.clone(),
                    session,
                    version,
                    principal: self.principal.clone(),
                    queue: self.queue.clone(),
                };
                listener.server_request(event.data, tx).await;
            }
            Read::Response => *held = Some(event.data),
        }
        Ok(())
    }
}

/// A stream that went past its cap or is not text.
fn stream_refusal(e: &StreamError) -> Refusal {
    match e {
        StreamError::TooLarge => refused(
            "message_too_large",
            &format!("the upstream's stream is over {MAX_MESSAGE_BYTES} bytes"),
        ),
        StreamError::NotText => refused("malformed_message", "the upstream's stream is not utf-8"),
        // A reason of a later reader: the stream is not one this proxy can read.
        _ => refused(
            "malformed_message",
            "the upstream's stream could not be read",
        ),
    }
}
