//! Runs N full form rounds through the native core over the in-memory hosts: a target for
//! profilers (`valgrind --tool=callgrind`, `perf record`). `cargo run --release -p
//! mrtr-gate-core --features memory-hosts --example round_loop -- 2000`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use mrtr_gate_core::host::Services;
use mrtr_gate_core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{Gate, Policy, Registration, RequestId, RetryRequest, ServerIdentity};
use serde_json::json;
use std::sync::Arc;

fn main() {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut gate = Gate::new(Services {
        clock: clock.clone(),
        storage: MemoryStorage::new(clock),
        consent: ScriptedConsent::new(ScriptedAnswer::Grant),
        audit: MemoryAudit::windowed(1024),
    });
    let server = ServerIdentity::origin("https://flights.example.com/mcp").unwrap();
    let params =
        json!({"name": "book_flight", "arguments": {"from": "OSL", "to": "SFO"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}})
        .to_string();
    let schema = json!({"type": "object", "properties": {
        "full_name": {"type": "string", "minLength": 1, "maxLength": 100},
        "seat": {"type": "string", "enum": ["aisle", "window"]},
        "bags": {"type": "integer", "minimum": 0, "maximum": 3}},
        "required": ["full_name", "seat"]});
    let answers = json!({"passenger": {"action": "accept",
        "content": {"full_name": "Alice Example", "seat": "aisle", "bags": 1}}})
    .to_string();
    let started = std::time::Instant::now();
    for i in 0..n {
        let id = i * 2;
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
        let response =
            json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
            "inputRequests": {"passenger": {"method": "elicitation/create",
                "params": {"message": "Who is flying?", "requestedSchema": schema}}},
            "requestState": "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw"}})
            .to_string();
        gate.accept_response(&server, &response).unwrap();
        gate.build_retry(RetryRequest {
            request_id: RequestId::Number(id),
            retry_id: RequestId::Number(id + 1),
            user: "alice".into(),
            tenant: "acme".into(),
            responses_json: answers.clone(),
        })
        .unwrap();
        let done = json!({"jsonrpc": "2.0", "id": id + 1, "result": {"resultType": "complete"}})
            .to_string();
        gate.accept_response(&server, &done).unwrap();
    }
    let per = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{n} rounds, {per:.1} us per round (mean)");
}
