//! `mrtr-gate conformance URL`: the client side of the official conformance suite
//! (`@modelcontextprotocol/conformance`). The runner starts a scenario's server, sets
//! `MCP_CONFORMANCE_SCENARIO` and appends the server URL; this runs what the scenario
//! expects a client to do, through the same gated client as `mrtr-gate call`.

use mrtr_gate_client::{Client, ClientError, Turn};
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::{Value, json};

/// The scenarios this client knows.
pub const SCENARIOS: [&str; 4] = [
    "sep-2322-client-request-state",
    "tools_call",
    "request-metadata",
    "http-standard-headers",
];

fn names(list: &Value, member: &str, key: &str) -> Vec<String> {
    list.get(member)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get(key).and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Run `scenario` against the connected `client`.
pub fn run(scenario: &str, client: &mut Client<ComponentGate>) -> Result<(), ClientError> {
    match scenario {
        "sep-2322-client-request-state" => mrtr(client),
        "tools_call" => {
            client.discover()?;
            let tools = client.request("tools/list", json!({}))?;
            if let Some(tool) = names(&tools, "tools", "name").first() {
                client.call(
                    "tools/call",
                    json!({"name": tool, "arguments": {"a": 2, "b": 3}}),
                )?;
            }
            Ok(())
        }
        "request-metadata" => {
            // The scenario refuses the first request's version; `discover` negotiates.
            client.discover()?;
            client.request("tools/list", json!({}))?;
            Ok(())
        }
        "http-standard-headers" => {
            client.discover()?;
            let tools = client.request("tools/list", json!({}))?;
            for tool in names(&tools, "tools", "name") {
                client.call("tools/call", json!({"name": tool, "arguments": {}}))?;
            }
            let resources = client.request("resources/list", json!({}))?;
            for uri in names(&resources, "resources", "uri") {
                client.call("resources/read", json!({"uri": uri}))?;
            }
            let prompts = client.request("prompts/list", json!({}))?;
            for prompt in names(&prompts, "prompts", "name") {
                client.call("prompts/get", json!({"name": prompt, "arguments": {}}))?;
            }
            Ok(())
        }
        other => Err(ClientError::Usage(format!(
            "no handler for scenario `{other}` (known: {})",
            SCENARIOS.join(", ")
        ))),
    }
}

/// SEP-2322: a round answered only after an unrelated call went out in between; a round
/// without state; a result without `resultType`, which must not be retried.
fn mrtr(client: &mut Client<ComponentGate>) -> Result<(), ClientError> {
    client.discover()?;
    client.request("tools/list", json!({}))?;
    let mut echo = client.start(
        "tools/call",
        json!({"name": "test_mrtr_echo_state", "arguments": {}}),
    )?;
    match client.exchange(&mut echo)? {
        Turn::InputRequired(view) => {
            // An unrelated call while the round is open: the gate built neither its request
            // nor anything of the open round into it.
            client.call(
                "tools/call",
                json!({"name": "test_mrtr_unrelated", "arguments": {}}),
            )?;
            client.answer(&mut echo, &view)?;
            loop {
                match client.exchange(&mut echo)? {
                    Turn::Complete(_) => break,
                    Turn::InputRequired(view) => client.answer(&mut echo, &view)?,
                }
            }
        }
        Turn::Complete(_) => {}
    }
    client.call(
        "tools/call",
        json!({"name": "test_mrtr_no_state", "arguments": {}}),
    )?;
    client.call(
        "tools/call",
        json!({"name": "test_mrtr_no_result_type", "arguments": {}}),
    )?;
    Ok(())
}
