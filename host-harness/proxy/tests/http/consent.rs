//! A slow consent over HTTP (`--consent tty` or `command`, many clients on one engine): a
//! person or a hook deciding on one client's retry holds up that retry only; every other
//! client's calls go on meanwhile, and the decision reaches the gate for exactly the prompt it
//! was made on.

use crate::support::*;
use hyper::StatusCode;
use mrtr_gate_host::core::host::{
    Consent, ConsentDecision, ConsentMethod, ConsentPrompt, ConsentReceipt, HostError,
};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// A consent that tells the test it was asked (with the prompt) and waits for the test's
/// decision: a person at a terminal, taking as long as they take.
struct Held {
    asked: Mutex<Sender<ConsentPrompt>>,
    decisions: Mutex<Receiver<Option<bool>>>,
}

impl Consent for Held {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let _ = self.asked.lock().unwrap().send(prompt.clone());
        let decision = self.decisions.lock().unwrap().recv();
        match decision {
            Ok(Some(granted)) => Ok(ConsentReceipt {
                receipt_id: format!("held-{}", &prompt.responses_sha256[..8]),
                decision: if granted {
                    ConsentDecision::Granted
                } else {
                    ConsentDecision::Refused
                },
                method: ConsentMethod::UserAtScreen,
                view_sha256: prompt.view_sha256.clone(),
                responses_sha256: prompt.responses_sha256.clone(),
            }),
            _ => Err(HostError::new("nobody at the terminal")),
        }
    }
}

fn held() -> (Arc<Held>, Receiver<ConsentPrompt>, Sender<Option<bool>>) {
    let (asked, prompts) = channel();
    let (decide, decisions) = channel();
    let consent = Held {
        asked: Mutex::new(asked),
        decisions: Mutex::new(decisions),
    };
    (Arc::new(consent), prompts, decide)
}

/// A round for each call, its state naming the call's destination; a retry is answered with
/// the seat it carries.
fn book(seen: &Seen) -> Script {
    let v = seen.json();
    let to = v["params"]["arguments"]["to"].as_str().unwrap().to_owned();
    let body = match v["params"]["inputResponses"]["seat"]["content"]["seat"].as_str() {
        Some(seat) => format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"{to} {seat}"}}]}}}}"#,
            seen.id()
        ),
        None => form_round(&seen.id()).replace("opaque \\u00e9", &format!("state-{to}")),
    };
    Script::Json(StatusCode::OK, vec![], body)
}

fn call_to(id: &str, to: &str) -> String {
    call(id, "book").replace(r#""to":"LIS""#, &format!(r#""to":"{to}""#))
}

fn retry_to(id: &str, to: &str, seat: &str) -> String {
    call_to(id, to).replacen(
        r#""_meta""#,
        &format!(
            r#""inputResponses":{{"seat":{{"action":"accept","content":{{"seat":"{seat}"}}}}}},"requestState":"state-{to}","_meta""#
        ),
        1,
    )
}

fn prompt_within(prompts: &Receiver<ConsentPrompt>) -> ConsentPrompt {
    prompts
        .recv_timeout(GUARD)
        .expect("the consent was never asked")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_deciding_on_one_retry_holds_up_no_other_client() {
    let up = upstream(book).await;
    let (consent, prompts, decide) = held();
    let p = proxy_deferring(&up, consent).await;
    let headers = mcp_headers("tools/call", Some("book"));
    let round = post(&p.url, &headers, &call_to("1", "A")).await;
    assert_eq!(round.json()["result"]["requestState"], "state-A");
    // A's retry waits for the person...
    let (url, h) = (p.url.clone(), headers.clone());
    let waiting = tokio::spawn(async move { post(&url, &h, &retry_to("2", "A", "1A")).await });
    let asked = tokio::task::spawn_blocking(move || (prompt_within(&prompts), prompts))
        .await
        .unwrap();
    let (prompt, prompts) = asked;
    assert!(
        prompt.responses_json.contains(r#""seat":"1A""#),
        "{}",
        prompt.responses_json
    );
    // ...while another client's calls are gated, judged and answered.
    for n in 0..3 {
        let to = format!("B{n}");
        let other = tokio::time::timeout(GUARD, post(&p.url, &headers, &call_to("1", &to)))
            .await
            .expect("another client's call waited for the person");
        assert_eq!(
            other.json()["result"]["requestState"],
            format!("state-{to}")
        );
    }
    assert!(!waiting.is_finished());
    // The person says yes: A's retry goes out, built on that decision.
    decide.send(Some(true)).unwrap();
    let done = tokio::time::timeout(GUARD, waiting).await.unwrap().unwrap();
    assert_eq!(
        done.json()["result"]["content"][0]["text"],
        "A 1A",
        "{}",
        done.body
    );
    let events = p.audit.events();
    let consented: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "consented")
        .collect();
    assert_eq!(consented.len(), 1, "{consented:?}");
    assert_eq!(consented[0]["consent_method"], "user_at_screen");
    assert_eq!(
        consented[0]["consent_receipt_id"],
        format!("held-{}", &prompt.responses_sha256[..8])
    );
    // Asked once: the gate took the decision made off its thread.
    assert!(prompts.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_or_no_decision_made_off_the_thread_is_the_gates_denial() {
    let up = upstream(book).await;
    let (consent, prompts, decide) = held();
    let p = proxy_deferring(&up, consent).await;
    let headers = mcp_headers("tools/call", Some("book"));
    post(&p.url, &headers, &call_to("1", "A")).await;
    // No: the round stays open for answers the person takes.
    decide.send(Some(false)).unwrap();
    let refused = post(&p.url, &headers, &retry_to("2", "A", "1A")).await;
    assert_eq!(refused.refusal().1, "consent_refused", "{}", refused.body);
    // Yes to the next answers: they go out.
    decide.send(Some(true)).unwrap();
    let done = post(&p.url, &headers, &retry_to("3", "A", "2B")).await;
    assert_eq!(
        done.json()["result"]["content"][0]["text"],
        "A 2B",
        "{}",
        done.body
    );
    // Nobody at the terminal: consent_unavailable, asked once (a host failure: the round
    // ends, as with consent asked inline).
    post(&p.url, &headers, &call_to("1", "C")).await;
    decide.send(None).unwrap();
    let unavailable = post(&p.url, &headers, &retry_to("2", "C", "1A")).await;
    assert_eq!(
        unavailable.refusal().1,
        "consent_unavailable",
        "{}",
        unavailable.body
    );
    let shown: Vec<String> = std::iter::from_fn(|| prompts.try_recv().ok())
        .map(|p| p.responses_json)
        .collect();
    assert_eq!(shown.len(), 3, "each retry asked once: {shown:?}");
    // Nothing went upstream but the one granted retry.
    let retries = up
        .seen()
        .iter()
        .filter(|s| s.json()["params"]["inputResponses"].is_object())
        .count();
    assert_eq!(retries, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_only_round_asks_nobody() {
    let up = upstream(|seen: &Seen| {
        let v = seen.json();
        let body = if v["params"]["requestState"].is_string() {
            complete(&seen.id())
        } else {
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","requestState":"later"}}}}"#,
                seen.id()
            )
        };
        Script::Json(StatusCode::OK, vec![], body)
    })
    .await;
    let (consent, prompts, _decide) = held();
    let p = proxy_deferring(&up, consent).await;
    let headers = mcp_headers("tools/call", Some("book"));
    post(&p.url, &headers, &call("1", "book")).await;
    let retry = call("2", "book").replacen(r#""_meta""#, r#""requestState":"later","_meta""#, 1);
    let done = post(&p.url, &headers, &retry).await;
    assert_eq!(
        done.json()["result"]["content"][0]["text"],
        "done",
        "{}",
        done.body
    );
    assert!(prompts.try_recv().is_err());
}
