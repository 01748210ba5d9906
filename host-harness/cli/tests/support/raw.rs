//! Raw JSON-RPC for tests/peers/recording_http_server.py and recording_server.py (a `book`
//! call, its form round answered), and a proxy told to stop as a service manager would.

use super::proxy::{Running, bin, listening, root};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Far beyond any answer or exit on a loaded machine: only a hang runs into it.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// tests/peers/recording_http_server.py, listening: it writes what it receives to
/// `dir/received.jsonl` (and each POST's trace headers to `received.jsonl.headers`), and holds
/// a `hold` retry until `dir/release` exists. Its URL.
pub fn recording_upstream(dir: &Path) -> (Running, String) {
    let mut server = Command::new("python3");
    server
        .arg(root().join("tests/peers/recording_http_server.py"))
        .arg("0")
        .arg(dir.join("received.jsonl"))
        .arg(dir.join("release"));
    listening(server)
}

/// `mrtr-gate proxy` binding calls to `alice` at `acme`, its trail (`dir/audit.jsonl`) keyed
/// with `dir/host-keys.json`; the caller adds the rest.
pub fn gate(dir: &Path) -> Command {
    let mut command = Command::new(bin());
    command
        .args(["proxy", "--user", "alice", "--tenant", "acme"])
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .arg("--host-keys")
        .arg(dir.join("host-keys.json"));
    command
}

/// A 2026-07-28 `tools/call` of `name` under `id`, its one argument `{"n": id}`.
pub fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": {"n": id}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}})
}

/// The retry of `round` (the answer to `request`) under `id`, answering its seat form `12A`.
pub fn retry(request: &Value, round: &Value, id: u64) -> Value {
    retry_with_seat(request, round, id, "12A")
}

/// The same, answering `seat`.
pub fn retry_with_seat(request: &Value, round: &Value, id: u64, seat: &str) -> Value {
    let mut r = request.clone();
    r["id"] = json!(id);
    r["params"]["inputResponses"] =
        json!({"seat": {"action": "accept", "content": {"seat": seat}}});
    if let Some(state) = round["result"].get("requestState") {
        r["params"]["requestState"] = state.clone();
    }
    r
}

/// SIGTERM to `child`.
pub fn terminate(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// How `child` exited, hang-guarded.
pub fn exited(child: &mut Child) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < HANG_GUARD, "the process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}
