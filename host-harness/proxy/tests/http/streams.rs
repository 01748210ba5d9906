//! Streams and connections: SSE re-framing, the GET stream, DELETE, hang-ups, many clients.

use crate::support::*;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

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
async fn a_foreign_response_a_batch_or_a_typed_event_on_the_stream_is_refused() {
    for (case, stream, code) in [
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
async fn the_first_response_ends_the_stream_even_one_the_server_keeps_open() {
    // A server that keeps its stream open after the response (the specification's SHOULD
    // close, not MUST), and sends a second response: the client has the first, judged, at
    // once; nothing after it is read, so the second never reaches the client.
    let up = upstream(|s| {
        let id = s.id();
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        Script::SseOpen(format!(
            "data: {progress}\n\ndata: {}\n\ndata: {}\n\n",
            form_round(&id).replace('\n', ""),
            complete(&id)
        ))
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
    assert_eq!(events.len(), 2, "{}", a.body);
    assert!(events[0].contains("notifications/progress"));
    let round: Value = serde_json::from_str(&events[1]).unwrap();
    assert_eq!(round["id"], 5);
    assert_eq!(
        round["result"]["resultType"], "input_required",
        "{}",
        a.body
    );
    assert!(!a.body.contains("done"), "{}", a.body);
    assert!(p.terminals().is_empty(), "the round is open");
    // The proxy closed the upstream's stream.
    tokio::time::timeout(GUARD, async {
        while *up.dropped.lock().unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
}

/// Send `body` on a raw connection, wait until the upstream has seen `seen` requests, and
/// hang up.
async fn send_and_hang_up(p: &Proxy, up: &Upstream, body: &str, seen: usize) {
    let addr = p
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: book\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let start = std::time::Instant::now();
    while up.seen().len() < seen && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(up.seen().len(), seen);
    drop(s);
    let start = std::time::Instant::now();
    while *up.dropped.lock().unwrap() == 0 && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        *up.dropped.lock().unwrap(),
        1,
        "the upstream request was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_call_ends_its_binding_and_the_upstream_request() {
    let up = upstream(|_| Script::Hang).await;
    let p = proxy(&up).await;
    send_and_hang_up(&p, &up, &call("1", "book"), 1).await;
    // The call had opened no round, so the trail has no terminal event for it (audit.md);
    // the binding is gone from the gate.
    let start = std::time::Instant::now();
    while p.bindings() > 0 && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(p.bindings(), 0, "the binding ended");
    assert!(p.terminals().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_retry_ends_its_binding_cancelled_in_the_trail() {
    // The call gets a round; its retry never gets an answer.
    let up = upstream(|s| {
        if s.body.contains("inputResponses") {
            Script::Hang
        } else {
            Script::Json(StatusCode::OK, vec![], form_round(&s.id()))
        }
    })
    .await;
    let p = proxy(&up).await;
    let round = post(
        &p.url,
        &mcp_headers("tools/call", Some("book")),
        &call("1", "book"),
    )
    .await;
    assert_eq!(round.body, form_round("1"));
    let retry = call("2", "book").replacen(
        r#""_meta""#,
        r#""inputResponses":{"seat":{"action":"accept","content":{"seat":"12A"}}},"requestState":"opaque \u00e9","_meta""#,
        1,
    );
    send_and_hang_up(&p, &up, &retry, 2).await;
    let ends = p.wait_terminals(1).await;
    assert_eq!(ends.len(), 1, "{:?}", p.audit.events());
    assert_eq!(ends[0].0, "cancelled");
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
