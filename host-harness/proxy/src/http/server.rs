//! The listener: one hyper HTTP/1 connection task per accepted socket, each request routed
//! (POST, GET, DELETE; anything else 405), `Origin` checked, the principal read from trusted
//! headers when the proxy is told to, the body capped, and a gated call's cancel guard armed
//! from the moment it goes upstream.

use super::answer::{Call, Exchange, ProxyBody, empty, json};
use super::bridge::{Bridge, CancelGuard, engine_gone};
use super::caps::{Allowances, Caps};
use super::headers::{self, LAST_EVENT_ID, Mismatch, PROTOCOL_VERSION, SESSION};
use super::listen::{Listener, status_only};
use super::sessions::Sessions;
use super::upstream::Upstream;
use crate::engine::{Action, Engine, Principal};
use crate::errors::Refusal;
use crate::ids::MAX_MESSAGE_BYTES;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{ServerIdentity, parse_members};
use serde_json::json as json_value;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long the upstream may take to answer, or to send the next part of an answer, before
/// the call fails: a guard against a hang, never a deadline a slow tool would meet.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);

/// The JSON-RPC code of a header that disagrees with the body (MCP `HeaderMismatch`).
pub const HEADER_MISMATCH: i64 = -32020;

/// Binds a principal named by trusted headers the way the gate binds users (keyed
/// pseudonyms when there are host keys).
pub use mrtr_gate_host::BindPrincipal;

/// The HTTP endpoint's options.
#[derive(Clone)]
pub struct HttpOptions {
    /// The upstream's URL: the one server every call is bound to and sent to.
    pub upstream: String,
    /// `Origin` values allowed besides loopback ones (exact match).
    pub allowed_origins: Vec<String>,
    /// `Host` values allowed besides IP addresses and `localhost` (a front's name).
    pub allowed_hosts: Vec<String>,
    /// `(user header, tenant header)`: take each call's principal from these headers (set
    /// by an authenticating front the proxy trusts); `None`: the engine's configured one.
    pub trust_principal_headers: Option<(String, String)>,
    /// How a principal named by trusted headers is bound (default: as named).
    pub bind_principal: BindPrincipal,
    /// The hang guard on the upstream.
    pub upstream_timeout: Duration,
    /// Root certificates (DER) an `https` upstream may chain to besides the public ones (a
    /// private CA).
    pub upstream_roots: Vec<Vec<u8>>,
    /// What one principal may hold at once ([`Caps`]).
    pub caps: Caps,
    /// How long requests in flight are given to finish once the proxy is told to stop: then
    /// every call and open round left ends `cancelled` in the trail ([`DRAIN_TIMEOUT`]).
    pub drain_timeout: Duration,
}

/// The default [`HttpOptions::drain_timeout`].
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("upstream", &self.upstream)
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("trust_principal_headers", &self.trust_principal_headers)
            .field("upstream_timeout", &self.upstream_timeout)
            .field("drain_timeout", &self.drain_timeout)
            .finish_non_exhaustive()
    }
}

impl HttpOptions {
    /// Options for `upstream`, every other one at its default.
    pub fn new(upstream: impl Into<String>) -> Self {
        Self {
            upstream: upstream.into(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            trust_principal_headers: None,
            bind_principal: Arc::new(|user: &str, tenant: &str| Principal::new(user, tenant)),
            upstream_timeout: UPSTREAM_TIMEOUT,
            upstream_roots: Vec::new(),
            caps: Caps::default(),
            drain_timeout: DRAIN_TIMEOUT,
        }
    }
}

struct State {
    bridge: Bridge,
    upstream: Upstream,
    options: HttpOptions,
    /// Who opened which session (only when callers are named by trusted headers).
    sessions: std::sync::Mutex<Sessions>,
    /// What each principal holds against [`HttpOptions::caps`].
    allowances: Arc<Allowances>,
    /// Requests being served: what a drain waits for.
    active: std::sync::atomic::AtomicUsize,
}

/// One request being served, counted in [`State::active`] while it lives.
struct Serving<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Serving<'a> {
    fn new(active: &'a std::sync::atomic::AtomicUsize) -> Self {
        active.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(active)
    }
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl State {
    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Serve the MCP endpoint on `listener` for ever (see [`serve_until`]).
pub async fn serve<G, F>(
    options: HttpOptions,
    listener: TcpListener,
    make_engine: F,
) -> Result<(), String>
where
    G: GateApi + 'static,
    F: FnOnce(ServerIdentity) -> Engine<G> + Send + 'static,
{
    serve_until(options, listener, make_engine, std::future::pending()).await
}

/// Serve the MCP endpoint on `listener` until `shutdown` completes. `make_engine` is given
/// the identity the gate binds every call to: the configured upstream, normalised, which is
/// also exactly the URL the proxy sends to (never what a client or server says of itself).
pub async fn serve_until<G, F>(
    options: HttpOptions,
    listener: TcpListener,
    make_engine: F,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String>
where
    G: GateApi + 'static,
    F: FnOnce(ServerIdentity) -> Engine<G> + Send + 'static,
{
    let (identity, url) = upstream_identity(&options)?;
    let bridge = Bridge::start(move || make_engine(identity))?;
    serve_bridge(options, listener, &url, bridge, shutdown).await
}

/// [`serve_until`] over a pool of `engines` engines (at least one), each a gate instance of
/// its own that `make_engine` builds for its index, so a slow round holds up only the clients
/// whose messages its engine has in hand ([`Bridge::start_pool`]). Their gates must share one
/// store and one trail, as replicas do.
pub async fn serve_pool_until<G, F>(
    options: HttpOptions,
    listener: TcpListener,
    engines: usize,
    make_engine: F,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String>
where
    G: GateApi + 'static,
    F: Fn(ServerIdentity, usize) -> Engine<G> + Send + Sync + 'static,
{
    let (identity, url) = upstream_identity(&options)?;
    let bridge = Bridge::start_pool(engines, move |i| make_engine(identity.clone(), i))?;
    serve_bridge(options, listener, &url, bridge, shutdown).await
}

/// The identity every call is bound to, and the URL requests go to: the configured upstream,
/// normalised.
fn upstream_identity(options: &HttpOptions) -> Result<(ServerIdentity, String), String> {
    let identity = ServerIdentity::origin(&options.upstream)
        .map_err(|e| format!("the upstream url is refused: {e:?}"))?;
    let url = match &identity {
        ServerIdentity::Origin(url) => url.clone(),
        ServerIdentity::Endpoint(_) => return Err("the upstream is not a url".into()),
    };
    Ok((identity, url))
}

async fn serve_bridge(
    options: HttpOptions,
    listener: TcpListener,
    url: &str,
    bridge: Bridge,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let upstream = Upstream::new(url, options.upstream_timeout, &options.upstream_roots)?;
    let state = Arc::new(State {
        bridge,
        upstream,
        allowances: Allowances::new(options.caps),
        options,
        sessions: std::sync::Mutex::new(Sessions::default()),
        active: std::sync::atomic::AtomicUsize::new(0),
    });
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => {
                drop(listener);
                drain(&state).await;
                return Ok(());
            }
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors or a connection reset before it was taken: the next
                // accept may succeed; a moment's pause keeps the loop from spinning.
                crate::log::error("accept_failed", &format!("accept failed: {e}"), &[]);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        // The connection's engine, in turn: a client's messages without a protocol session
        // (a stateless server) go to one engine as long as it keeps its connection.
        let engine = state.bridge.pick();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (state, engine) = (state.clone(), engine.clone());
                async move {
                    let _serving = Serving::new(&state.active);
                    Ok::<_, Infallible>(route(&state, &engine, request).await)
                }
            });
            // A client that hangs up mid-request ends the connection; nothing to report.
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The proxy was told to stop, and takes no more connections (the listener is closed): the
/// requests in flight get [`HttpOptions::drain_timeout`] to finish, then every engine ends the
/// calls and open rounds it still holds `cancelled`, so the trail shows each binding's end.
async fn drain(state: &State) {
    let deadline = tokio::time::Instant::now() + state.options.drain_timeout;
    while state.active.load(std::sync::atomic::Ordering::SeqCst) > 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left = state.active.load(std::sync::atomic::Ordering::SeqCst);
    if left > 0 {
        crate::log::warn(
            "drain_timeout",
            &format!("{left} request(s) still in flight at the drain timeout: ended `cancelled`"),
            &[("left", &left.to_string())],
        );
    }
    state.bridge.drain().await;
}

/// A refusal of the proxy's own, answered with `status` and the JSON-RPC error under `id`.
fn refuse(status: StatusCode, id: &str, refusal: &Refusal) -> Response<ProxyBody> {
    json(status, HeaderMap::new(), refusal.response(id))
}

/// `engine`: the connection's engine (a message of a protocol session goes to the session's).
async fn route(state: &State, engine: &Bridge, request: Request<Incoming>) -> Response<ProxyBody> {
    // A page whose domain was rebound to the proxy's address is same-origin to itself: its
    // GET carries no `Origin`, but its `Host` is its own name.
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host_ok = match (hosts.next(), hosts.next()) {
        (Some(host), None) => host
            .to_str()
            .is_ok_and(|h| headers::host_allowed(h, &state.options.allowed_hosts)),
        _ => false,
    };
    if !host_ok {
        let r = Refusal::message("host_refused", "the request's host is not allowed");
        return refuse(StatusCode::FORBIDDEN, "null", &r);
    }
    let origins = request.headers().get_all(header::ORIGIN);
    let mut count = 0;
    for origin in origins {
        count += 1;
        let allowed = origin
            .to_str()
            .is_ok_and(|o| headers::origin_allowed(o, &state.options.allowed_origins));
        if !allowed || count > 1 {
            // A page on another site must not drive the user's local tools (DNS rebinding).
            let r = Refusal::message("origin_refused", "the request's origin is not allowed");
            return refuse(StatusCode::FORBIDDEN, "null", &r);
        }
    }
    let principal = match principal(&state.options, request.headers()) {
        Ok(p) => p,
        Err(r) => return refuse(StatusCode::FORBIDDEN, "null", &r),
    };
    let session = request
        .headers()
        .get(SESSION)
        .and_then(|s| s.to_str().ok())
        .map(str::to_owned);
    if let (Some(who), Some(session)) = (&principal, &session)
        && !state.sessions().may_use(session, who)
    {
        // Another client's session: answered as an unknown one, which says nothing of whose.
        let r = Refusal::message("unknown_session", "no such session");
        return refuse(StatusCode::NOT_FOUND, "null", &r);
    }
    match *request.method() {
        Method::POST => {
            let in_flight = match state.allowances.enter(&principal) {
                Ok(counted) => counted,
                Err(r) => return refuse(StatusCode::TOO_MANY_REQUESTS, "null", &r),
            };
            let response = post(state, engine, request, principal.clone()).await;
            if let (Some(who), None) = (&principal, &session)
                && let Some(opened) = response
                    .headers()
                    .get(SESSION)
                    .and_then(|s| s.to_str().ok())
            {
                if state.sessions().held_by(who) >= state.options.caps.sessions {
                    return too_many_sessions(state, opened);
                }
                state.sessions().opened(opened, who);
            }
            forget_if_gone(state, &principal, session.as_deref(), &response);
            response.map(|body| in_flight.holding(body))
        }
        Method::GET => {
            let response = get(state, engine, request, principal.clone()).await;
            forget_if_gone(state, &principal, session.as_deref(), &response);
            response
        }
        Method::DELETE => delete(state, request).await,
        _ => {
            let mut response = Response::new(empty());
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
    }
}

/// The upstream answered 404 under `session`: the session is gone there (expired, ended), and
/// no longer counts against its owner (only its owner's requests reach the upstream under it).
fn forget_if_gone(
    state: &State,
    principal: &Option<Principal>,
    session: Option<&str>,
    response: &Response<ProxyBody>,
) {
    if let (Some(_), Some(session), StatusCode::NOT_FOUND) = (principal, session, response.status())
    {
        state.sessions().closed(session);
    }
}

/// A principal at its cap of sessions opened one more: the client is refused, and the
/// upstream's new session (which nobody will use) is ended there.
fn too_many_sessions(state: &State, opened: &str) -> Response<ProxyBody> {
    if let Ok(value) = HeaderValue::from_str(opened) {
        let mut up_headers = HeaderMap::new();
        up_headers.insert(SESSION, value);
        let upstream = state.upstream.clone();
        tokio::spawn(async move {
            let _ = upstream
                .send(Method::DELETE, up_headers, Bytes::new())
                .await;
        });
    }
    let r = Refusal::message(
        "too_many_sessions",
        format!(
            "this principal holds {} sessions already: end one (DELETE) first",
            state.options.caps.sessions
        ),
    );
    refuse(StatusCode::TOO_MANY_REQUESTS, "null", &r)
}

/// The principal named by the trusted headers, when the proxy trusts any.
fn principal(options: &HttpOptions, headers: &HeaderMap) -> Result<Option<Principal>, Refusal> {
    let Some((user, tenant)) = &options.trust_principal_headers else {
        return Ok(None);
    };
    // Any UTF-8 but control characters: a front names users as its directory spells them
    // (`josé@example.com`), and HTTP carries such values as their UTF-8 bytes.
    let one = |name: &str| {
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (Some(v), None) => std::str::from_utf8(v.as_bytes())
                .ok()
                .filter(|v| !v.is_empty() && !v.chars().any(char::is_control))
                .map(str::to_owned),
            _ => None,
        }
    };
    match (one(user), one(tenant)) {
        (Some(u), Some(t)) => Ok(Some((options.bind_principal)(&u, &t))),
        _ => Err(Refusal::message(
            "principal_missing",
            "the principal headers are missing, empty or given more than once",
        )),
    }
}

/// The headers of the trusted principal, never passed upstream.
fn stripped(options: &HttpOptions) -> Vec<&str> {
    options
        .trust_principal_headers
        .as_ref()
        .map(|(u, t)| vec![u.as_str(), t.as_str()])
        .unwrap_or_default()
}

/// Whether a client's message is a response (an answer to a server's request), else a request
/// or notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Response,
    Other,
}

fn members_kind(text: &str) -> Kind {
    match parse_members(text, MAX_MESSAGE_BYTES) {
        Ok(members) if !members.contains_key("method") => Kind::Response,
        _ => Kind::Other,
    }
}

/// A client message's id (its JSON text) if it is a request, and whether it has one at all.
fn request_id(text: &str) -> Option<String> {
    let members = parse_members(text, MAX_MESSAGE_BYTES).ok()?;
    members.get("method")?;
    members.get("id").map(|id| id.get().to_owned())
}

async fn post(
    state: &State,
    engine: &Bridge,
    request: Request<Incoming>,
    principal: Option<Principal>,
) -> Response<ProxyBody> {
    let (parts, body) = request.into_parts();
    let too_large = || {
        let r = Refusal::message(
            "message_too_large",
            format!("a message is at most {MAX_MESSAGE_BYTES} bytes"),
        );
        refuse(StatusCode::PAYLOAD_TOO_LARGE, "null", &r)
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_MESSAGE_BYTES as u64) {
        return too_large();
    }
    let bytes = match Limited::new(body, MAX_MESSAGE_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Err(_) => {
            let r = Refusal::message("invalid_message", "the request's body broke off");
            return refuse(StatusCode::BAD_REQUEST, "null", &r);
        }
    };
    let Ok(text) = String::from_utf8(bytes.to_vec()) else {
        let r = Refusal::message("invalid_message", "the body is not utf-8");
        return refuse(StatusCode::BAD_REQUEST, "null", &r);
    };
    if text.trim_start().starts_with('[') {
        let r = Refusal::message(
            "batch_message",
            "a batch is not relayed: send one message per request",
        );
        return refuse(StatusCode::BAD_REQUEST, "null", &r);
    }
    let client_id = request_id(&text);
    if let Err(Mismatch(why)) = headers::check_mirrored(&parts.headers, &text) {
        return header_mismatch(client_id.as_deref().unwrap_or("null"), &why);
    }
    let text_kind = members_kind(&text);
    let in_session = parts
        .headers
        .get(SESSION)
        .and_then(|s| s.to_str().ok())
        .map(str::to_owned);
    // This message's engine: everything that follows from it goes there too. A client's
    // answer to a server request goes to the engine that showed the request.
    let bridge = in_session
        .as_deref()
        .map_or_else(|| engine.clone(), |s| state.bridge.for_session(s));
    let action = if text_kind == Kind::Response {
        state
            .bridge
            .client_answer(principal.clone(), in_session, text)
            .await
    } else {
        bridge.client(principal.clone(), in_session, text).await
    };
    let session = parts.headers.get(SESSION).cloned();
    let version = parts.headers.get(PROTOCOL_VERSION).cloned();
    let mut up_headers = headers::upstream_request(&parts.headers, &stripped(&state.options));
    let (call, sent) = match action {
        Action::ToClient(text) => return json(StatusCode::OK, HeaderMap::new(), text),
        // What the engine let go of on purpose: an answer to no request of the server's shown
        // to this client is refused; a notification (a cancel the engine keeps to its own
        // client) is taken, as any notification is.
        Action::Drop(why) if client_id.is_none() => {
            return if text_kind == Kind::Response {
                let r = Refusal::message("unknown_server_request", why);
                refuse(StatusCode::FORBIDDEN, "null", &r)
            } else {
                let mut response = Response::new(empty());
                *response.status_mut() = StatusCode::ACCEPTED;
                response
            };
        }
        Action::Drop(_) => {
            let id = client_id.as_deref().unwrap_or("null");
            return refuse(StatusCode::OK, id, &engine_gone());
        }
        // The bridge asks every decision a retry needs; this is one it could not have.
        Action::AskConsent(..) => {
            let id = client_id.as_deref().unwrap_or("null");
            let r = Refusal::host(
                "consent_unavailable",
                "no decision could be had for the retry",
            );
            return refuse(StatusCode::OK, id, &r);
        }
        Action::Gated {
            text,
            upstream_id,
            trace,
        } => {
            // The call's trace context, in place of any the client's request carried.
            for (name, value) in trace.headers() {
                if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
                    up_headers.insert(name, value);
                }
            }
            let guard = CancelGuard::new(bridge.clone(), upstream_id.clone());
            (Call::Gated { upstream_id, guard }, text)
        }
        Action::ToServer(text) => (Call::Relayed, text),
    };
    let Some(client_id) = client_id else {
        // A notification, or the client's answer to a server request: no reader takes a
        // message from what comes back, so only the status is passed.
        return match state
            .upstream
            .send(Method::POST, up_headers, Bytes::from(sent))
            .await
        {
            Ok(answer) => status_only(&answer),
            Err(r) => refuse(StatusCode::BAD_GATEWAY, "null", &r),
        };
    };
    let queue = (
        state.allowances.queue(&principal),
        state.options.caps.queued_bytes,
    );
    let exchange = Exchange {
        bridge,
        upstream: state.upstream.clone(),
        call,
        client_id,
        session,
        version,
        principal,
        queue,
    };
    match state
        .upstream
        .send(Method::POST, up_headers, Bytes::from(sent))
        .await
    {
        Ok(answer) => exchange.answer(answer).await,
        Err(refusal) => exchange.failed(refusal).await,
    }
}

/// HTTP 400 with the MCP `HeaderMismatch` error: the spec's answer, which the SDK clients
/// act on (re-reading tools, resending once).
fn header_mismatch(id: &str, why: &str) -> Response<ProxyBody> {
    let error = json_value!({
        "code": HEADER_MISMATCH,
        "message": format!("refused by mrtr-gate (header_mismatch): {why}"),
        "data": {"mrtr_gate": {"code": "header_mismatch", "cause": "client", "audited": false}},
    });
    let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#);
    json(StatusCode::BAD_REQUEST, HeaderMap::new(), text)
}

async fn get(
    state: &State,
    engine: &Bridge,
    request: Request<Incoming>,
    principal: Option<Principal>,
) -> Response<ProxyBody> {
    if request.headers().contains_key(LAST_EVENT_ID) {
        // A resumed stream would replay what the gate judged once, or what it never saw.
        let mut response = Response::new(empty());
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        return response;
    }
    let up_headers = headers::upstream_request(request.headers(), &stripped(&state.options));
    let answer = match state
        .upstream
        .send(Method::GET, up_headers, Bytes::new())
        .await
    {
        Ok(answer) => answer,
        Err(r) => return refuse(StatusCode::BAD_GATEWAY, "null", &r),
    };
    let stream = answer.status().is_success()
        && !headers::encoded(answer.headers())
        && headers::media_type(answer.headers()).as_deref() == Some("text/event-stream");
    if !stream {
        return status_only(&answer);
    }
    let mut response = status_only(&answer);
    let out = response.headers_mut();
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert("x-accel-buffering", HeaderValue::from_static("no"));
    let queue = (
        state.allowances.queue(&principal),
        state.options.caps.queued_bytes,
    );
    let listener = Listener {
        // One engine per stream, as per call: the session's.
        bridge: request
            .headers()
            .get(SESSION)
            .and_then(|s| s.to_str().ok())
            .map_or_else(|| engine.clone(), |s| state.bridge.for_session(s)),
        upstream: state.upstream.clone(),
        session: request.headers().get(SESSION).cloned(),
        version: request.headers().get(PROTOCOL_VERSION).cloned(),
        principal,
        queue,
    };
    *response.body_mut() = listener.relay(answer.into_body());
    response
}

async fn delete(state: &State, request: Request<Incoming>) -> Response<ProxyBody> {
    let session = request.headers().get(SESSION).cloned();
    let up_headers = headers::upstream_request(request.headers(), &stripped(&state.options));
    match state
        .upstream
        .send(Method::DELETE, up_headers, Bytes::new())
        .await
    {
        Ok(answer) => {
            if answer.status().is_success()
                && let Some(session) = session.as_ref().and_then(|s| s.to_str().ok())
            {
                state.sessions().closed(session);
                state.bridge.end_session(session.to_owned());
            }
            status_only(&answer)
        }
        Err(r) => refuse(StatusCode::BAD_GATEWAY, "null", &r),
    }
}
