//! What one principal may hold of a shared listener at once (`HttpOptions::caps`): its
//! requests in flight and its protocol sessions, each a typed refusal (HTTP 429) for that
//! principal alone, and freed as its requests end or its sessions close.

use crate::support::*;
use hyper::{Method, StatusCode};
use mrtr_gate_proxy::http::{Caps, HttpOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn trusting(url: &str, caps: Caps) -> HttpOptions {
    let mut options = HttpOptions::new(url.to_owned());
    options.trust_principal_headers = Some(("x-user".into(), "x-tenant".into()));
    options.caps = caps;
    options
}

const ALICE: [(&str, &str); 2] = [("x-user", "alice"), ("x-tenant", "acme")];
const BOB: [(&str, &str); 2] = [("x-user", "bob"), ("x-tenant", "acme")];

fn as_who(
    who: [(&'static str, &'static str); 2],
    method: &'static str,
) -> Vec<(&'static str, &'static str)> {
    let mut h = mcp_headers(method, None);
    h.extend(who);
    h
}

fn list(id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{}}}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_at_its_cap_of_requests_in_flight_is_refused_and_no_other_is() {
    // `tools/list` with id 1 or 2 hangs; anything else is answered.
    let up = upstream(|s| match s.json()["id"].as_u64() {
        Some(1 | 2) => Script::Hang,
        _ => Script::Json(
            StatusCode::OK,
            vec![],
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[]}}}}"#,
                s.id()
            ),
        ),
    })
    .await;
    let caps = Caps {
        in_flight: 2,
        ..Caps::default()
    };
    let p = proxy_with(trusting(&up.url, caps)).await;
    let hanging: Vec<_> = (1..=2)
        .map(|id| {
            let url = p.url.clone();
            tokio::spawn(async move { post(&url, &as_who(ALICE, "tools/list"), &list(id)).await })
        })
        .collect();
    let start = Instant::now();
    while up.seen().len() < 2 {
        assert!(
            start.elapsed() < GUARD,
            "the two requests never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = post(&p.url, &as_who(ALICE, "tools/list"), &list(3)).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.body
    );
    assert_eq!(refused.refusal().1, "too_many_in_flight");
    assert_eq!(
        up.seen().len(),
        2,
        "nothing of the refused request went upstream"
    );
    // Bob is not Alice.
    let bobs = post(&p.url, &as_who(BOB, "tools/list"), &list(4)).await;
    assert_eq!(bobs.json()["result"]["tools"], serde_json::json!([]));
    // Alice's clients give up their calls: her places come back.
    for h in hanging {
        h.abort();
    }
    let start = Instant::now();
    loop {
        let again = post(&p.url, &as_who(ALICE, "tools/list"), &list(5)).await;
        if again.status == StatusCode::OK {
            assert_eq!(again.json()["result"]["tools"], serde_json::json!([]));
            break;
        }
        assert!(
            start.elapsed() < GUARD,
            "alice's places never came back: {}",
            again.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_at_its_cap_of_sessions_is_refused_and_the_new_session_ended_upstream() {
    let opened = Arc::new(AtomicUsize::new(0));
    let counter = opened.clone();
    let up = upstream(move |s| match s.method {
        Method::DELETE => Script::Status(StatusCode::OK, vec![]),
        _ => {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            Script::Json(
                StatusCode::OK,
                vec![("mcp-session-id", format!("s-{n}"))],
                format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, s.id()),
            )
        }
    })
    .await;
    let caps = Caps {
        sessions: 2,
        ..Caps::default()
    };
    let p = proxy_with(trusting(&up.url, caps)).await;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}"#;
    let headers = |who| {
        let mut h = vec![("content-type", "application/json"), ACCEPT];
        h.extend(who);
        h
    };
    for n in 0..2 {
        let ok = post(&p.url, &headers(ALICE), init).await;
        assert_eq!(ok.headers["mcp-session-id"], format!("s-{n}").as_str());
    }
    let refused = post(&p.url, &headers(ALICE), init).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.body
    );
    assert_eq!(refused.refusal().1, "too_many_sessions");
    assert!(!refused.headers.contains_key("mcp-session-id"));
    // The session the upstream opened for it is ended there.
    let start = Instant::now();
    while !up.seen().iter().any(|s| {
        s.method == Method::DELETE && s.headers.get("mcp-session-id").is_some_and(|v| v == "s-2")
    }) {
        assert!(
            start.elapsed() < GUARD,
            "the refused session was never deleted upstream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Bob has his own.
    let bobs = post(&p.url, &headers(BOB), init).await;
    assert_eq!(bobs.status, StatusCode::OK);
    // Alice ends one of hers, and may open another.
    let ended = send(
        &p.url,
        Method::DELETE,
        &[("mcp-session-id", "s-0"), ALICE[0], ALICE[1]],
        "",
    )
    .await;
    assert_eq!(ended.status, StatusCode::OK);
    let again = post(&p.url, &headers(ALICE), init).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
}
