//! An `https` upstream: its certificate verified (against the public roots and the ones the
//! operator adds), never taken on trust.

use crate::support::*;
use hyper::StatusCode;
use mrtr_gate_proxy::http::HttpOptions;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// A private CA and a server certificate it signed for 127.0.0.1, made with the openssl
/// command: (the CA's DER, the server's certificate DER, its PKCS#8 key DER).
fn certificates(dir: &Path) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=mrtr-gate test ca",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    openssl(&["x509", "-in", "ca.pem", "-outform", "DER", "-out", "ca.der"]);
    openssl(&[
        "x509", "-in", "leaf.pem", "-outform", "DER", "-out", "leaf.der",
    ]);
    openssl(&[
        "pkcs8",
        "-topk8",
        "-nocrypt",
        "-in",
        "leaf.key",
        "-outform",
        "DER",
        "-out",
        "leaf.key.der",
    ]);
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    (read("ca.der"), read("leaf.der"), read("leaf.key.der"))
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_used_only_when_its_certificate_verifies() {
    let dir = TempDir(std::env::temp_dir().join(format!(
        "mrtr-gate-proxy-tls-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    )));
    std::fs::create_dir_all(&dir.0).unwrap();
    let (ca, leaf, key) = certificates(&dir.0);
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from(leaf)],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let up = upstream_on(
        |s| Script::Json(StatusCode::OK, vec![], form_round(&s.id())),
        Some(acceptor),
    )
    .await;
    assert!(up.url.starts_with("https://"));
    // Without the private CA the certificate chains to no root: nothing is sent.
    let untrusting = proxy_with(HttpOptions::new(up.url.clone())).await;
    let a = post(
        &untrusting.url,
        &mcp_headers("tools/call", Some("book")),
        &call("1", "book"),
    )
    .await;
    assert_eq!(
        a.refusal(),
        (-31003, "transport_failed".into()),
        "{}",
        a.body
    );
    assert!(up.seen().is_empty());
    // With it, the call goes through TLS and is gated as ever.
    let mut options = HttpOptions::new(up.url.clone());
    options.upstream_roots = vec![ca];
    let trusting = proxy_with(options).await;
    let a = post(
        &trusting.url,
        &mcp_headers("tools/call", Some("book")),
        &call("2", "book"),
    )
    .await;
    assert_eq!(a.body, form_round("2"));
    assert_eq!(up.seen().len(), 1);
}
