//! An MCP client with the gate in its round loop, as a library: call a tool on a real server
//! (stdio or streamable HTTP); every round is checked, shown at the terminal, answered there
//! and consented to before the gate builds the retry.
//!
//! Run: `cargo run --example client -- --http http://127.0.0.1:8000/mcp book_flight '{"origin":"OSL"}'`
//! (or `--stdio "python3 server.py"` instead of `--http URL`).

use mrtr_gate_client::{
    Client, ClientConfig, HttpTransport, StdioTransport, Terminal, TerminalForm, Transport,
};
use mrtr_gate_host::HostServices;
use mrtr_gate_host::reference_hosts::{FileAudit, MemoryStorage, SystemClock};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, server, tool, arguments] = args.as_slice() else {
        return Err("usage: client --http URL|--stdio COMMAND TOOL JSON-ARGS".into());
    };
    let transport: Box<dyn Transport> = match kind.as_str() {
        "--http" => Box::new(HttpTransport::connect(server)?),
        _ => Box::new(StdioTransport::spawn(server)?),
    };
    let terminal = Terminal::stdio();
    let clock = Arc::new(SystemClock);
    let services = HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent: Arc::new(terminal.consent()),
        audit: Arc::new(FileAudit::open("client-audit.jsonl")?),
    };
    let gate = ComponentGate::new(&GateRuntime::embedded()?, services);
    let answers = Box::new(TerminalForm::new(terminal));
    let mut client = Client::new(gate, transport, ClientConfig::new("alice", "acme"), answers);
    let params = serde_json::json!({"name": tool, "arguments": serde_json::from_str::<serde_json::Value>(arguments)?});
    let done = client.call("tools/call", params)?;
    println!("{} (after {} rounds)", done.result, done.rounds);
    Ok(())
}
