//! Large, deep and odd complete results through the component with the default sandbox
//! limits: the gate reads only their envelope, so they reach the user.

use crate::support;

use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{Policy, Registration, RequestId, ResponseVerdict, ServerIdentity};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::json;

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://server.example/mcp").unwrap()
}

fn register(gate: &mut dyn GateApi, id: i64, params_json: String) -> String {
    gate.register(Registration {
        request_id: RequestId::Number(id),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json,
        policy: Policy::default(),
    })
    .unwrap()
    .request_json
}

fn tool() -> String {
    json!({"name": "t", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}})
    .to_string()
}

fn complete(id: i64, content: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","content":{content}}}}}"#
    )
}

#[test]
fn sixteen_mib_deep_and_many_valued_results_pass_the_component_with_default_limits() {
    let rt = support::runtime();
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(rt, hosts.services());
    let big = format!(r#"[{{"type":"text","text":"{}"}}]"#, "a".repeat(16 << 20));
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let many = format!("[{}]", vec!["1"; 200_000].join(","));
    let odd = r#"[{"type":"text","text":"cut \ud83d","text":"twice"}]"#;
    for (i, content) in [big.as_str(), &deep, &many, odd].into_iter().enumerate() {
        let id = i as i64 + 1;
        register(&mut gate, id, tool());
        let verdict = gate.accept_response(&server(), &complete(id, content));
        assert!(
            matches!(verdict, Ok(ResponseVerdict::Complete)),
            "{id}: {verdict:?}"
        );
    }
    register(&mut gate, 9, tool());
    let error = format!(
        r#"{{"jsonrpc":"2.0","id":9,"error":{{"code":-32000,"message":"x","data":"{}"}}}}"#,
        "b".repeat(16 << 20)
    );
    assert!(matches!(
        gate.accept_response(&server(), &error),
        Ok(ResponseVerdict::Error(-32000))
    ));
}

#[test]
fn a_big_integer_argument_reaches_the_component_retry_exactly() {
    let rt = support::runtime();
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(rt, hosts.services());
    let params = r#"{"name":"t","arguments":{"n":9007199254740993,"f":0.10000000000000001},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}"#;
    let sent = register(&mut gate, 1, params.into());
    assert!(
        sent.contains(r#""arguments":{"f":0.10000000000000001,"n":9007199254740993}"#),
        "{sent}"
    );
}
