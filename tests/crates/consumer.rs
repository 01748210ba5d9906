//! The main of the temporary crate `scripts/crates --check` builds outside the work tree
//! against the extracted `.crate` files (as a host author's project would depend on them):
//! a whole form round, a refused retry, and the trail verified. Fails (exit 1) on anything
//! else. With `MRTR_GATE_EXPECTED_SHA256` set, the embedded component must have that digest.

use mrtr_gate_host::core::audit::verify_chain;
use mrtr_gate_host::core::host::ConsentMethod;
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::{DecidedConsent, ManualClock, MemoryAudit, MemoryStorage};
use mrtr_gate_wasmtime::runtime::{EMBEDDED_COMPONENT, EMBEDDED_COMPONENT_SHA256};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime, SandboxLimits};
use std::error::Error;
use std::sync::Arc;

const URL: &str = "https://tickets.example.com/mcp";
const PARAMS: &str = r#"{"name":"book","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}"#;

fn form_round(id: i64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"who":{{"method":"elicitation/create","params":{{"message":"Name?","requestedSchema":{{"type":"object","properties":{{"name":{{"type":"string"}}}},"required":["name"]}}}}}}}}}}}}"#
    )
}

fn main() -> Result<(), Box<dyn Error>> {
    let runtime = match std::env::var("MRTR_GATE_EXPECTED_SHA256") {
        Ok(pinned) => {
            GateRuntime::load_pinned(EMBEDDED_COMPONENT, &pinned, None, SandboxLimits::default())?
        }
        Err(_) => GateRuntime::load_embedded(None, SandboxLimits::default())?,
    };
    println!("component sha256: {EMBEDDED_COMPONENT_SHA256}");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let consent = Arc::new(DecidedConsent::new());
    let audit = MemoryAudit::new();
    let mut gate = ComponentGate::new(
        &runtime,
        HostServices {
            clock: clock.clone(),
            storage: Arc::new(MemoryStorage::new(clock)),
            consent: consent.clone(),
            audit: Arc::new(audit.clone()),
        },
    );
    let server = ServerIdentity::origin(URL)?;
    let register = |gate: &mut ComponentGate, id: i64| {
        gate.register(Registration {
            request_id: RequestId::Number(id),
            server: server.clone(),
            user: "alice".into(),
            tenant: "acme".into(),
            method: "tools/call".into(),
            params_json: PARAMS.into(),
            policy: Policy::default(),
        })
    };
    let retry = |gate: &mut ComponentGate, id: i64, retry_id: i64, answers: &str| {
        gate.build_retry(RetryRequest {
            server: server.clone(),
            request_id: RequestId::Number(id),
            retry_id: RequestId::Number(retry_id),
            user: "alice".into(),
            tenant: "acme".into(),
            responses_json: answers.into(),
        })
    };

    // A whole form round: the user's answers, granted, and the server's final answer.
    register(&mut gate, 1)?;
    let ResponseVerdict::InputRequired(round) = gate.accept_response(&server, &form_round(1))?
    else {
        return Err("the form round was not input_required".into());
    };
    let answers = r#"{"who":{"action":"accept","content":{"name":"Ada"}}}"#;
    consent.decide_for(&round, answers, true, ConsentMethod::UserAtScreen)?;
    let sent = retry(&mut gate, 1, 2, answers)?;
    if !sent.request_json.contains(r#""name":"Ada""#) {
        return Err(format!(
            "the retry does not carry the answers: {}",
            sent.request_json
        )
        .into());
    }
    let done = r#"{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[{"type":"text","text":"booked"}]}}"#;
    if gate.accept_response(&server, done)? != ResponseVerdict::Complete {
        return Err("the final answer was not complete".into());
    }

    // A refused retry: the user said no, so no retry is built.
    register(&mut gate, 3)?;
    let ResponseVerdict::InputRequired(round) = gate.accept_response(&server, &form_round(3))?
    else {
        return Err("the second form round was not input_required".into());
    };
    let declined = r#"{"who":{"action":"decline"}}"#;
    consent.decide_for(&round, declined, false, ConsentMethod::UserAtScreen)?;
    match retry(&mut gate, 3, 4, declined) {
        Err(denial) if denial.code.as_str() == "consent_refused" => {}
        other => return Err(format!("a refused retry was not consent_refused: {other:?}").into()),
    }

    // The trail: an unbroken chain, with the grant and the refusal in it.
    let entries = audit.entries();
    let count = verify_chain(entries.iter().map(|e| e.line.as_str()))
        .map_err(|b| format!("the trail's chain is broken: {b:?}"))?;
    let events: Vec<String> = audit
        .events()
        .iter()
        .map(|e| {
            let (event, outcome) = (&e["event"], &e["outcome"]);
            match e["reason"].as_str() {
                Some(reason) => format!(
                    "{}/{}({reason})",
                    event.as_str().unwrap_or("?"),
                    outcome.as_str().unwrap_or("?")
                ),
                None => format!(
                    "{}/{}",
                    event.as_str().unwrap_or("?"),
                    outcome.as_str().unwrap_or("?")
                ),
            }
        })
        .collect();
    println!("trail ({count} events): {}", events.join(" "));
    for expected in [
        "consented/granted",
        "submitted/accepted",
        "terminal/complete",
        "rejected/denied(consent_refused)",
    ] {
        if !events.iter().any(|e| e == expected) {
            return Err(format!("no `{expected}` event in the trail").into());
        }
    }
    Ok(())
}
