//! `DecidedConsent::decide_for` (issue 27): a host records the user's decision for the verdict
//! it got and the answers it will send in one call, the package digesting the answers as the
//! gate does; the digests of `tests/canonical/responses_vectors.json`, which the Python and
//! Node packages are held to as well, are the gate's own.

use crate::support;
use mrtr_gate_host::core::host::ConsentMethod;
use mrtr_gate_host::core::{
    AcceptedRound, Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
    canonical_responses, digest,
};
use mrtr_gate_host::reference_hosts::{DecidedConsent, ManualClock, MemoryAudit, MemoryStorage};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::{Value, json};
use std::sync::Arc;

const USER: &str = "u1.decided";
const TENANT: &str = "t1.decided";

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://decided.example.com/mcp").unwrap()
}

/// A gate over `consent`, with request 1 registered and its form round accepted.
fn gate_with_a_round(consent: Arc<DecidedConsent>) -> (ComponentGate, AcceptedRound, MemoryAudit) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let audit = MemoryAudit::new();
    let mut g = ComponentGate::new(
        support::runtime(),
        HostServices {
            clock: clock.clone(),
            storage: Arc::new(MemoryStorage::new(clock)),
            consent,
            audit: Arc::new(audit.clone()),
        },
    );
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    g.register(Registration {
        request_id: RequestId::Number(1),
        server: server(),
        user: USER.into(),
        tenant: TENANT.into(),
        method: "tools/call".into(),
        params_json: json!({"name": "t", "arguments": {}, "_meta": meta}).to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "inputRequests": {"who": {"method": "elicitation/create", "params": {"message": "Name?",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string"}, "age": {"type": "integer"}}}}}}}});
    let Ok(ResponseVerdict::InputRequired(accepted)) =
        g.accept_response(&server(), &round.to_string())
    else {
        panic!("the round is accepted");
    };
    (g, accepted, audit)
}

fn retry(g: &mut ComponentGate, answers: &str) -> Result<String, String> {
    g.build_retry(RetryRequest {
        server: server(),
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(2),
        user: USER.into(),
        tenant: TENANT.into(),
        responses_json: answers.into(),
    })
    .map(|r| r.request_json)
    .map_err(|d| d.code.as_str().to_owned())
}

#[test]
fn a_decision_recorded_for_the_verdict_and_the_answers_is_the_consent_the_gate_finds() {
    let consent = Arc::new(DecidedConsent::new());
    let (mut g, round, audit) = gate_with_a_round(Arc::clone(&consent));
    // The same answers in another key order and spacing: the same canonical text.
    let decided = r#"{"who": {"content": {"name": "Ada", "age": 36}, "action": "accept"}}"#;
    let sent = r#"{"who":{"action":"accept","content":{"age":36,"name":"Ada"}}}"#;
    let receipt = consent
        .decide_for(&round, decided, true, ConsentMethod::UserAtScreen)
        .unwrap();
    let request: Value = serde_json::from_str(&retry(&mut g, sent).unwrap()).unwrap();
    assert_eq!(
        request["params"]["inputResponses"]["who"]["content"]["name"],
        "Ada"
    );
    let consented: Vec<Value> = audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "consented")
        .collect();
    assert_eq!(consented.len(), 1);
    assert_eq!(consented[0]["consent_receipt_id"], receipt.as_str());
    assert_eq!(consented[0]["consent_method"], "user_at_screen");
}

#[test]
fn other_answers_than_decided_or_no_decision_at_all_are_no_consent() {
    let consent = Arc::new(DecidedConsent::new());
    let (mut g, round, _) = gate_with_a_round(Arc::clone(&consent));
    consent
        .decide_for(
            &round,
            r#"{"who":{"action":"accept","content":{"name":"Ada"}}}"#,
            true,
            ConsentMethod::UserAtScreen,
        )
        .unwrap();
    assert_eq!(
        retry(
            &mut g,
            r#"{"who":{"action":"accept","content":{"name":"Eve"}}}"#
        ),
        Err("consent_unavailable".into())
    );
    // Refused: the decision is found and says no.
    consent
        .decide_for(
            &round,
            r#"{"who":{"action":"decline"}}"#,
            false,
            ConsentMethod::UserAtScreen,
        )
        .unwrap();
    assert_eq!(
        retry(&mut g, r#"{"who":{"action":"decline"}}"#),
        Err("consent_refused".into())
    );
    // A decision is used once.
    assert_eq!(
        retry(&mut g, r#"{"who":{"action":"decline"}}"#),
        Err("consent_unavailable".into())
    );
}

#[test]
fn answers_the_gate_would_refuse_are_refused_when_the_decision_is_recorded() {
    let consent = DecidedConsent::new();
    let (_, round, _) = gate_with_a_round(Arc::new(DecidedConsent::new()));
    for bad in ["[]", "{\"a\":1,\"a\":2}", "{", "\"text\""] {
        let got = consent.decide_for(&round, bad, true, ConsentMethod::UserAtScreen);
        assert_eq!(
            got.map_err(|e| e.code()),
            Err("invalid_input_response"),
            "{bad}"
        );
    }
}

/// The vectors every package's digest is held to: answers text, its canonical text and the
/// SHA-256 of that, made by the gate's own function (re-made with `MRTR_GATE_BLESS=1`).
#[test]
fn the_answer_digest_vectors_are_the_gates_own() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/canonical/responses_vectors.json");
    let inputs = [
        r#"{"b":{"action":"accept","content":{"z":1,"a":"x"}},"a":{"action":"decline"}}"#,
        r#"{"k":{"action":"accept","content":{"n":1e21,"m":1e-7,"o":-0,"p":0.1,"q":100.0,"r":9007199254740993}}}"#,
        r#"{"k":{"action":"accept","content":{"s":"\u0000\u001f\"\\/\b\f\n\r\t\u007f\u2028é😀"}}}"#,
        r#"{"\ue000":{"action":"cancel"},"😀":{"action":"cancel"},"a":{"action":"cancel"}}"#,
        r#"{"k":{"action":"accept","content":{"list":[true,false,null,[],{}],"deep":{"b":[1,2],"a":{}}}}}"#,
        r#"{}"#,
    ];
    let made: Vec<Value> = inputs
        .iter()
        .map(|text| {
            let canonical = canonical_responses(text).unwrap();
            json!({"responses_json": text, "canonical": canonical,
                "sha256": digest::sha256_hex(canonical.as_bytes())})
        })
        .collect();
    let made = serde_json::to_string_pretty(&made).unwrap() + "\n";
    if std::env::var_os("MRTR_GATE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &made).unwrap();
    }
    // Compared as JSON: the order serde_json keeps an object's keys in is a build feature
    // (`preserve_order`), not the vectors'.
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let made: Value = serde_json::from_str(&made).unwrap();
    assert_eq!(
        recorded, made,
        "re-record with MRTR_GATE_BLESS=1 if the change is deliberate"
    );
}
