//! Rounds and their retries over HTTP, where every retry is a POST of its own (possibly on
//! another connection): matched to its round by the engine and the gate, or refused before
//! anything goes upstream.

use crate::support::*;
use hyper::StatusCode;
use serde_json::Value;

/// A round for the call `seen`, its state naming the call's destination; the retry's answer
/// names the seat it was given.
fn answer(seen: &Seen) -> Script {
    let v = seen.json();
    let to = v["params"]["arguments"]["to"].as_str().unwrap().to_owned();
    let body = if v["params"]["inputResponses"].is_object() {
        let seat = &v["params"]["inputResponses"]["seat"]["content"]["seat"];
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"{to} {}"}}]}}}}"#,
            seen.id(),
            seat.as_str().unwrap()
        )
    } else {
        form_round(&seen.id()).replace("opaque \\u00e9", &format!("state-{to}"))
    };
    Script::Json(StatusCode::OK, vec![], body)
}

fn call_to(id: &str, to: &str) -> String {
    call(id, "book").replace(r#""to":"LIS""#, &format!(r#""to":"{to}""#))
}

fn retry_to(id: &str, to: &str, seat: &str, state: &str) -> String {
    call_to(id, to).replacen(
        r#""_meta""#,
        &format!(
            r#""inputResponses":{{"seat":{{"action":"accept","content":{{"seat":"{seat}"}}}}}},"requestState":"{state}","_meta""#
        ),
        1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_each_retry_their_own_round_on_a_connection_of_its_own() {
    let up = upstream(answer).await;
    let p = proxy(&up).await;
    let clients = (0..16).map(|n| {
        let url = p.url.clone();
        tokio::spawn(async move {
            let to = format!("T{n:02}");
            let headers = mcp_headers("tools/call", Some("book"));
            let round = post(&url, &headers, &call_to("1", &to)).await;
            let v = round.json();
            assert_eq!(v["id"], 1);
            let state = v["result"]["requestState"].as_str().unwrap().to_owned();
            assert_eq!(state, format!("state-{to}"));
            let seat = format!("{n}A");
            let done = post(&url, &headers, &retry_to("2", &to, &seat, &state)).await;
            (to, seat, done)
        })
    });
    for client in clients {
        let (to, seat, done) = client.await.unwrap();
        let v = done.json();
        assert_eq!(v["id"], 2, "{}", done.body);
        assert_eq!(v["result"]["content"][0]["text"], format!("{to} {seat}"));
    }
    // Upstream, every retry was the gate's: a minted id, the registered arguments.
    let retries: Vec<Value> = up
        .seen()
        .iter()
        .map(Seen::json)
        .filter(|v| v["params"]["inputResponses"].is_object())
        .collect();
    assert_eq!(retries.len(), 16);
    let ends = p.wait_terminals(16).await;
    assert!(
        ends.iter().all(|(outcome, _)| outcome == "complete"),
        "{ends:?}"
    );
    assert_eq!(p.bindings(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_matches_no_open_round_never_goes_upstream() {
    let up = upstream(answer).await;
    let p = proxy(&up).await;
    let headers = mcp_headers("tools/call", Some("book"));
    let round = post(&p.url, &headers, &call_to("1", "LIS")).await;
    assert_eq!(round.json()["result"]["resultType"], "input_required");
    for (case, retry) in [
        ("changed arguments", retry_to("2", "OPO", "1A", "state-LIS")),
        ("edited state", retry_to("3", "LIS", "1A", "state-LIX")),
        (
            "answers that fail the schema",
            retry_to("4", "LIS", "TOO-LONG", "state-LIS"),
        ),
    ] {
        let a = post(&p.url, &headers, &retry).await;
        let (code, gate_code) = a.refusal();
        assert_eq!(code, -31001, "{case}: {}", a.body);
        assert!(!gate_code.is_empty(), "{case}");
    }
    assert_eq!(up.seen().len(), 1, "no refused retry went upstream");
    // The round is still the client's to answer right, once.
    let good = retry_to("5", "LIS", "1A", "state-LIS");
    let done = post(&p.url, &headers, &good).await;
    assert_eq!(done.json()["result"]["content"][0]["text"], "LIS 1A");
    let again = post(&p.url, &headers, &retry_to("6", "LIS", "1A", "state-LIS")).await;
    assert_eq!(
        again.refusal().0,
        -31001,
        "the same retry twice: {}",
        again.body
    );
    assert_eq!(up.seen().len(), 2);
}
