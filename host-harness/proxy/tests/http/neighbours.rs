//! Clients of one endpoint, each named by the trusted principal headers, kept apart: a server
//! request shown to one client is answered by that client only (under an id nobody else can
//! guess, the server's own id upstream), a session belongs to the client that opened it (a
//! POST, GET or DELETE of anyone else's is an unknown session), and a user named in UTF-8 is
//! taken.

use crate::support::*;
use hyper::{Method, StatusCode};
use mrtr_gate_proxy::http::HttpOptions;
use serde_json::Value;
use std::time::Duration;

fn trusting(url: &str) -> HttpOptions {
    let mut options = HttpOptions::new(url.to_owned());
    options.trust_principal_headers = Some(("x-user".into(), "x-tenant".into()));
    options
}

const ALICE: [(&str, &str); 2] = [("x-user", "alice"), ("x-tenant", "acme")];
const BOB: [(&str, &str); 2] = [("x-user", "bob"), ("x-tenant", "acme")];

fn with<'a>(base: &[(&'a str, &'a str)], who: [(&'a str, &'a str); 2]) -> Vec<(&'a str, &'a str)> {
    let mut h = base.to_vec();
    h.extend(who);
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_request_is_answered_only_by_the_client_it_was_shown_to() {
    let up = upstream(|s| match s.method {
        Method::GET => Script::Sse(
            vec![],
            "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}\n\n".into(),
        ),
        _ => Script::Status(StatusCode::ACCEPTED, vec![]),
    })
    .await;
    let p = proxy_with(trusting(&up.url)).await;
    let stream = send(
        &p.url,
        Method::GET,
        &with(&[("accept", "text/event-stream")], ALICE),
        "",
    )
    .await;
    let events = stream.events();
    assert_eq!(events.len(), 1, "{}", stream.body);
    let shown: Value = serde_json::from_str(&events[0]).unwrap();
    let shown_id = shown["id"].clone();
    assert!(
        shown_id
            .as_str()
            .is_some_and(|id| id.starts_with("mg-ask:") && id.len() > 30),
        "the server's id is not what the client sees: {shown_id}"
    );
    let headers = [("content-type", "application/json"), ACCEPT];
    // Bob guesses the server's id, then tries the id Alice was shown: both refused, and
    // nothing reaches the server.
    for id in [Value::from(0), shown_id.clone()] {
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
        let refused = post(&p.url, &with(&headers, BOB), &answer).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{id}: {}",
            refused.body
        );
        assert_eq!(refused.refusal().1, "unknown_server_request");
    }
    assert!(up.seen().iter().all(|s| s.method != Method::POST));
    // Alice's answer goes up under the server's own id, once.
    let answer = serde_json::json!({"jsonrpc": "2.0", "id": shown_id, "result": {}}).to_string();
    let taken = post(&p.url, &with(&headers, ALICE), &answer).await;
    assert_eq!(taken.status, StatusCode::ACCEPTED, "{}", taken.body);
    let posted: Vec<_> = up
        .seen()
        .into_iter()
        .filter(|s| s.method == Method::POST)
        .collect();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].json()["id"], 0);
    let again = post(&p.url, &with(&headers, ALICE), &answer).await;
    assert_eq!(again.status, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_its_openers_and_another_client_cannot_end_its_rounds() {
    let up = upstream(|s| match s.method {
        Method::DELETE => Script::Status(StatusCode::OK, vec![]),
        Method::POST if s.json()["method"] == "initialize" => Script::Json(
            StatusCode::OK,
            vec![("mcp-session-id", "s-alice".to_owned())],
            format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, s.id()),
        ),
        _ => Script::Json(StatusCode::OK, vec![], form_round(&s.id())),
    })
    .await;
    let p = proxy_with(trusting(&up.url)).await;
    let headers = [("content-type", "application/json"), ACCEPT];
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}"#;
    let opened = post(&p.url, &with(&headers, ALICE), init).await;
    assert_eq!(opened.headers["mcp-session-id"], "s-alice");
    let old_call = call("1", "book").replace(
        r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
        "",
    );
    let in_session = with(
        &[
            ("content-type", "application/json"),
            ACCEPT,
            ("mcp-session-id", "s-alice"),
        ],
        ALICE,
    );
    let round = post(&p.url, &in_session, &old_call).await;
    assert_eq!(round.body, form_round("1"));
    // Bob names Alice's session: a DELETE, a GET stream, a call.
    let bobs = [("mcp-session-id", "s-alice"), BOB[0], BOB[1]];
    let delete = send(&p.url, Method::DELETE, &bobs, "").await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND);
    let mut get = bobs.to_vec();
    get.push(("accept", "text/event-stream"));
    assert_eq!(
        send(&p.url, Method::GET, &get, "").await.status,
        StatusCode::NOT_FOUND
    );
    let mut bob_call = bobs.to_vec();
    bob_call.extend(headers);
    assert_eq!(
        post(&p.url, &bob_call, &call("2", "book")).await.status,
        StatusCode::NOT_FOUND
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(p.terminals().is_empty(), "Alice's round is open");
    assert!(
        up.seen()
            .iter()
            .all(|s| s.method != Method::DELETE && s.method != Method::GET)
    );
    // Alice ends her own.
    let mine = send(
        &p.url,
        Method::DELETE,
        &[("mcp-session-id", "s-alice"), ALICE[0], ALICE[1]],
        "",
    )
    .await;
    assert_eq!(mine.status, StatusCode::OK);
    let ends = p.wait_terminals(1).await;
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].0, "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_named_in_utf8_is_taken_and_a_control_character_is_not() {
    let up = upstream(|s| Script::Json(StatusCode::OK, vec![], form_round(&s.id()))).await;
    let p = proxy_with(trusting(&up.url)).await;
    let base = mcp_headers("tools/call", Some("book"));
    let jose = with(
        &base,
        [("x-user", "josé@example.com"), ("x-tenant", "acme")],
    );
    let a = post(&p.url, &jose, &call("1", "book")).await;
    assert_eq!(a.body, form_round("1"));
    // A tab, a C1 control: the trail would digest a name no directory holds.
    for user in ["jos\te", "jos\u{85}e"] {
        let control = with(&base, [("x-user", user), ("x-tenant", "acme")]);
        let refused = post(&p.url, &control, &call("2", "book")).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{user:?}");
        assert_eq!(refused.refusal().1, "principal_missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_request_is_answered_only_on_the_session_it_was_shown_on() {
    let up = upstream(|s| match s.method {
        Method::GET => Script::Sse(
            vec![],
            "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}\n\n".into(),
        ),
        _ => Script::Status(StatusCode::ACCEPTED, vec![]),
    })
    .await;
    let p = proxy_with(trusting(&up.url)).await;
    let on = |session: &'static str| {
        with(
            &[
                ("content-type", "application/json"),
                ACCEPT,
                ("mcp-session-id", session),
            ],
            ALICE,
        )
    };
    let mut get = on("s-1");
    get.push(("accept", "text/event-stream"));
    let stream = send(&p.url, Method::GET, &get, "").await;
    let shown: Value = serde_json::from_str(&stream.events()[0]).unwrap();
    let answer = serde_json::json!({"jsonrpc": "2.0", "id": shown["id"], "result": {}}).to_string();
    // Alice herself, on another session of hers: not where it was asked.
    let elsewhere = post(&p.url, &on("s-2"), &answer).await;
    assert_eq!(
        elsewhere.status,
        StatusCode::FORBIDDEN,
        "{}",
        elsewhere.body
    );
    assert_eq!(elsewhere.refusal().1, "unknown_server_request");
    assert!(up.seen().iter().all(|s| s.method != Method::POST));
    // On the session it was shown on: taken, once.
    let taken = post(&p.url, &on("s-1"), &answer).await;
    assert_eq!(taken.status, StatusCode::ACCEPTED, "{}", taken.body);
    let again = post(&p.url, &on("s-1"), &answer).await;
    assert_eq!(again.status, StatusCode::FORBIDDEN);
}
