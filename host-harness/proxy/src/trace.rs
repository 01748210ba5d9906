//! Traces (`--otlp URL`, docs/proxy.md "Traces"): a span per gated call, and under it a span
//! per step of the gate's (register, accept, consent, retry, finish), exported over OTLP
//! (http/protobuf) by the OpenTelemetry SDK's batch processor.
//!
//! What a span carries is the method, the tool's or prompt's name or the resource's URI,
//! the id the proxy minted, and what came of it (`mrtr_gate.outcome`, and the gate's code for
//! a refusal): never an argument, an answer, a user's input or a state. A client's W3C trace
//! context in `params._meta` (`traceparent`, `tracestate`: 2026-07-28, SEP-414) is continued,
//! and the call's own goes upstream as the HTTP `traceparent` header, never in the body: what
//! the client sent is exactly what the server receives.
//!
//! Off (no `--otlp`), nothing here is made: [`enabled`] is false, every [`CallTrace`] is
//! empty and every step a no-op.

use crate::log;
use mrtr_gate_host::core::{RequestId, limits, parse_members};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, ContextGuard, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The tracer, once `--otlp` installed one; none: tracing is off.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Longest name or URI a span carries, in bytes (the rest is cut at a character boundary):
/// a client picks it, and a span is no place for a megabyte.
const MAX_NAME_BYTES: usize = 256;

/// How long one export may take, its answer's body read included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer a collector's export response is read to.
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Whether spans are made.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// What came of a call or a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The server's result reached the client.
    Result,
    /// The server's JSON-RPC error reached the client.
    Error,
    /// An `input_required` round reached the client (an accept step; the call goes on).
    InputRequired,
    /// The gate, or the proxy, refused: the code says why.
    Refused,
    /// The client cancelled, or went away.
    Cancelled,
    /// A round was never retried within its lifetime.
    Expired,
    /// The server went away, or the step could not be done.
    Failed,
    /// The user granted (a consent step).
    Granted,
    /// The user declined (a consent step).
    Declined,
    /// The step was done (register, retry, finish).
    Done,
}

impl Outcome {
    /// The value of `mrtr_gate.outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Result => "result",
            Outcome::Error => "error",
            Outcome::InputRequired => "input_required",
            Outcome::Refused => "refused",
            Outcome::Cancelled => "cancelled",
            Outcome::Expired => "expired",
            Outcome::Failed => "failed",
            Outcome::Granted => "granted",
            Outcome::Declined => "declined",
            Outcome::Done => "done",
        }
    }
}

/// One gated call's span (its context, holding it: the span ends at the latest when the
/// last copy goes), carried by the engine from its first request through every round.
/// Empty when tracing is off.
#[derive(Clone, Debug, Default)]
pub struct CallTrace(Option<Context>);

/// Equal when they are the same span (or both empty): what an [`crate::Action`] compares.
impl PartialEq for CallTrace {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => a.span().span_context() == b.span().span_context(),
            (None, None) => true,
            _ => false,
        }
    }
}

impl Eq for CallTrace {}

impl CallTrace {
    /// The span of a gated call of `method` with `params` (the client's text), sent upstream
    /// as `upstream_id`: a child of the trace the client's `params._meta.traceparent` names,
    /// if it names one well formed, else a new trace's root.
    pub fn start(method: &str, params: Option<&str>, upstream_id: &RequestId) -> Self {
        let Some(tracer) = TRACER.get() else {
            return Self(None);
        };
        let members = params
            .and_then(|p| parse_members(p, limits::CLIENT_RETRY.max_bytes).ok())
            .unwrap_or_default();
        let string = |key: &str| {
            members
                .get(key)
                .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
                .map(|s| cut(s, MAX_NAME_BYTES))
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method.to_owned()),
            KeyValue::new(
                "jsonrpc.request.id",
                match upstream_id {
                    RequestId::Number(n) => n.to_string(),
                    RequestId::Text(t) => t.clone(),
                },
            ),
        ];
        let mut name = method.to_owned();
        match method {
            "tools/call" | "prompts/get" => {
                if let Some(target) = string("name") {
                    name = format!("{method} {target}");
                    let key = if method == "tools/call" {
                        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                        "gen_ai.tool.name"
                    } else {
                        "gen_ai.prompt.name"
                    };
                    attributes.push(KeyValue::new(key, target));
                }
            }
            // A URI names too many things to name a span: only its attribute carries it.
            "resources/read" => {
                if let Some(uri) = string("uri") {
                    attributes.push(KeyValue::new("mcp.resource.uri", uri));
                }
            }
            _ => {}
        }
        let parent = members
            .get("_meta")
            .map(|meta| client_context(meta.get()))
            .unwrap_or_default();
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Self(Some(parent.with_span(span)))
    }

    /// A step of the gate's for this call (`mrtr_gate.register`, …): ended when dropped.
    pub fn step(&self, name: &'static str) -> Step {
        Step::under(self.0.as_ref(), name)
    }

    /// The call ended: what came of it (and the gate's code, for a refusal) on its span, and
    /// the span ends.
    pub fn end(&self, outcome: Outcome, code: Option<&str>) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            mark(
                |kv| span.set_attribute(kv),
                |s| span.set_status(s),
                outcome,
                code,
            );
            span.end();
        }
    }

    /// The call's trace context as HTTP headers for the upstream (`traceparent`, and
    /// `tracestate` when there is one); none when tracing is off.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let Some(cx) = &self.0 else {
            return Vec::new();
        };
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(cx, &mut carrier);
        ["traceparent", "tracestate"]
            .into_iter()
            .filter_map(|key| Some((key, carrier.remove(key)?)))
            .filter(|(_, value)| !value.is_empty())
            .collect()
    }

    /// Make this call's span the current one on this thread while the guard lives (a consent
    /// asked off the engine's thread hangs its span under it).
    pub fn attach(&self) -> Option<ContextGuard> {
        self.0.clone().map(Context::attach)
    }
}

/// The calls whose round a client holds, by the id the round's binding lives under: the
/// engine of the process that takes the retry, whichever it is, goes on under the call's span.
/// Held from the round's delivery until it is closed (retried, cancelled, expired, given up).
static HELD: std::sync::Mutex<Option<HashMap<RequestId, CallTrace>>> = std::sync::Mutex::new(None);

fn held_calls() -> std::sync::MutexGuard<'static, Option<HashMap<RequestId, CallTrace>>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hold `trace` for the retry of the round `live` (nothing when tracing is off).
pub fn hold(live: &RequestId, trace: &CallTrace) {
    if trace.0.is_some() {
        held_calls()
            .get_or_insert_with(HashMap::new)
            .insert(live.clone(), trace.clone());
    }
}

/// The span of the call whose round is `live`, if an engine of this process delivered it.
pub fn held(live: &RequestId) -> Option<CallTrace> {
    if !enabled() {
        return None;
    }
    held_calls().as_ref()?.get(live).cloned()
}

/// The round `live` is closed: its call's span is no longer held for it.
pub fn release(live: &RequestId) {
    if let (true, Some(held)) = (enabled(), held_calls().as_mut()) {
        held.remove(live);
    }
}

/// A step's span: ended when dropped, with what came of it if [`Step::outcome`] said.
#[derive(Debug)]
pub struct Step(Option<Context>);

impl Step {
    /// A step span under `parent`, or none when tracing is off or there is no parent.
    fn under(parent: Option<&Context>, name: &'static str) -> Self {
        let (Some(tracer), Some(parent)) = (TRACER.get(), parent) else {
            return Self(None);
        };
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .start_with_context(tracer, parent);
        Self(Some(parent.with_span(span)))
    }

    /// A step span under the span current on this thread ([`CallTrace::attach`]), or a root of
    /// its own when there is none: how a consent provider, which knows no call, is traced.
    pub fn current(name: &'static str) -> Self {
        if !enabled() {
            return Self(None);
        }
        Self::under(Some(&Context::current()), name)
    }

    /// What came of the step (and the gate's code, for a refusal).
    pub fn outcome(&self, outcome: Outcome, code: Option<&str>) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            mark(
                |kv| span.set_attribute(kv),
                |s| span.set_status(s),
                outcome,
                code,
            );
        }
    }

    /// End the step now (before its call ends: a child ends within its parent).
    pub fn end(&self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }

    /// Make this step's span the current one on this thread while the guard lives (the
    /// gate's host calls made under it, a consent, hang their spans under it).
    pub fn attach(&self) -> Option<ContextGuard> {
        self.0.clone().map(Context::attach)
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}

/// The attributes and status of what came of a call or a step.
fn mark(
    mut set: impl FnMut(KeyValue),
    status: impl FnOnce(Status),
    outcome: Outcome,
    code: Option<&str>,
) {
    set(KeyValue::new("mrtr_gate.outcome", outcome.as_str()));
    if let Some(code) = code {
        set(KeyValue::new("mrtr_gate.code", code.to_owned()));
    }
    match outcome {
        Outcome::Refused | Outcome::Failed => {
            let code = code.unwrap_or(outcome.as_str()).to_owned();
            set(KeyValue::new("error.type", code.clone()));
            status(Status::error(code));
        }
        Outcome::Error => {
            set(KeyValue::new("error.type", "jsonrpc_error"));
            status(Status::error("jsonrpc_error"));
        }
        _ => {}
    }
}

/// The trace context in a client's `_meta` (its text): W3C `traceparent` and `tracestate`,
/// read by the propagator's own parser (a malformed one is no context).
fn client_context(meta: &str) -> Context {
    let Ok(members) = parse_members(meta, limits::CLIENT_RETRY.max_bytes) else {
        return Context::new();
    };
    let carrier: HashMap<String, String> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|key| {
            let value = serde_json::from_str::<String>(members.get(key)?.get()).ok()?;
            Some((key.to_owned(), value))
        })
        .collect();
    if !carrier.contains_key("traceparent") {
        return Context::new();
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The OTLP export, installed: flushed and shut down when dropped (at the end of a drain).
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
    shown: String,
}

impl Exporter {
    /// Export every span to `url` (`http://` or `https://`; a URL with no path gets the OTLP
    /// traces path `/v1/traces`) from now on. Once per process.
    pub fn start(url: &str) -> Result<Self, String> {
        let endpoint = endpoint(url)?;
        let shown = shown(&endpoint);
        let client = OtlpClient::new(shown.clone())?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("--otlp {shown}: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name("mrtr-gate")
                    .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                    .build(),
            )
            .build();
        use opentelemetry::trace::TracerProvider as _;
        TRACER
            .set(provider.tracer("mrtr-gate"))
            .map_err(|_| "--otlp: traces are exported already".to_owned())?;
        Ok(Self { provider, shown })
    }

    /// Where spans go, as a message names it (no user, no query: either may carry a secret).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Send what is left and stop (what [`Drop`] does, with its error).
    pub fn finish(self) -> Result<(), String> {
        // The shutdown's own result: Drop's second one finds it done and says nothing.
        self.provider.shutdown().or_else(|e| match e {
            opentelemetry_sdk::error::OTelSdkError::AlreadyShutdown => Ok(()),
            e => Err(format!("the last spans could not be exported: {e}")),
        })
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.provider.shutdown();
    }
}

/// The traces endpoint `url` names: the OTLP path added to a URL with none.
fn endpoint(url: &str) -> Result<String, String> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| format!("--otlp {url}: not a url ({e})"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!(
            "--otlp {url}: an http:// or https:// url with a host"
        ));
    }
    if matches!(uri.path(), "" | "/") && uri.query().is_none() {
        Ok(format!("{}/v1/traces", url.trim_end_matches('/')))
    } else {
        Ok(url.to_owned())
    }
}

/// `url` as a message names it: scheme, host, port and path.
fn shown(url: &str) -> String {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        return String::new();
    };
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{}{port}{}",
        uri.scheme_str().unwrap_or("http"),
        uri.host().unwrap_or_default(),
        uri.path()
    )
}

/// The exporter's HTTP client: the upstream's ([`crate::http::upstream`]: hyper, rustls, the
/// public roots) on a runtime of its own, as the SDK's batch processor exports from a thread
/// of its own, under no runtime. An export that fails is said once, and again when one
/// succeeds.
#[derive(Debug)]
struct OtlpClient {
    client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        http_body_util::Full<Bytes>,
    >,
    runtime: tokio::runtime::Runtime,
    shown: String,
    failing: AtomicBool,
}

impl OtlpClient {
    fn new(shown: String) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mrtr-gate-otlp")
            .enable_all()
            .build()
            .map_err(|e| format!("--otlp: no runtime for the exporter: {e}"))?;
        Ok(Self {
            client: crate::http::upstream::client(&[])?,
            runtime,
            shown,
            failing: AtomicBool::new(false),
        })
    }

    fn said(&self, result: &Result<Response<Bytes>, HttpError>) {
        let failure = match result {
            Ok(answer) if answer.status().is_success() => None,
            Ok(answer) => Some(format!("the collector answered {}", answer.status())),
            Err(e) => Some(mrtr_gate_host::error_chain(e.as_ref())),
        };
        match failure {
            Some(why) if !self.failing.swap(true, Ordering::SeqCst) => log::warn(
                "traces_unexported",
                &format!(
                    "spans could not be exported to {} ({why}): they are dropped until it \
                     takes them again",
                    self.shown
                ),
                &[("collector", &self.shown)],
            ),
            None if self.failing.swap(false, Ordering::SeqCst) => log::info(
                "traces_exported",
                &format!("{} takes spans again", self.shown),
                &[("collector", &self.shown)],
            ),
            _ => {}
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        use http_body_util::{BodyExt, Full, Limited};
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(body));
        let sent = self.runtime.spawn(async move {
            let answer = tokio::time::timeout(EXPORT_TIMEOUT, client.request(request)).await??;
            let (parts, body) = answer.into_parts();
            let body = tokio::time::timeout(
                EXPORT_TIMEOUT,
                Limited::new(body, MAX_ANSWER_BYTES).collect(),
            )
            .await?
            .map_err(|e| -> HttpError { e })?
            .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        });
        let result = match sent.await {
            Ok(result) => result,
            Err(e) => Err(Box::new(e) as HttpError),
        };
        self.said(&result);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_without_a_path_gets_the_traces_path() {
        assert_eq!(
            endpoint("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            endpoint("https://otel.example/custom/path").unwrap(),
            "https://otel.example/custom/path"
        );
        for bad in [
            "",
            "127.0.0.1:4318",
            "ftp://x/v1/traces",
            "http://",
            "not a url",
        ] {
            assert!(endpoint(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            shown("https://user:secret@otel.example:4318/v1/traces?token=x"),
            "https://otel.example:4318/v1/traces"
        );
    }

    #[test]
    fn a_name_is_cut_at_a_character_boundary() {
        assert_eq!(cut("é".repeat(200), 257).len(), 256);
        assert_eq!(cut("abc".into(), 256), "abc");
    }

    #[test]
    fn a_client_context_is_read_only_when_well_formed() {
        let id = |meta: &str| {
            let cx = client_context(meta);
            let sc = cx.span().span_context().clone();
            sc.is_valid().then(|| sc.trace_id().to_string())
        };
        let good = r#"{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#;
        assert_eq!(
            id(good).as_deref(),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
        for hostile in [
            r#"{"traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}"#,
            r#"{"traceparent":"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#,
            r#"{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"}"#,
            r#"{"traceparent":17}"#,
            r#"{"traceparent":"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"}"#,
            r#"{"tracestate":"a=b"}"#,
            r#"{"traceparent":"x","traceparent":"y"}"#,
            "[]",
            "not json",
        ] {
            assert_eq!(id(hostile), None, "{hostile}");
        }
    }
}
