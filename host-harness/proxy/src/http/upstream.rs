//! The upstream client: pooled HTTP/1 connections (TLS for `https`, verified against the
//! public roots and any the operator adds) to the configured URL and nothing else,
//! redirects never followed, a generous timeout that only guards against a hang, and answer
//! bodies read under the client's cap.

use crate::errors::Refusal;
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;
use std::time::Duration;

/// `host:port` of an `http(s)` upstream URL (the scheme's port when it names none): what a
/// readiness check connects to.
pub fn authority(url: &str) -> Result<String, String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("the upstream url does not parse: {e}"))?;
    let port = match (uri.port_u16(), uri.scheme_str()) {
        (Some(port), _) => port,
        (None, Some("https")) => 443,
        (None, Some("http")) => 80,
        _ => return Err("the upstream must be an http:// or https:// url".into()),
    };
    let host = uri.host().ok_or("the upstream url names no host")?;
    Ok(format!("{host}:{port}"))
}

/// The configured upstream.
#[derive(Clone, Debug)]
pub struct Upstream {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    uri: Uri,
    timeout: Duration,
    /// The last request could not reach the upstream: the operator is told when it goes and
    /// when it comes back, once each ([`crate::log`]).
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl Upstream {
    /// A client of `url` (the normalised URL the gate binds to: the proxy contacts exactly
    /// what it binds), waiting at most `timeout` for an answer's head or any part of its body.
    /// An `https` upstream's certificate must chain to a public root or to one of
    /// `extra_roots` (DER).
    pub fn new(url: &str, timeout: Duration, extra_roots: &[Vec<u8>]) -> Result<Self, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("the upstream url does not parse: {e}"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err("the upstream must be an http:// or https:// url".into());
        }
        let client = client(extra_roots)?;
        Ok(Self {
            client,
            uri,
            timeout,
            down: Arc::default(),
        })
    }

    /// The upstream as a message names it: scheme, host, port and path (never a user or a
    /// query, which may carry a secret).
    pub fn shown(&self) -> String {
        let port = self.uri.port().map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "{}://{}{port}{}",
            self.uri.scheme_str().unwrap_or("http"),
            self.uri.host().unwrap_or_default(),
            self.uri.path()
        )
    }

    /// The hang guard.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Send a request to the upstream: `headers` as given (the caller chose them), the URL
    /// the configured one. A redirect is an error: the client never follows one, and its
    /// target is a server the gate never bound.
    pub async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>, Refusal> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers;
        let answer = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|_| {
                Refusal::upstream(
                    "upstream_timeout",
                    format!(
                        "the upstream {} did not answer within {} s",
                        self.shown(),
                        self.timeout.as_secs()
                    ),
                )
            })?
            .map_err(|e| {
                let refusal = Refusal::upstream(
                    "transport_failed",
                    format!(
                        "the upstream {} could not be reached: {}",
                        self.shown(),
                        mrtr_gate_host::error_chain(&e)
                    ),
                );
                if !self.down.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    crate::log::warn(
                        "upstream_unreachable",
                        &refusal.message,
                        &[("upstream", &self.shown())],
                    );
                }
                refusal
            })?;
        if self.down.swap(false, std::sync::atomic::Ordering::SeqCst) {
            crate::log::info(
                "upstream_reachable",
                &format!("the upstream {} answers again", self.shown()),
                &[("upstream", &self.shown())],
            );
        }
        if answer.status().is_redirection() {
            return Err(Refusal::upstream(
                "redirect_refused",
                format!(
                    "the upstream answered {}: redirects are not followed",
                    answer.status().as_u16()
                ),
            ));
        }
        Ok(answer)
    }
}

/// A pooled HTTP/1 client, `https` verified against the public roots and `extra_roots` (DER):
/// the upstream's, and the trace exporter's ([`crate::trace`]).
pub(crate) fn client(
    extra_roots: &[Vec<u8>],
) -> Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for der in extra_roots {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| format!("an upstream root certificate is refused: {e}"))?;
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("no tls configuration: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    // Nagle off, as on the proxy's own listener: a request written in two segments would
    // otherwise wait out the upstream's delayed ACK on a kept-alive connection.
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector))
}

/// The next data of `body` (trailers skipped), waiting at most `idle`; `None` at its end.
pub async fn next_data(body: &mut Incoming, idle: Duration) -> Result<Option<Bytes>, Refusal> {
    loop {
        let frame = tokio::time::timeout(idle, body.frame())
            .await
            .map_err(|_| Refusal::upstream("upstream_timeout", "the upstream stopped sending"))?;
        match frame {
            None => return Ok(None),
            Some(Err(e)) => {
                return Err(Refusal::upstream(
                    "transport_failed",
                    format!("the upstream's answer broke off: {e}"),
                ));
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// The whole of `body`, at most `cap` bytes.
pub async fn read_capped(
    body: &mut Incoming,
    cap: usize,
    idle: Duration,
) -> Result<Bytes, Refusal> {
    let mut out = BytesMut::new();
    while let Some(data) = next_data(body, idle).await? {
        if out.len().saturating_add(data.len()) > cap {
            return Err(Refusal::upstream(
                "message_too_large",
                format!("the upstream's answer is over {cap} bytes"),
            ));
        }
        out.extend_from_slice(&data);
    }
    Ok(out.freeze())
}

/// The upstream's answer as text: a message that is not UTF-8 is no JSON-RPC message.
pub fn text(bytes: Bytes) -> Result<String, Refusal> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Refusal::upstream("malformed_message", "the upstream's answer is not utf-8"))
}
