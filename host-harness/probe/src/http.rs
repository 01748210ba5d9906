//! The MCP endpoint (streamable HTTP, HTTP/1.1) on `127.0.0.1:0`: POSTs at `/mcp` are
//! recorded whole, then answered by the scenario ([`crate::serve`]); `GET` is 405 (both SDKs
//! read it as "no stream"), `DELETE` 200, other paths 404. Every request is recorded before it
//! is answered, so what the client sent is in the recording even if it never reads the answer.
//! A held call ([`crate::hold`]) is a stream left open after its notification: the client
//! closing it, or a `notifications/cancelled` naming it, cancels it, and the next request's
//! stream starts with the late round (a request that comes while the call is held waits for
//! the hold to settle, so a close the probe has not yet seen cannot race the late round away).

use crate::hold::HoldRecord;
use crate::listen::Listener;
use crate::record::Request;
use crate::respond::{Reply, sse_event};
use crate::scenario::Scenario;
use crate::serve::Served;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, Infallible>;

/// A body larger than this is refused (413) and recorded as its first bytes only.
const BODY_LIMIT: usize = 16 << 20;

/// The path the endpoint serves.
pub const MCP_PATH: &str = "/mcp";

/// The running endpoint.
pub struct Server {
    listener: Listener,
    shared: Arc<Served>,
}

impl Server {
    /// Starts serving `scenario`, whose URL placeholders name the canary at `canary`; a held
    /// call falls back after `fallback`.
    pub fn start(scenario: Arc<Scenario>, canary: u16, fallback: Duration) -> io::Result<Server> {
        let shared = Arc::new(Served::new(scenario, canary, fallback));
        let serving = shared.clone();
        let listener = Listener::start(move |stream| {
            let shared = serving.clone();
            async move {
                let _ = stream.set_nodelay(true);
                let service = service_fn(move |request| handle(shared.clone(), request));
                // A client that hangs up mid-request ends the connection: nothing to report.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        })?;
        Ok(Server { listener, shared })
    }

    /// The endpoint's URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{MCP_PATH}", self.listener.port())
    }

    /// Waits for every connection to end (the client has exited) and returns the requests,
    /// whether every connection ended within `guard`, and the held call's outcome. A held
    /// stream is dropped with its connection, so its close is known once every one has ended.
    pub async fn finish(self, guard: Duration) -> (Vec<Request>, bool, Option<HoldRecord>) {
        let ended = self.listener.finish(guard).await;
        let (requests, hold) = self.shared.take();
        (requests, ended, hold)
    }
}

fn full(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response
}

fn empty(status: StatusCode) -> Response<Body> {
    full(status, String::new())
}

fn typed(status: StatusCode, reply: &Reply) -> Response<Body> {
    let mut response = full(status, reply.body());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(reply.content_type()),
    );
    response
}

/// A held call's stream: events as the hold task sends them; dropped (the client closed the
/// exchange, or its connection) while the call is held, it cancels the call.
struct Held {
    events: mpsc::Receiver<Bytes>,
    shared: Arc<Served>,
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.events
            .poll_recv(cx)
            .map(|event| event.map(|b| Ok(Frame::data(b))))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shared.hold().cancel("closed");
    }
}

/// Starts holding call `id`: its stream opens with `notify`; it ends when the client cancels
/// with `notifications/cancelled` (a close needs no end), or with a plain result at the
/// fallback.
fn hold(shared: &Arc<Served>, id: &str, notify: &str, late: String) -> Response<Body> {
    if let Err(error) = shared.start_hold(id, late) {
        return full(StatusCode::OK, error);
    }
    let (send, events) = mpsc::channel(2);
    let _ = send.try_send(Bytes::from(sse_event(notify)));
    let task_shared = shared.clone();
    let id = id.to_owned();
    tokio::spawn(async move {
        if let Some(result) = task_shared.hold().held(&id).await {
            let _ = send.send(Bytes::from(sse_event(&result))).await;
        }
        // Dropping the sender ends the stream (a closed one has nothing left to end).
        drop(send);
    });
    let body = Held {
        events,
        shared: shared.clone(),
    };
    let mut response = Response::new(body.boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// The error a service returns to make hyper drop the connection without a response.
#[derive(Debug)]
struct CloseConnection;

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the scenario closes the connection")
    }
}

impl std::error::Error for CloseConnection {}

async fn handle(
    shared: Arc<Served>,
    request: hyper::Request<Incoming>,
) -> Result<Response<Body>, CloseConnection> {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let (body, too_large) = match Limited::new(request.into_body(), BODY_LIMIT)
        .collect()
        .await
    {
        Ok(collected) => (
            String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
            false,
        ),
        Err(_) => (String::new(), true),
    };
    let recorded = shared.arrive(method.as_str(), &path, body, started);
    let response = if path != MCP_PATH {
        empty(StatusCode::NOT_FOUND)
    } else if too_large {
        empty(StatusCode::PAYLOAD_TOO_LARGE)
    } else if method == Method::GET {
        empty(StatusCode::METHOD_NOT_ALLOWED)
    } else if method == Method::DELETE {
        empty(StatusCode::OK)
    } else if method == Method::POST {
        let answered = shared.answer(&recorded);
        let status = StatusCode::from_u16(answered.status).unwrap_or(StatusCode::OK);
        let id = recorded.id.clone().unwrap_or_default();
        let is_call = recorded.is_call();
        let seq = shared.record(recorded);
        let late = match &answered.reply {
            Some(Reply::Json(_) | Reply::Sse(_)) if is_call => shared.hold().late_for(seq).await,
            _ => None,
        };
        // HTTP's framing of each reply: the one place a new kind of reply is written here.
        let response = match (answered.reply, late) {
            (None, _) => empty(status),
            (Some(Reply::Close), _) => return Err(CloseConnection),
            (Some(Reply::Hold { notify, late }), _) => hold(&shared, &id, &notify, late),
            (Some(Reply::Json(text)), Some(late)) => typed(status, &Reply::Sse(vec![late, text])),
            (Some(Reply::Sse(mut events)), Some(late)) => {
                events.insert(0, late);
                typed(status, &Reply::Sse(events))
            }
            (Some(reply @ (Reply::Json(_) | Reply::Sse(_))), None) => typed(status, &reply),
        };
        // Before its bytes are written: the client can read it only later, so a gap measured
        // from here is never shorter than the time the client waited.
        shared.answered(seq, Instant::now());
        return Ok(response);
    } else {
        empty(StatusCode::METHOD_NOT_ALLOWED)
    };
    let seq = shared.record(recorded);
    shared.answered(seq, Instant::now());
    Ok(response)
}
