//! The SDK servers' tools as a client sees them through the proxy (tests/peers): each call,
//! the text it returns and the elicitations its rounds show; and what the trail must show of
//! them. Shared by the stdio and HTTP tests of the real SDK clients.

#![allow(dead_code)]

use crate::support::{Proxy, Report, binding, bindings};
use serde_json::{Value, json};

/// One expected call: the tool, its arguments, what its text holds, and the elicitations the
/// client's handler saw (`form:<message>` or `url:<url>`), round after round.
pub struct Expect {
    /// The tool.
    pub tool: &'static str,
    /// Its arguments.
    pub arguments: Value,
    /// What its text holds.
    pub text: &'static [&'static str],
    /// The rounds' elicitations.
    pub elicited: &'static [&'static str],
}

pub fn book_flight() -> Expect {
    Expect {
        tool: "book_flight",
        arguments: json!({"origin": "OSL", "destination": "SFO"}),
        text: &["booked", "Ada Lovelace", "window"],
        elicited: &["form:Who is flying?"],
    }
}

pub fn pay() -> Expect {
    Expect {
        tool: "pay",
        arguments: json!({"amount": 5}),
        text: &["paid 5", "accept"],
        elicited: &["url:https://pay.example.com/authorize?session=SECRET-SESSION"],
    }
}

pub fn continue_job() -> Expect {
    Expect {
        tool: "continue_job",
        arguments: json!({}),
        text: &["job done after step-1"],
        elicited: &[],
    }
}

pub fn survey() -> Expect {
    Expect {
        tool: "survey",
        arguments: json!({}),
        text: &["survey:", "yes"],
        elicited: &["form:Question 1", "form:Question 2", "form:Question 3"],
    }
}

pub fn calls(expected: &[Expect]) -> Value {
    Value::Array(
        expected
            .iter()
            .map(|e| json!([e.tool, e.arguments]))
            .collect(),
    )
}

pub fn seen(call: &Value) -> Vec<String> {
    call["elicited"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["mode"].as_str().unwrap() {
            "url" => format!("url:{}", e["url"].as_str().unwrap()),
            _ => format!("form:{}", e["message"].as_str().unwrap()),
        })
        .collect()
}

/// Every call completed with what its tool returns, after exactly its rounds.
pub fn assert_completed(report: &Report, expected: &[Expect]) {
    assert_eq!(report.calls.len(), expected.len(), "{:?}", report.calls);
    for (call, e) in report.calls.iter().zip(expected) {
        assert_eq!(call["tool"], e.tool);
        assert_eq!(
            call["ok"], true,
            "{} failed: {call}\n{}",
            e.tool, report.stderr
        );
        assert_eq!(call["is_error"], false, "{call}");
        let text = call["text"].as_str().unwrap();
        for part in e.text {
            assert!(text.contains(part), "{}: {text:?} lacks {part:?}", e.tool);
        }
        assert_eq!(seen(call), e.elicited, "{}", e.tool);
    }
}

/// The trail verifies; each call is one binding whose every round was received, consented
/// to as the client's (a state-only round has nothing to consent to) and submitted, and which
/// ended complete, once.
pub fn assert_trail(proxy: &Proxy, expected: &[Expect], server: &str) {
    proxy.verify();
    let events = proxy.events();
    let ids = bindings(&events);
    assert_eq!(
        ids.len(),
        expected.len(),
        "one binding per call: {events:#?}"
    );
    for (id, e) in ids.iter().zip(expected) {
        let of = binding(&events, id);
        let kinds: Vec<&str> = of.iter().map(|e| e["event"].as_str().unwrap()).collect();
        let rounds = e.elicited.len().max(1);
        let mut want = Vec::new();
        for _ in 0..rounds {
            want.push("received");
            if !e.elicited.is_empty() {
                want.push("consented");
            }
            want.push("submitted");
        }
        want.push("terminal");
        assert_eq!(kinds, want, "{}: {of:#?}", e.tool);
        for event in &of {
            assert_eq!(event["name"], e.tool);
            if event["event"] == "consented" {
                assert_eq!(event["consent_method"], "delegated_to_client", "{event}");
            }
        }
        assert_eq!(of.last().unwrap()["outcome"], "complete", "{}", e.tool);
        // The server is the spawned command the trail names, never what it says of itself.
        assert!(
            of[0]["server"].as_str().unwrap().starts_with(server),
            "{}",
            of[0]["server"]
        );
    }
    // The URL's secret and the user's answers are digested, never written.
    let text = std::fs::read_to_string(&proxy.trail).unwrap();
    for secret in ["SECRET-SESSION", "Ada Lovelace"] {
        assert!(!text.contains(secret), "{secret} in the trail");
    }
}
