//! The stdio transport against servers that misbehave on their pipe: a line that is not
//! UTF-8, requests of the server's own before the response (answered, not followed), lines
//! for other ids, and a server that exits. Each is the response, or a typed transport
//! failure, never a hang. The servers are small Python scripts (python3 is on every machine
//! the test command runs on).

#![cfg(test)]

use mrtr_gate_client::StdioTransport;
use mrtr_gate_client::transport::{Outgoing, Patient, Transport};
use mrtr_gate_host::core::RequestId;

fn send(script: &str) -> Result<String, String> {
    let argv = vec!["python3".to_owned(), "-c".to_owned(), script.to_owned()];
    let mut t = StdioTransport::spawn_argv(&argv).map_err(|e| e.code.as_str().to_owned())?;
    let id = RequestId::Number(7);
    t.request(
        Outgoing {
            id: &id,
            method: "tools/call",
            name: None,
            protocol_version: "2026-07-28",
            json: r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#,
        },
        &mut Patient,
    )
    .map_err(|e| e.code.as_str().to_owned())
}

#[test]
fn a_line_that_is_not_utf8_fails_the_transport() {
    let script = "import sys; sys.stdin.readline(); sys.stdout.buffer.write(b'\\xff\\xfe\\n'); sys.stdout.flush()";
    assert_eq!(send(script), Err("invalid_utf8".into()));
}

#[test]
fn other_ids_and_the_servers_own_requests_come_before_the_response() {
    let script = r#"
import sys, json
sys.stdin.readline()
print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))
print(json.dumps({"jsonrpc": "2.0", "id": 6, "result": {}}))
print(json.dumps({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create", "params": {}}), flush=True)
answer = json.loads(sys.stdin.readline())
assert answer["id"] == "srv-1" and answer["error"]["code"] == -32601, answer
print('{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete"}}', flush=True)
"#;
    assert_eq!(
        send(script),
        Ok(r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete"}}"#.into())
    );
}

#[test]
fn a_server_that_exits_is_server_closed() {
    assert_eq!(
        send("import sys; sys.stdin.readline()"),
        Err("server_closed".into())
    );
}

#[test]
fn a_broken_line_goes_to_the_gate_which_names_the_fault() {
    let script = "import sys; sys.stdin.readline(); print('{\"id\":7,\"id\":8}', flush=True)";
    assert_eq!(send(script), Ok("{\"id\":7,\"id\":8}".into()));
}
