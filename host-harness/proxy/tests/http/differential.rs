//! The repo's differential server (`tests/peers/python_sdk/differential_server.py`): answers
//! that different readers read differently, a harmless result where one looks and
//! `REAL-UNJUDGED` where another looks. Through the proxy, each is refused with its code on
//! the first answer and on a retry's (but a second response, which is never read: the first
//! ends the stream), and `REAL-UNJUDGED` never reaches the client.

use crate::support::*;
use hyper::{Method, StatusCode};
use mrtr_gate_peers::Peer;
use mrtr_gate_proxy::http::HttpOptions;

fn call_tool(id: u32, name: &str, state: Option<&str>) -> String {
    let retry = state
        .map(|s| format!(r#","requestState":"{s}""#))
        .unwrap_or_default();
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}{retry},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_differential_answer_is_refused_and_the_unjudged_one_never_reaches_the_client() {
    let server = Peer::differential();
    let p = proxy_with(HttpOptions::new(server.url.clone())).await;
    let mut id = 0;
    for (case, code) in [
        ("typed", "typed_event"),
        ("other_id", "foreign_response"),
        ("batch", "batch_message"),
        ("batch_body", "batch_message"),
        ("other_id_body", "foreign_response"),
    ] {
        for place in ["first", "retry"] {
            let name = format!("{place}:{case}");
            let header: &'static str = Box::leak(name.clone().into_boxed_str());
            let headers = mcp_headers("tools/call", Some(header));
            id += 1;
            let mut a = post(&p.url, &headers, &call_tool(id, &name, None)).await;
            if place == "retry" {
                let round = a.json();
                assert_eq!(
                    round["result"]["requestState"], "step-1",
                    "{name}: {}",
                    a.body
                );
                id += 1;
                a = post(&p.url, &headers, &call_tool(id, &name, Some("step-1"))).await;
            }
            assert!(!a.body.contains("REAL-UNJUDGED"), "{name}: {}", a.body);
            assert!(!a.body.contains("harmless"), "{name}: {}", a.body);
            let last = if a.headers["content-type"] == "text/event-stream" {
                a.events().pop().unwrap()
            } else {
                a.body.clone()
            };
            let v: serde_json::Value = serde_json::from_str(&last)
                .unwrap_or_else(|e| panic!("{name}: {e}: {} {:?} {}", a.status, a.headers, a.body));
            assert_eq!(v["id"], id, "{name}");
            assert_eq!(v["error"]["code"], -31003, "{name}: {last}");
            assert_eq!(v["error"]["data"]["mrtr_gate"]["code"], code, "{name}");
        }
    }
    // A clean stream: the notification, then the judged result; nothing else.
    let headers = mcp_headers("tools/call", Some("first:clean"));
    let a = post(&p.url, &headers, &call_tool(100, "first:clean", None)).await;
    let events = a.events();
    assert_eq!(events.len(), 2, "{}", a.body);
    assert!(events[0].contains("working"));
    let done: serde_json::Value = serde_json::from_str(&events[1]).unwrap();
    assert_eq!(done["id"], 100);
    assert_eq!(done["result"]["content"][0]["text"], "harmless");
    // What the server pushes on its GET stream (a response nobody asked for) is dropped.
    let get = send(&p.url, Method::GET, &[("accept", "text/event-stream")], "").await;
    assert_eq!(get.status, StatusCode::OK);
    assert!(get.events().is_empty(), "{}", get.body);
    // A second response after the first: the first ends the stream, judged; the second is
    // never read, so it never reaches the client.
    for place in ["first", "retry"] {
        let name = format!("{place}:second");
        let header: &'static str = Box::leak(name.clone().into_boxed_str());
        let headers = mcp_headers("tools/call", Some(header));
        id += 1;
        let mut a = post(&p.url, &headers, &call_tool(id, &name, None)).await;
        if place == "retry" {
            id += 1;
            a = post(&p.url, &headers, &call_tool(id, &name, Some("step-1"))).await;
        }
        assert!(!a.body.contains("REAL-UNJUDGED"), "{name}: {}", a.body);
        let done: serde_json::Value = serde_json::from_str(&a.events().pop().unwrap()).unwrap();
        assert_eq!(done["id"], id, "{name}");
        assert_eq!(done["result"]["content"][0]["text"], "harmless", "{name}");
    }
    // Every refused call ended in the trail with the refusal's code; the retried
    // second-response call completed (a call answered without a round has no binding to end).
    let ends = p.wait_terminals(11).await;
    let errors = ends.iter().filter(|(o, _)| o == "error").count();
    assert_eq!(errors, 10, "{ends:?}");
    let completed: Vec<_> = ends.iter().filter(|(o, _)| o != "error").collect();
    assert_eq!(completed.len(), 1, "{ends:?}");
    assert_eq!(completed[0].0, "complete", "{ends:?}");
}
