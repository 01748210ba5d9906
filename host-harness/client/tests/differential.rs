//! The HTTP transport against the repo's differential server
//! (`tests/peers/python_sdk/differential_server.py`): answers different readers read
//! differently, a harmless result where one looks and `REAL-UNJUDGED` where another looks.
//! The transport reads the events as the proxy does (`mrtr_gate_host::wire::sse`): JSON in a
//! typed event and a response under another id are refused; a batch, on a stream or as the
//! body, goes to the gate, which refuses it; a second response is never read. What the gate
//! accepts is never `REAL-UNJUDGED`.

#![cfg(test)]

use mrtr_gate_client::HttpTransport;
use mrtr_gate_client::transport::{Outgoing, Patient, Transport};
use mrtr_gate_host::core::{Policy, Registration, RequestId, ResponseVerdict, ServerIdentity};
use mrtr_gate_host::reference_hosts::{DecidedConsent, MemoryAudit, MemoryStorage, SystemClock};
use mrtr_gate_host::{GateApi, HostServices, NativeGate};
use mrtr_gate_peers::Peer;
use std::sync::Arc;

fn gate() -> NativeGate {
    let clock = Arc::new(SystemClock);
    NativeGate::new(HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent: Arc::new(DecidedConsent::new()),
        audit: Arc::new(MemoryAudit::new()),
    })
}

/// What the transport hands on for the call `name`, and what the gate makes of it: the
/// transport's code, or the gate's verdict (`Ok(the complete result the gate judged)` /
/// `Err(denial code)`).
fn call(
    url: &str,
    gate: &mut NativeGate,
    id: i64,
    name: &str,
) -> Result<Result<String, String>, String> {
    let server = ServerIdentity::origin(url).unwrap();
    let params = format!(
        r#"{{"name":"{name}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}"#
    );
    gate.register(Registration {
        request_id: RequestId::Number(id),
        server: server.clone(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: params.clone(),
        policy: Policy::default(),
    })
    .unwrap();
    let json = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#);
    let rid = RequestId::Number(id);
    let mut t = HttpTransport::connect(url).unwrap();
    let text = t
        .request(
            Outgoing {
                id: &rid,
                method: "tools/call",
                name: Some(name),
                protocol_version: "2026-07-28",
                json: &json,
            },
            &mut Patient,
        )
        .map_err(|e| e.code.as_str().to_owned())?;
    Ok(match gate.accept_response(&server, &text) {
        Ok(ResponseVerdict::Complete) => Ok(text),
        Ok(other) => Err(format!("not a final answer: {other:?}")),
        Err(denial) => Err(denial.code.as_str().to_owned()),
    })
}

#[test]
fn every_differential_answer_is_refused_or_judged_and_the_unjudged_one_is_never_accepted() {
    let server = Peer::differential();
    let mut gate = gate();
    let mut id = 0;
    for (case, transport_code) in [
        ("typed", "invalid_message"),
        ("other_id", "invalid_message"),
    ] {
        id += 1;
        let name = format!("first:{case}");
        assert_eq!(
            call(&server.url, &mut gate, id, &name),
            Err(transport_code.into()),
            "{name}"
        );
    }
    // Handed to the gate as received, which refuses them: not one JSON-RPC response to this
    // request.
    for case in ["batch", "batch_body", "other_id_body"] {
        id += 1;
        let name = format!("first:{case}");
        match call(&server.url, &mut gate, id, &name) {
            Ok(Err(_denied)) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    // The first response ends the stream: the second is never read.
    for case in ["second", "clean"] {
        id += 1;
        let name = format!("first:{case}");
        let result = call(&server.url, &mut gate, id, &name).unwrap().unwrap();
        assert!(result.contains("harmless"), "{name}: {result}");
        assert!(!result.contains("REAL-UNJUDGED"), "{name}: {result}");
    }
}
