//! What the client sends: the mirrored headers, the headers passed on, caps, origins, principals.

use crate::support::*;
use hyper::{Method, StatusCode};
use mrtr_gate_proxy::http::HttpOptions;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

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
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
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
    s.write_all(b"POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
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
async fn a_host_that_is_not_an_address_localhost_or_allowed_is_refused() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], complete(&s.id()))).await;
    let mut options = HttpOptions::new(up.url.clone());
    options.allowed_hosts = vec!["gw.example".into()];
    let p = proxy_with(options).await;
    // A page that rebound its own domain to the proxy's address: same-origin, no `Origin`.
    for rebound in ["evil.example", "evil.example:8080", "127.0.0.1.nip.io"] {
        let mut h = mcp_headers("tools/call", Some("book"));
        h.push(("host", rebound));
        let a = post(&p.url, &h, &call("1", "book")).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{rebound}");
        assert_eq!(a.refusal(), (-31004, "host_refused".into()), "{rebound}");
        let g = send(&p.url, Method::GET, &[("host", rebound)], "").await;
        assert_eq!(g.status, StatusCode::FORBIDDEN, "{rebound}");
    }
    assert!(up.seen().is_empty());
    for fine in ["localhost", "gw.example"] {
        let mut h = mcp_headers("tools/call", Some("book"));
        h.push(("host", fine));
        let a = post(&p.url, &h, &call("1", "book")).await;
        assert_eq!(a.body, complete("1"), "{fine}");
    }
    assert_eq!(up.seen().len(), 2);
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
async fn a_legacy_server_request_is_audited_under_the_principal_whose_stream_carried_it() {
    let legacy = r#"data: {"jsonrpc":"2.0","id":41,"method":"elicitation/create","params":{"message":"password?","requestedSchema":{}}}"#;
    let up = upstream(move |s| match s.method {
        Method::GET => Script::Sse(vec![], format!("{legacy}\n\n")),
        Method::POST if s.json()["method"] == "tools/call" => Script::Sse(
            vec![],
            format!(
                "{legacy}\n\ndata: {}\n\n",
                form_round(&s.id()).replace('\n', "")
            ),
        ),
        _ => Script::Status(StatusCode::ACCEPTED, vec![]),
    })
    .await;
    let mut options = HttpOptions::new(up.url.clone());
    options.trust_principal_headers = Some(("x-user".into(), "x-tenant".into()));
    let p = proxy_with(options).await;
    let as_bob = [("x-user", "bob"), ("x-tenant", "globex")];
    let mut h = mcp_headers("tools/call", Some("book"));
    h.extend(as_bob);
    let a = post(&p.url, &h, &call("1", "book")).await;
    assert!(!a.body.contains("password"), "{}", a.body);
    let mut g = vec![("accept", "text/event-stream")];
    g.extend(as_bob);
    let got = send(&p.url, Method::GET, &g, "").await;
    assert!(!got.body.contains("password"), "{}", got.body);
    let events = p.audit.events();
    let received = events.iter().find(|e| e["event"] == "received").unwrap();
    let refused: Vec<_> = events
        .iter()
        .filter(|e| e["reason"] == "legacy_server_request")
        .collect();
    assert_eq!(refused.len(), 2, "{events:?}");
    for e in refused {
        assert_eq!(e["user_sha256"], received["user_sha256"], "{e}");
        assert_eq!(e["tenant_sha256"], received["tenant_sha256"], "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_stops_when_told_to() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(mrtr_gate_proxy::http::serve_until(
        HttpOptions::new("http://127.0.0.1:9/mcp"),
        listener,
        engine_for,
        async {
            let _ = stopped.await;
        },
    ));
    let _ = stop.send(());
    let ended = tokio::time::timeout(GUARD, served).await.unwrap().unwrap();
    assert_eq!(ended, Ok(()));
    // An upstream that is no http(s) url is refused before anything is served.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = mrtr_gate_proxy::http::serve(
        HttpOptions::new("ftp://127.0.0.1/mcp"),
        listener,
        engine_for,
    )
    .await;
    assert!(refused.is_err());
}
