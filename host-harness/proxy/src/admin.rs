//! The admin listener (`--admin ADDR`), apart from the MCP endpoint: `/metrics` in the
//! Prometheus text format ([`crate::metrics`]), `/healthz` (the process answers) and
//! `/readyz` (the gate is loaded and every check the command gave passes: the trail or store
//! is writable, the upstream is reachable; not while draining). Read-only, GET and HEAD only,
//! and, as the MCP endpoint does, only for a `Host` that is an IP address or `localhost`: a
//! page that rebound its own domain to this address reads nothing here.

use crate::http::headers::host_allowed;
use crate::metrics;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One readiness check: `Ok` when ready, else what is wrong (said in `/readyz`'s body).
pub type Probe = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// How long one check may take before it counts as failed.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The admin listener: where, and what `/readyz` checks besides the gate.
pub struct Admin {
    /// Bound by the command (a bind failure is its usage error), handed over non-blocking.
    pub listener: std::net::TcpListener,
    /// Each check's name and probe, run on every `/readyz` (off the async threads).
    pub checks: Vec<(&'static str, Probe)>,
    /// Set when the proxy stops: `/readyz` then says `draining`, so a balancer sends no more.
    pub draining: Arc<AtomicBool>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("listener", &self.listener)
            .field(
                "checks",
                &self.checks.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Serve the admin endpoints until the runtime ends.
pub async fn serve(admin: Admin) -> Result<(), String> {
    admin
        .listener
        .set_nonblocking(true)
        .map_err(|e| format!("--admin: {e}"))?;
    let listener =
        tokio::net::TcpListener::from_std(admin.listener).map_err(|e| format!("--admin: {e}"))?;
    let checks = Arc::new(admin.checks);
    let draining = admin.draining;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (checks, draining) = (checks.clone(), draining.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (checks, draining) = (checks.clone(), draining.clone());
                async move { Ok::<_, Infallible>(route(&checks, &draining, &request).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(
    checks: &Arc<Vec<(&'static str, Probe)>>,
    draining: &AtomicBool,
    request: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host_ok = match (hosts.next(), hosts.next()) {
        (Some(host), None) => host.to_str().is_ok_and(|h| host_allowed(h, &[])),
        _ => false,
    };
    if !host_ok {
        return text(StatusCode::FORBIDDEN, "the request's host is not allowed\n");
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD\n");
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = Response::new(Full::new(Bytes::from(metrics::global().render())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => readiness(checks.clone(), draining.load(Ordering::SeqCst)).await,
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /healthz or /readyz\n",
        ),
    }
}

/// Every check, each bounded by [`CHECK_TIMEOUT`]: 200 when all pass, else 503; the body
/// names each check and what is wrong with it.
async fn readiness(
    checks: Arc<Vec<(&'static str, Probe)>>,
    draining: bool,
) -> Response<Full<Bytes>> {
    let mut results = serde_json::Map::new();
    let engines = metrics::global().engines();
    let gate = if engines > 0 {
        Ok(())
    } else {
        Err("no gate is loaded yet".to_owned())
    };
    results.insert("gate".into(), verdict(&gate));
    let mut ready = gate.is_ok();
    for i in 0..checks.len() {
        let all = checks.clone();
        let run =
            tokio::task::spawn_blocking(move || all.get(i).map_or(Ok(()), |(_, probe)| probe()));
        let outcome = match tokio::time::timeout(CHECK_TIMEOUT, run).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err("the check failed".to_owned()),
            Err(_) => Err(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())),
        };
        ready &= outcome.is_ok();
        if let Some((name, _)) = checks.get(i) {
            results.insert((*name).into(), verdict(&outcome));
        }
    }
    if draining {
        ready = false;
        results.insert("draining".into(), "stopping: no new calls".into());
    }
    let body = serde_json::json!({"ready": ready, "checks": results});
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = text(status, &format!("{body}\n"));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn verdict(outcome: &Result<(), String>) -> serde_json::Value {
    match outcome {
        Ok(()) => "ok".into(),
        Err(e) => e.clone().into(),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
