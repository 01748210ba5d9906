//! What the upstream answers, as JSON: judged, relayed, refused.

use crate::support::*;
use hyper::StatusCode;
use serde_json::{Value, json};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_64_mib_ends_the_call_with_31003() {
    let up = upstream(|s| {
        let cap = 64 * 1024 * 1024;
        let body = complete(&s.id());
        let padded = format!("{body}{}", " ".repeat(cap + 1 - body.len()));
        Script::Json(StatusCode::OK, vec![], padded)
    })
    .await;
    let p = proxy(&up).await;
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("book")),
        &call("4", "book"),
    )
    .await;
    assert_eq!(
        a.refusal(),
        (-31003, "message_too_large".into()),
        "{}",
        &a.body[..a.body.len().min(300)]
    );
    assert_eq!(a.json()["id"], 4);
    assert_eq!(p.bindings(), 0);
}
