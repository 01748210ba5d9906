//! The raw upstream, the proxy in front of it, and the raw client the tests drive.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mrtr_gate_host::core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::core::{Policy, ServerIdentity};
use mrtr_gate_host::services::{SharedConsent, SharedStorage};
use mrtr_gate_host::{HostServices, NativeGate};
use mrtr_gate_proxy::consent::DeferredConsent;
use mrtr_gate_proxy::http::{HttpOptions, serve};
use mrtr_gate_proxy::rounds::RoundIndex;
use mrtr_gate_proxy::{Engine, EngineConfig, IdMinter, Principal};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// A hang guard: long enough for any machine, short enough that a hang fails the test.
pub const GUARD: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- the raw upstream

/// A request the upstream received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub headers: HeaderMap,
    pub body: String,
}

impl Seen {
    /// The JSON-RPC id of the body, as JSON text.
    pub fn id(&self) -> String {
        let v: Value = serde_json::from_str(&self.body).unwrap();
        v["id"].to_string()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// How the upstream answers.
pub enum Script {
    Json(StatusCode, Vec<(&'static str, String)>, String),
    Sse(Vec<(&'static str, String)>, String),
    /// An event stream that sends its text and then stays open; the flag is set when the
    /// proxy drops it.
    SseOpen(String),
    Status(StatusCode, Vec<(&'static str, String)>),
    /// Never answers; the flag is set when the proxy drops the request.
    Hang,
}

pub type Answer = Arc<dyn Fn(&Seen) -> Script + Send + Sync>;

pub struct Upstream {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub dropped: Arc<Mutex<usize>>,
}

impl Upstream {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

pub struct DropFlag(Arc<Mutex<usize>>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        *self.0.lock().unwrap() += 1;
    }
}

pub async fn upstream(answer: impl Fn(&Seen) -> Script + Send + Sync + 'static) -> Upstream {
    upstream_on(answer, None).await
}

/// The raw upstream, over TLS when `tls` is given.
pub async fn upstream_on(
    answer: impl Fn(&Seen) -> Script + Send + Sync + 'static,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Upstream {
    let answer: Answer = Arc::new(answer);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dropped = Arc::new(Mutex::new(0));
    let (s, d) = (seen.clone(), dropped.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (answer, seen, dropped) = (answer.clone(), s.clone(), d.clone());
            let tls = tls.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let (answer, seen, dropped) = (answer.clone(), seen.clone(), dropped.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        let got = Seen {
                            method: parts.method,
                            headers: parts.headers,
                            body: String::from_utf8(body.to_vec()).unwrap(),
                        };
                        seen.lock().unwrap().push(got.clone());
                        let response = match answer(&got) {
                            Script::Json(status, headers, body) => {
                                reply(status, "application/json", headers, body)
                            }
                            Script::Sse(headers, body) => {
                                reply(StatusCode::OK, "text/event-stream", headers, body)
                            }
                            Script::Status(status, headers) => {
                                reply(status, "", headers, String::new())
                            }
                            Script::SseOpen(body) => {
                                let mut r = reply(
                                    StatusCode::OK,
                                    "text/event-stream",
                                    vec![],
                                    String::new(),
                                );
                                let open = OpenStream {
                                    bytes: Some(Bytes::from(body)),
                                    _dropped: DropFlag(dropped),
                                };
                                *r.body_mut() = open.boxed();
                                r
                            }
                            Script::Hang => {
                                let _flag = DropFlag(dropped);
                                let never: Infallible = std::future::pending().await;
                                match never {}
                            }
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                match tls {
                    None => {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                    Some(tls) => {
                        // A client that refuses the certificate ends the handshake.
                        if let Ok(stream) = tls.accept(stream).await {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                }
            });
        }
    });
    Upstream { url, seen, dropped }
}

/// A body that sends its bytes, then never ends.
struct OpenStream {
    bytes: Option<Bytes>,
    _dropped: DropFlag,
}

impl hyper::body::Body for OpenStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        match self.bytes.take() {
            Some(bytes) => std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(bytes)))),
            None => std::task::Poll::Pending,
        }
    }
}

pub fn reply(
    status: StatusCode,
    content_type: &str,
    headers: Vec<(&'static str, String)>,
    body: String,
) -> Response<http_body_util::combinators::BoxBody<Bytes, Infallible>> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    if !content_type.is_empty() {
        r.headers_mut()
            .insert("content-type", HeaderValue::from_str(content_type).unwrap());
    }
    for (n, v) in headers {
        r.headers_mut()
            .append(n, HeaderValue::from_str(&v).unwrap());
    }
    r
}

// ---------------------------------------------------------------- the proxy

pub struct Proxy {
    pub url: String,
    pub audit: MemoryAudit,
    pub storage: MemoryStorage,
}

impl Proxy {
    /// Bindings the gate holds.
    pub fn bindings(&self) -> usize {
        self.storage.live_keys("mrtr-gate/v3/id/").len()
    }

    /// The outcomes of the trail's terminal events.
    pub fn terminals(&self) -> Vec<(String, Value)> {
        self.audit
            .events()
            .into_iter()
            .filter(|e| e["event"] == "terminal")
            .map(|e| (e["outcome"].as_str().unwrap_or("").to_owned(), e))
            .collect()
    }

    pub async fn wait_terminals(&self, n: usize) -> Vec<(String, Value)> {
        let start = std::time::Instant::now();
        loop {
            let t = self.terminals();
            if t.len() >= n || start.elapsed() > GUARD {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// An engine over fresh in-memory services.
pub fn engine_for(server: ServerIdentity) -> Engine<NativeGate> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    engine(
        server,
        MemoryAudit::new(),
        MemoryStorage::new(clock.clone()),
        clock,
        None,
    )
}

pub fn engine(
    server: ServerIdentity,
    audit: MemoryAudit,
    storage: MemoryStorage,
    clock: Arc<ManualClock>,
    deferred_consent: Option<Arc<DeferredConsent>>,
) -> Engine<NativeGate> {
    let storage: SharedStorage = Arc::new(storage);
    let consent: SharedConsent = match &deferred_consent {
        Some(deferred) => deferred.clone(),
        None => Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
    };
    let services = HostServices {
        clock,
        storage: storage.clone(),
        consent,
        audit: Arc::new(audit),
    };
    let policy = Policy::default();
    let config = EngineConfig {
        server,
        principal: Principal {
            user: "alice".into(),
            tenant: "acme".into(),
        },
        rounds: RoundIndex::new(storage, policy.round_trip_lifetime_ms + 60_000),
        policy,
        allow_legacy_server_requests: false,
        allow_ungated_input: false,
        deferred_consent,
        policies: None,
    };
    Engine::new(
        NativeGate::new(services),
        config,
        IdMinter::with_nonce(0x77),
    )
}

pub async fn proxy_with(options: HttpOptions) -> Proxy {
    proxy_consenting(options, None).await
}

/// A proxy whose engine asks `consent` off its thread, as `--consent tty` and `command` do
/// over HTTP.
pub async fn proxy_deferring(upstream: &Upstream, consent: SharedConsent) -> Proxy {
    let deferred = Arc::new(DeferredConsent::new(consent));
    proxy_consenting(HttpOptions::new(upstream.url.clone()), Some(deferred)).await
}

async fn proxy_consenting(options: HttpOptions, deferred: Option<Arc<DeferredConsent>>) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let audit = MemoryAudit::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = MemoryStorage::new(clock.clone());
    let (a, s) = (audit.clone(), storage.clone());
    tokio::spawn(async move {
        serve(options, listener, move |server| {
            engine(server, a, s, clock, deferred)
        })
        .await
        .unwrap();
    });
    Proxy {
        url,
        audit,
        storage,
    }
}

pub async fn proxy(upstream: &Upstream) -> Proxy {
    proxy_with(HttpOptions::new(upstream.url.clone())).await
}

// ---------------------------------------------------------------- the raw client

pub struct Answered {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answered {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The gate's (or the proxy's) code and the JSON-RPC code of an error answer.
    pub fn refusal(&self) -> (i64, String) {
        let v = self.json();
        (
            v["error"]["code"].as_i64().unwrap(),
            v["error"]["data"]["mrtr_gate"]["code"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    }

    /// The data of each event of a stream answer, with the raw lines kept for inspection.
    pub fn events(&self) -> Vec<String> {
        self.body
            .split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                e.lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }
}

pub async fn send(
    url: &str,
    method: Method,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Answered {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut req = Request::new(Full::new(body.into()));
    *req.method_mut() = method;
    *req.uri_mut() = url.parse().unwrap();
    for (n, v) in headers {
        req.headers_mut().append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_bytes(v.as_bytes()).unwrap(),
        );
    }
    let exchange = async {
        let response = client.request(req).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Answered {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    };
    tokio::time::timeout(GUARD, exchange).await.unwrap()
}

/// What the proxy wrote back on a raw connection, up to the end of its JSON body (or the
/// connection's end).
pub async fn read_answer(s: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            if answer.ends_with(b"}}}") {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(GUARD, read).await;
    String::from_utf8_lossy(&answer).into_owned()
}

pub const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");

/// A 2026 request's headers for `method` (and `name`).
pub fn mcp_headers(
    method: &'static str,
    name: Option<&'static str>,
) -> Vec<(&'static str, &'static str)> {
    let mut h = vec![
        ("content-type", "application/json"),
        ACCEPT,
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(n) = name {
        h.push(("mcp-name", n));
    }
    h
}

pub async fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Answered {
    send(url, Method::POST, headers, body.to_owned()).await
}

pub fn call(id: &str, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"to":"LIS"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}},"url":{{}}}}}}}}}}}}"#
    )
}

pub fn form_round(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0", "id":{id},"result":{{"resultType":"input_required","inputRequests":{{"seat":{{"method":"elicitation/create","params":{{"mode":"form","message":"Pick a seat","requestedSchema":{{"type":"object","properties":{{"seat":{{"type":"string","maxLength":4}}}},"required":["seat"]}}}}}}}},"requestState":"opaque \u00e9"}}}}"#
    )
}

pub fn complete(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#
    )
}
