//! The MCP endpoint (streamable HTTP, HTTP/1.1) on `127.0.0.1:0`: POSTs at `/mcp` are
//! recorded whole, then answered by the scenario ([`crate::mcp`]); `GET` is 405 (both SDKs
//! read it as "no stream"), `DELETE` 200, other paths 404. Every request is recorded before it
//! is answered, so what the client sent is in the recording even if it never reads the answer.

use crate::listen::Listener;
use crate::record::Request;
use crate::respond::Reply;
use crate::scenario::Scenario;
use crate::serve::Served;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use std::io;
use std::sync::Arc;
use std::time::Duration;

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
    /// Starts serving `scenario`, whose URL placeholders name the canary at `canary`.
    pub fn start(scenario: Arc<Scenario>, canary: u16) -> io::Result<Server> {
        let shared = Arc::new(Served::new(scenario, canary));
        let serving = shared.clone();
        let listener = Listener::start(move |stream| {
            let shared = serving.clone();
            async move {
                let _ = stream.set_nodelay(true);
                let service = service_fn(move |request| {
                    let shared = shared.clone();
                    async move { handle(&shared, request).await }
                });
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
    /// and whether every connection ended within `guard`.
    pub async fn finish(self, guard: Duration) -> (Vec<Request>, bool) {
        let ended = self.listener.finish(guard).await;
        (self.shared.take_requests(), ended)
    }
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
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
    shared: &Served,
    request: hyper::Request<Incoming>,
) -> Result<Response<Full<Bytes>>, CloseConnection> {
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
    let recorded = shared.arrive(method.as_str(), &path, body);
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
        // HTTP's framing of each reply: the one place a new kind of reply is written here.
        match answered.reply {
            None => empty(status),
            Some(Reply::Close) => {
                shared.record(recorded);
                return Err(CloseConnection);
            }
            Some(reply @ (Reply::Json(_) | Reply::Sse(_))) => {
                let mut response = Response::new(Full::new(Bytes::from(reply.body())));
                *response.status_mut() = status;
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static(reply.content_type()),
                );
                response
            }
        }
    } else {
        empty(StatusCode::METHOD_NOT_ALLOWED)
    };
    shared.record(recorded);
    Ok(response)
}
