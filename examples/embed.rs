//! How an MCP client embeds mrtr-gate: every `tools/call` / `prompts/get` /
//! `resources/read` is registered before it is sent, every response goes through the gate,
//! and a retry is only ever the text the gate built.
//!
//! Run: `cargo run --example embed` (add `-- --ask` to answer the consent prompt yourself).

use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::{
    FileAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent, SystemClock, TerminalConsent,
};
use mrtr_gate_host::services::SharedConsent;
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::json;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. Once per process: load the component (precompiled artifact cached on disk).
    let runtime = GateRuntime::embedded()?;

    // 2. The host services. A real client brings its own storage (shared between its
    //    processes), its own consent dialog and its own audit sink.
    let clock = Arc::new(SystemClock);
    let consent: SharedConsent = if std::env::args().any(|a| a == "--ask") {
        Arc::new(TerminalConsent::default())
    } else {
        // Stands in for the user clicking "Send" in the client's dialog.
        Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant))
    };
    let audit_path =
        std::env::temp_dir().join(format!("mrtr-gate-example-{}.jsonl", std::process::id()));
    let services = HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent,
        audit: Arc::new(FileAudit::open(&audit_path)?),
    };
    let mut gate = ComponentGate::new(&runtime, services);

    // 3. Before sending a tool call: bind it to the verified server, user and tenant.
    let server = ServerIdentity::origin("https://weather.example.com/mcp")?;
    let params = json!({
        "name": "get_forecast",
        "arguments": {"city": "Oslo"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
        }
    });
    let registered = gate.register(Registration {
        request_id: RequestId::Number(41),
        server: server.clone(),
        user: "alice@example.com".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: params.to_string(),
        policy: Policy {
            policy_version: "example-2026-12".into(),
            ..Policy::default()
        },
    })?;
    println!("send:    {}", registered.request_json);

    // 4. The server answers input_required (here: a canned response text).
    let response = r#"{"jsonrpc":"2.0","id":41,"result":{"resultType":"input_required",
        "inputRequests":{"units":{"method":"elicitation/create","params":{"message":"Which units?",
        "requestedSchema":{"type":"object","properties":{"units":{"type":"string","enum":["metric","imperial"]}},"required":["units"]}}}},
        "requestState":"opaque-server-state"}}"#;
    let ResponseVerdict::InputRequired(view) = gate.accept_response(&server, response)? else {
        return Err("expected an input_required round".into());
    };
    // 5. Show the consent view (verified server, tool, fields, effect) and collect answers.
    println!(
        "{}",
        mrtr_gate_host::consent_screen::render_view_text(&view.view_json).0
    );

    // 6. Build the retry: the gate checks the answers, asks the consent import for a receipt
    //    bound to this view and these answers, consumes the round once, and audits it.
    let retry = gate.build_retry(RetryRequest {
        server: server.clone(),
        request_id: RequestId::Number(41),
        retry_id: RequestId::Number(42),
        user: "alice@example.com".into(),
        tenant: "acme".into(),
        responses_json: json!({"units": {"action": "accept", "content": {"units": "metric"}}})
            .to_string(),
    })?;
    println!("send:    {}", retry.request_json);

    // 7. The final result ends the binding.
    let done = r#"{"jsonrpc":"2.0","id":42,"result":{"resultType":"complete","content":[{"type":"text","text":"4°C"}]}}"#;
    println!("verdict: {:?}", gate.accept_response(&server, done)?);
    println!("audit:   {}", audit_path.display());
    Ok(())
}
