//! The streamable-HTTP endpoint over real sockets on 127.0.0.1: a raw upstream written with
//! hyper here (it records every request it receives and answers as each test scripts it), the
//! proxy in front of it, and a raw client. Then the official Python SDK's server upstream.

#![cfg(test)]

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
use mrtr_gate_host::{HostServices, NativeGate};
use mrtr_gate_proxy::http::{HttpOptions, serve};
use mrtr_gate_proxy::{Engine, EngineConfig, IdMinter, Principal};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A hang guard: long enough for any machine, short enough that a hang fails the test.
const GUARD: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- the raw upstream

/// A request the upstream received.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    headers: HeaderMap,
    body: String,
}

impl Seen {
    /// The JSON-RPC id of the body, as JSON text.
    fn id(&self) -> String {
        let v: Value = serde_json::from_str(&self.body).unwrap();
        v["id"].to_string()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// How the upstream answers.
enum Script {
    Json(StatusCode, Vec<(&'static str, String)>, String),
    Sse(Vec<(&'static str, String)>, String),
    Status(StatusCode, Vec<(&'static str, String)>),
    /// Never answers; the flag is set when the proxy drops the request.
    Hang,
}

type Answer = Arc<dyn Fn(&Seen) -> Script + Send + Sync>;

struct Upstream {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    dropped: Arc<Mutex<usize>>,
}

impl Upstream {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

struct DropFlag(Arc<Mutex<usize>>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        *self.0.lock().unwrap() += 1;
    }
}

async fn upstream(answer: impl Fn(&Seen) -> Script + Send + Sync + 'static) -> Upstream {
    let answer: Answer = Arc::new(answer);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dropped = Arc::new(Mutex::new(0));
    let (s, d) = (seen.clone(), dropped.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (answer, seen, dropped) = (answer.clone(), s.clone(), d.clone());
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
                            Script::Hang => {
                                let _flag = DropFlag(dropped);
                                let never: Infallible = std::future::pending().await;
                                match never {}
                            }
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Upstream { url, seen, dropped }
}

fn reply(
    status: StatusCode,
    content_type: &str,
    headers: Vec<(&'static str, String)>,
    body: String,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
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

struct Proxy {
    url: String,
    audit: MemoryAudit,
    storage: MemoryStorage,
}

impl Proxy {
    /// Bindings the gate holds.
    fn bindings(&self) -> usize {
        self.storage.live_keys("mrtr-gate/v3/id/").len()
    }

    /// The outcomes of the trail's terminal events.
    fn terminals(&self) -> Vec<(String, Value)> {
        self.audit
            .events()
            .into_iter()
            .filter(|e| e["event"] == "terminal")
            .map(|e| (e["outcome"].as_str().unwrap_or("").to_owned(), e))
            .collect()
    }

    async fn wait_terminals(&self, n: usize) -> Vec<(String, Value)> {
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

fn engine(
    server: ServerIdentity,
    audit: MemoryAudit,
    storage: MemoryStorage,
    clock: Arc<ManualClock>,
) -> Engine<NativeGate> {
    let services = HostServices {
        clock,
        storage: Arc::new(storage),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
        audit: Arc::new(audit),
    };
    let config = EngineConfig {
        server,
        principal: Principal {
            user: "alice".into(),
            tenant: "acme".into(),
        },
        policy: Policy::default(),
    };
    Engine::new(
        NativeGate::new(services),
        config,
        IdMinter::with_nonce(0x77),
    )
}

async fn proxy_with(options: HttpOptions) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let audit = MemoryAudit::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = MemoryStorage::new(clock.clone());
    let (a, s) = (audit.clone(), storage.clone());
    tokio::spawn(async move {
        serve(options, listener, move |server| engine(server, a, s, clock))
            .await
            .unwrap();
    });
    Proxy {
        url,
        audit,
        storage,
    }
}

async fn proxy(upstream: &Upstream) -> Proxy {
    proxy_with(HttpOptions::new(upstream.url.clone())).await
}

// ---------------------------------------------------------------- the raw client

struct Answered {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answered {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The gate's (or the proxy's) code and the JSON-RPC code of an error answer.
    fn refusal(&self) -> (i64, String) {
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
    fn events(&self) -> Vec<String> {
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

async fn send(
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
async fn read_answer(s: &mut TcpStream) -> String {
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

const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");

/// A 2026 request's headers for `method` (and `name`).
fn mcp_headers(
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

async fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Answered {
    send(url, Method::POST, headers, body.to_owned()).await
}

fn call(id: &str, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"to":"LIS"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}},"url":{{}}}}}}}}}}}}"#
    )
}

fn form_round(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0", "id":{id},"result":{{"resultType":"input_required","inputRequests":{{"seat":{{"method":"elicitation/create","params":{{"mode":"form","message":"Pick a seat","requestedSchema":{{"type":"object","properties":{{"seat":{{"type":"string","maxLength":4}}}},"required":["seat"]}}}}}}}},"requestState":"opaque \u00e9"}}}}"#
    )
}

fn complete(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#
    )
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_that_disagree_with_the_body_get_400_and_32020_and_nothing_goes_upstream() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], complete(&s.id()))).await;
    let p = proxy(&up).await;
    let wrong_name = post(
        &p.url,
        &mcp_headers("tools/call", Some("other")),
        &call("1", "book"),
    )
    .await;
    let mut twice = mcp_headers("tools/call", Some("book"));
    twice.push(("Mcp-Name", "book"));
    let duplicate = post(&p.url, &twice, &call("2", "book")).await;
    let wrong_method = post(
        &p.url,
        &mcp_headers("tools/list", Some("book")),
        &call("3", "book"),
    )
    .await;
    let missing = post(&p.url, &[ACCEPT], &call("4", "book")).await;
    for (a, id) in [
        (&wrong_name, 1),
        (&duplicate, 2),
        (&wrong_method, 3),
        (&missing, 4),
    ] {
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
        assert_eq!(a.json()["error"]["code"], -32020, "{}", a.body);
        assert_eq!(a.json()["id"], id);
    }
    // A name the sentinel carries is decoded before it is compared.
    let ok = post(
        &p.url,
        &mcp_headers("tools/call", Some("=?base64?Ym9vaw==?=")),
        &call("5", "book"),
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.body, complete("5"));
    assert_eq!(up.seen().len(), 1, "only the consistent call went upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_param_and_session_headers_cross_and_connection_headers_do_not() {
    let up = upstream(|s| {
        Script::Json(
            StatusCode::OK,
            vec![("mcp-session-id", "sess-from-upstream".into())],
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[]}}}}"#,
                s.id()
            ),
        )
    })
    .await;
    let p = proxy(&up).await;
    let list = r#"{"jsonrpc":"2.0","id":"L1","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let mut h = mcp_headers("tools/list", None);
    h.extend([
        ("mcp-session-id", "sess-from-client"),
        ("mcp-param-region", "eu-west"),
        ("authorization", "Bearer token-for-upstream"),
        ("origin", "http://localhost:5173"),
        ("accept-encoding", "gzip"),
        ("x-hop", "secret"),
        ("connection", "x-hop"),
    ]);
    let a = post(&p.url, &h, list).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.body,
        format!(r#"{{"jsonrpc":"2.0","id":"L1","result":{{"tools":[]}}}}"#),
        "byte-exact"
    );
    assert_eq!(a.headers["mcp-session-id"], "sess-from-upstream");
    let seen = up.seen();
    let got = &seen[0].headers;
    assert_eq!(seen[0].body, list, "relayed byte-exact");
    assert_eq!(got["mcp-session-id"], "sess-from-client");
    assert_eq!(got["mcp-param-region"], "eu-west");
    assert_eq!(got["mcp-method"], "tools/list");
    assert_eq!(got["mcp-protocol-version"], "2026-07-28");
    assert_eq!(got["authorization"], "Bearer token-for-upstream");
    assert_eq!(got["accept-encoding"], "identity");
    assert!(
        !got.contains_key("origin") && !got.contains_key("x-hop"),
        "{got:?}"
    );
    assert_ne!(
        got["host"],
        p.url.trim_start_matches("http://").trim_end_matches("/mcp")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed_and_ends_the_call() {
    let target = upstream(|s| Script::Json(StatusCode::OK, vec![], complete(&s.id()))).await;
    let location = target.url.clone();
    let up = upstream(move |_| {
        Script::Status(
            StatusCode::TEMPORARY_REDIRECT,
            vec![("location", location.clone())],
        )
    })
    .await;
    let p = proxy(&up).await;
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("book")),
        &call("9", "book"),
    )
    .await;
    assert_eq!(
        a.refusal(),
        (-31003, "redirect_refused".into()),
        "{}",
        a.body
    );
    assert_eq!(a.json()["id"], 9);
    assert_eq!((up.seen().len(), target.seen().len()), (1, 0));
    let ends = p.wait_terminals(1).await;
    assert_eq!(ends[0].0, "error");
    assert_eq!(ends[0].1["reason"], "redirect_refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_stream_is_reframed_notifications_first_then_the_judged_round() {
    let up = upstream(|s| {
        let id = s.id();
        let round = form_round(&id);
        let round_lines = round.replacen(",\"result\"", ",\n\"result\"", 1);
        let data: String = round_lines.lines().map(|l| format!("data: {l}\r\n")).collect();
        Script::Sse(
            vec![("mcp-session-id", "s-9".into())],
            format!(
                "id: prime-1\nretry: 5\ndata: \n\n: a comment\nevent: message\nid: 2\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":1}}}}\n\nid: 3\n{data}\r\n"
            ),
        )
    })
    .await;
    let p = proxy(&up).await;
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("book")),
        &call(r#""c-1""#, "book"),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.headers["content-type"], "text/event-stream");
    assert_eq!(a.headers["mcp-session-id"], "s-9");
    assert!(
        !a.body.contains("id:") && !a.body.contains("retry:"),
        "{}",
        a.body
    );
    let events = a.events();
    assert_eq!(events.len(), 2, "{}", a.body);
    assert!(events[0].contains("notifications/progress"));
    let expected = form_round(r#""c-1""#).replacen(",\"result\"", ",\n\"result\"", 1);
    assert_eq!(events[1], expected, "the round byte-exact but for the id");
    assert!(p.terminals().is_empty(), "the round is open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_response_a_foreign_one_or_a_batch_on_the_stream_is_refused() {
    for (case, stream, code) in [
        (
            "second",
            "data: ROUND\n\ndata: DONE\n\n",
            "duplicate_response",
        ),
        (
            "foreign",
            "data: FOREIGN\n\ndata: ROUND\n\n",
            "foreign_response",
        ),
        ("batch", "data: [DONE]\n\n", "batch_message"),
        (
            "typed",
            "event: other\ndata: DONE\n\ndata: ROUND\n\n",
            "typed_event",
        ),
        (
            "none",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n\n",
            "no_response",
        ),
    ] {
        let up = upstream(move |s| {
            let id = s.id();
            let body = stream
                .replace("ROUND", &form_round(&id).replace('\n', ""))
                .replace("DONE", &complete(&id))
                .replace("FOREIGN", &complete(r#""mg:0000000000000077:999""#));
            Script::Sse(vec![], body)
        })
        .await;
        let p = proxy(&up).await;
        let a = post(
            &p.url,
            &mcp_headers("tools/call", Some("book")),
            &call("5", "book"),
        )
        .await;
        let events = a.events();
        let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
        assert_eq!(last["error"]["code"], -31003, "{case}: {}", a.body);
        assert_eq!(last["error"]["data"]["mrtr_gate"]["code"], code, "{case}");
        assert_eq!(last["id"], 5, "{case}");
        assert!(
            !a.body.contains("Pick a seat") && !a.body.contains("done"),
            "{case}: {}",
            a.body
        );
        let ends = p.wait_terminals(1).await;
        assert_eq!(ends.len(), 1, "{case}");
        assert_eq!(
            (ends[0].0.as_str(), &ends[0].1["reason"]),
            ("error", &json!(code)),
            "{case}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_64_mib_is_refused_before_anything_goes_upstream() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], complete(&s.id()))).await;
    let p = proxy(&up).await;
    let cap = 64 * 1024 * 1024;
    let addr = p
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // Declared by its length: refused before a byte of the body is read.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        cap + 1
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let answer = read_answer(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("-31004") && answer.contains("message_too_large"),
        "{answer}"
    );
    // Chunked, with no length given: refused when the cap is passed.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let chunk = vec![b' '; 1 << 20];
    let mut sent = 0;
    while sent <= cap {
        let head = format!("{:x}\r\n", chunk.len());
        if s.write_all(head.as_bytes()).await.is_err()
            || s.write_all(&chunk).await.is_err()
            || s.write_all(b"\r\n").await.is_err()
        {
            break;
        }
        sent += chunk.len();
    }
    let answer = read_answer(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_the_gate_refuses_reaches_the_client_as_31000_and_nothing_more_is_sent() {
    let up = upstream(|s| {
        Script::Json(
            StatusCode::OK,
            vec![],
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","inputRequests":{{"u":{{"method":"elicitation/create","params":{{"mode":"url","message":"Sign in","url":"javascript:alert(1)","elicitationId":"e1"}}}}}}}}}}"#,
                s.id()
            ),
        )
    })
    .await;
    let p = proxy(&up).await;
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("book")),
        &call("3", "book"),
    )
    .await;
    let (code, gate_code) = a.refusal();
    assert_eq!(code, -31000, "{}", a.body);
    assert!(!gate_code.is_empty());
    assert_eq!(a.json()["error"]["data"]["mrtr_gate"]["audited"], true);
    assert!(!a.body.contains("javascript"), "{}", a.body);
    assert_eq!(up.seen().len(), 1, "nothing more went upstream");
    assert_eq!(p.wait_terminals(1).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_round_reaches_the_client_byte_exact_but_for_the_id() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], form_round(&s.id()))).await;
    let p = proxy(&up).await;
    for id in ["7", r#""seven""#, "1e400"] {
        let a = post(
            &p.url,
            &mcp_headers("tools/call", Some("book")),
            &call(id, "book"),
        )
        .await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(a.headers["content-type"], "application/json");
        assert_eq!(a.body, form_round(id));
    }
    // Upstream, each went under an id the proxy minted, with the client's params.
    for seen in up.seen() {
        let v = seen.json();
        assert!(
            v["id"]
                .as_str()
                .unwrap()
                .starts_with("mg:0000000000000077:"),
            "{v}"
        );
        assert_eq!(v["params"]["arguments"], json!({"to": "LIS"}));
    }
    assert!(p.terminals().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_call_ends_its_binding_cancelled_and_the_upstream_request() {
    let up = upstream(|_| Script::Hang).await;
    let p = proxy(&up).await;
    let addr = p
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let body = call("1", "book");
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: book\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let start = std::time::Instant::now();
    while up.seen().is_empty() && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(up.seen().len(), 1);
    assert_eq!(p.bindings(), 1);
    drop(s);
    // The call had opened no round, so the trail has no terminal event for it (audit.md);
    // the binding is gone from the gate, and the upstream's request closed.
    let start = std::time::Instant::now();
    while (p.bindings() > 0 || *up.dropped.lock().unwrap() == 0) && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(p.bindings(), 0, "the binding ended");
    assert_eq!(
        *up.dropped.lock().unwrap(),
        1,
        "the upstream request was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_get_stream_passes_notifications_answers_input_requests_itself_and_drops_responses() {
    let up = upstream(|s| match s.method {
        Method::GET => Script::Sse(
            vec![],
            concat!(
                "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"elicitation/create\",\"params\":{\"message\":\"password?\",\"requestedSchema\":{}}}\n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":\"mg:0000000000000077:1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"SMUGGLED\"}]}}\n\n",
                "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"last\"}}\n\n",
            )
            .into(),
        ),
        _ => Script::Status(StatusCode::ACCEPTED, vec![]),
    })
    .await;
    let p = proxy(&up).await;
    let resumed = send(&p.url, Method::GET, &[ACCEPT, ("last-event-id", "3")], "").await;
    assert_eq!(resumed.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        up.seen().is_empty(),
        "a resumption never reaches the upstream"
    );
    let a = send(
        &p.url,
        Method::GET,
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", "s-1"),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        "",
    )
    .await;
    assert_eq!(a.status, StatusCode::OK);
    let events = a.events();
    assert_eq!(events.len(), 2, "{}", a.body);
    assert!(events[0].contains("list_changed") && events[1].contains("last"));
    assert!(!a.body.contains("SMUGGLED") && !a.body.contains("password"));
    // The input request was answered upstream, under the stream's session.
    let start = std::time::Instant::now();
    while up.seen().len() < 2 && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = up.seen();
    let answer = seen
        .iter()
        .find(|s| s.method == Method::POST)
        .expect("answered upstream");
    assert_eq!(answer.json()["id"], 41);
    assert_eq!(answer.json()["error"]["code"], -32601);
    assert_eq!(answer.headers["mcp-session-id"], "s-1");
    assert_eq!(answer.headers["mcp-protocol-version"], "2025-11-25");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_relayed_and_ends_the_sessions_open_rounds_cancelled() {
    let up = upstream(|s| match s.method {
        Method::DELETE => Script::Status(StatusCode::OK, vec![]),
        _ => Script::Json(StatusCode::OK, vec![], form_round(&s.id())),
    })
    .await;
    let p = proxy(&up).await;
    let old_call = call("1", "book").replace(
        r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
        "",
    );
    let headers = [
        ("content-type", "application/json"),
        ACCEPT,
        ("mcp-session-id", "s-del"),
    ];
    let round = post(&p.url, &headers, &old_call).await;
    assert_eq!(round.body, form_round("1"));
    let other = [
        ("content-type", "application/json"),
        ACCEPT,
        ("mcp-session-id", "s-other"),
    ];
    post(&p.url, &other, &old_call).await;
    assert!(p.terminals().is_empty());
    let a = send(&p.url, Method::DELETE, &[("mcp-session-id", "s-del")], "").await;
    assert_eq!(a.status, StatusCode::OK);
    let ends = p.wait_terminals(1).await;
    assert_eq!(ends.len(), 1, "only the deleted session's round ended");
    assert_eq!(ends[0].0, "cancelled");
    let deleted = up
        .seen()
        .into_iter()
        .find(|s| s.method == Method::DELETE)
        .unwrap();
    assert_eq!(deleted.headers["mcp-session-id"], "s-del");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_batches_and_other_methods_are_refused() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], complete(&s.id()))).await;
    let p = proxy(&up).await;
    let mut h = mcp_headers("tools/call", Some("book"));
    h.push(("origin", "http://evil.example"));
    let a = post(&p.url, &h, &call("1", "book")).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let batch = post(&p.url, &[ACCEPT], &format!("[{}]", call("1", "book"))).await;
    assert_eq!(batch.status, StatusCode::BAD_REQUEST);
    assert_eq!(batch.refusal(), (-31004, "batch_message".into()));
    let put = send(&p.url, Method::PUT, &[], "").await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_principal_header_binds_the_call_and_never_goes_upstream() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], form_round(&s.id()))).await;
    let mut options = HttpOptions::new(up.url.clone());
    options.trust_principal_headers = Some(("x-user".into(), "x-tenant".into()));
    let p = proxy_with(options).await;
    let base = mcp_headers("tools/call", Some("book"));
    let missing = post(&p.url, &base, &call("1", "book")).await;
    assert_eq!(missing.status, StatusCode::FORBIDDEN);
    let mut twice = base.clone();
    twice.extend([("x-user", "bob"), ("x-user", "eve"), ("x-tenant", "t")]);
    assert_eq!(
        post(&p.url, &twice, &call("1", "book")).await.status,
        StatusCode::FORBIDDEN
    );
    let mut named = base.clone();
    named.extend([("x-user", "bob"), ("x-tenant", "globex")]);
    let a = post(&p.url, &named, &call("1", "book")).await;
    assert_eq!(a.body, form_round("1"));
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].headers.contains_key("x-user") && !seen[0].headers.contains_key("x-tenant"));
    let mut as_alice = base.clone();
    as_alice.extend([("x-user", "alice"), ("x-tenant", "acme")]);
    post(&p.url, &as_alice, &call("2", "book")).await;
    // The configured principal of a proxy that trusts no header is alice at acme.
    let plain = proxy(&up).await;
    post(&plain.url, &base, &call("3", "book")).await;
    let digest = |p: &Proxy, n: usize| {
        let e = &p.audit.events()[n];
        assert_eq!(e["event"], "received");
        (e["user_sha256"].clone(), e["tenant_sha256"].clone())
    };
    assert_eq!(digest(&p, 1), digest(&plain, 0), "alice by header is alice");
    assert_ne!(digest(&p, 0).0, digest(&plain, 0).0, "bob is not alice");
    assert_ne!(digest(&p, 0).1, digest(&plain, 0).1, "globex is not acme");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_at_once_each_get_their_own_answer() {
    // Each answer names the tool it was for.
    let up = upstream(|s| {
        let v = s.json();
        Script::Json(
            StatusCode::OK,
            vec![],
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":{}}}]}}}}"#,
                s.id(),
                v["params"]["name"]
            ),
        )
    })
    .await;
    let p = proxy(&up).await;
    let calls = (0..32).map(|n| {
        let url = p.url.clone();
        tokio::spawn(async move {
            let tool = format!("tool-{n}");
            let name: &'static str = Box::leak(tool.clone().into_boxed_str());
            // Every client starts at id 1.
            let a = post(
                &url,
                &mcp_headers("tools/call", Some(name)),
                &call("1", &tool),
            )
            .await;
            (tool, a)
        })
    });
    for call in calls {
        let (tool, a) = call.await.unwrap();
        let v = a.json();
        assert_eq!(v["id"], 1);
        assert_eq!(
            v["result"]["content"][0]["text"],
            tool.as_str(),
            "{}",
            a.body
        );
    }
    assert_eq!(up.seen().len(), 32);
    assert_eq!(p.bindings(), 0, "every call ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_http_errors_and_encoded_answers_end_the_call_with_31003() {
    let up = upstream(|s| match s.json()["params"]["name"].as_str().unwrap() {
        "gone" => Script::Status(StatusCode::NOT_FOUND, vec![]),
        "broken" => Script::Json(StatusCode::INTERNAL_SERVER_ERROR, vec![], "oops".into()),
        "gzip" => Script::Json(
            StatusCode::OK,
            vec![("content-encoding", "gzip".into())],
            complete(&s.id()),
        ),
        "accepted" => Script::Status(StatusCode::ACCEPTED, vec![]),
        // An error the upstream sends as a JSON-RPC error under the call's id: judged.
        _ => Script::Json(
            StatusCode::BAD_REQUEST,
            vec![],
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32602,"message":"bad tool"}}}}"#,
                s.id()
            ),
        ),
    })
    .await;
    let p = proxy(&up).await;
    for (tool, status, code) in [
        ("gone", StatusCode::NOT_FOUND, "http_status"),
        ("broken", StatusCode::INTERNAL_SERVER_ERROR, "http_status"),
        ("gzip", StatusCode::OK, "content_encoding"),
        ("accepted", StatusCode::OK, "no_response"),
    ] {
        let name: &'static str = Box::leak(tool.to_owned().into_boxed_str());
        let a = post(
            &p.url,
            &mcp_headers("tools/call", Some(name)),
            &call("8", tool),
        )
        .await;
        assert_eq!(a.status, status, "{tool}");
        assert_eq!(a.refusal(), (-31003, code.to_owned()), "{tool}");
        assert_eq!(a.json()["id"], 8);
    }
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("err")),
        &call("9", "err"),
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        a.body,
        r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"bad tool"}}"#
    );
    let reasons: Vec<Value> = p
        .wait_terminals(4)
        .await
        .into_iter()
        .map(|(_, e)| e["reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        [
            json!("http_status"),
            json!("http_status"),
            json!("content_encoding"),
            json!("no_response")
        ]
    );
    assert_eq!(p.bindings(), 0);
}

// ---------------------------------------------------------------- the Python SDK server

/// The venv `./scripts/python --install` makes, with the official `mcp` package.
fn sdk_python() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("MRTR_GATE_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target/python-venv"));
    let python = venv.join("bin/python");
    python.exists().then_some(python)
}

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_servers_form_round_is_gated_and_delivered() {
    let Some(python) = sdk_python() else {
        eprintln!("skipped: no SDK venv (run ./scripts/python --install)");
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/python_sdk/server.py");
    let _child = Child(
        std::process::Command::new(python)
            .arg(server)
            .args(["http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = std::time::Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(start.elapsed() < GUARD, "the SDK server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let p = proxy_with(HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"))).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight","arguments":{"origin":"LIS","destination":"OPO"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}}}}}"#;
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("book_flight")),
        body,
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let text = if a.headers["content-type"] == "text/event-stream" {
        a.events().pop().unwrap()
    } else {
        a.body.clone()
    };
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"], 1, "{text}");
    assert_eq!(v["result"]["resultType"], "input_required", "{text}");
    assert!(
        v["result"]["inputRequests"]["passenger"].is_object(),
        "{text}"
    );
    let received: Vec<Value> = p
        .audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "received")
        .collect();
    assert_eq!(received.len(), 1, "the round is in the trail");
    assert!(p.terminals().is_empty(), "its binding is open");
}
