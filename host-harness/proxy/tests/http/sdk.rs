//! The official SDKs through the proxy: the Python SDK's server upstream (mcp 2.3.0,
//! `tests/peers/python_sdk/server.py`), a raw client, and the Python SDK's own `Client` in its
//! automatic MRTR mode, unmodified, pointed at the proxy's URL.

use crate::support::*;
use hyper::StatusCode;
use mrtr_gate_proxy::http::HttpOptions;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The venv `./scripts/python --install` makes, with the official `mcp` package.
fn sdk_python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("MRTR_GATE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/python-venv"));
    let python = venv.join("bin/python");
    python.exists().then_some(python)
}

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Python SDK's test server over streamable HTTP on a free port: its URL, and the child
/// (killed when dropped).
async fn sdk_server(python: &Path) -> (String, Child) {
    let server =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/python_sdk/server.py");
    peer(python, &server).await
}

/// The directory of the JavaScript package, whose `node_modules` hold the TypeScript SDK
/// client (`./scripts/node` installs them), if they are installed; and of the TypeScript SDK
/// server's peer, likewise.
fn node_sdks() -> Option<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let client = root.join("host-harness/node");
    let server = root.join("tests/peers/ts_sdk");
    let installed = client
        .join("node_modules/@modelcontextprotocol/client")
        .exists()
        && server
            .join("node_modules/@modelcontextprotocol/server")
            .exists();
    installed.then_some((client, server))
}

/// `program script http 0`: the peer's URL, from the ready line it prints once it listens
/// (tests/peers/python_sdk/http_serving.py), and the child. The line comes after the listen,
/// so no port is picked and freed first and nothing polls (a poll can connect to itself).
async fn peer(program: &Path, script: &Path) -> (String, Child) {
    let mut child = Child(
        std::process::Command::new(program)
            .arg(script)
            .args(["http", "0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok);
        let _ = tx.send(first);
        // Drained, never left to fill the pipe.
        for _ in lines {}
    });
    // A backstop against a hang, never a pace: a loaded machine must not fail the test.
    let line = tokio::time::timeout(GUARD * 10, rx)
        .await
        .expect("the SDK server never said where it listens")
        .unwrap()
        .expect("the SDK server exited before it listened");
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("not a ready line: {line}"))
        .to_owned();
    (url, child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_servers_form_round_is_gated_and_delivered() {
    let Some(python) = sdk_python() else {
        return missing("no SDK venv (run ./scripts/python --install)");
    };
    let (url, _server) = sdk_server(&python).await;
    let p = proxy_with(HttpOptions::new(url)).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight","arguments":{"origin":"LIS","destination":"OPO"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}}}}}"#;
    let a = post(
        &p.url,
        &mcp_headers("tools/call", Some("book_flight")),
        body,
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let text = if a.headers["content-type"] == "text/event-stream" {
        a.events().pop().unwrap()
    } else {
        a.body.clone()
    };
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"], 1, "{text}");
    assert_eq!(v["result"]["resultType"], "input_required", "{text}");
    assert!(
        v["result"]["inputRequests"]["passenger"].is_object(),
        "{text}"
    );
    let received: Vec<Value> = p
        .audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "received")
        .collect();
    assert_eq!(received.len(), 1, "the round is in the trail");
    assert!(p.terminals().is_empty(), "its binding is open");
}

/// The Python SDK's `Client`, automatic mode: its elicitation callback answers each round
/// as a user would, and the SDK sends the retries itself. Calls the tools named in its first
/// argument at the URL in its second; prints what each returned.
const PYTHON_CLIENT: &str = r#"
import asyncio, json, sys
import mcp.types as t
from mcp import Client

async def elicit(ctx, params):
    if getattr(params, "mode", None) == "url":
        return t.ElicitResult(action="accept")
    if params.message.startswith("Question"):
        return t.ElicitResult(action="accept", content={"answer": "a" + params.message[-1]})
    return t.ElicitResult(action="accept", content={"full_name": "Ada Lovelace", "seat": "window"})

async def main(tools, url):
    out = {}
    async with Client(url, elicitation_callback=elicit) as client:
        for tool, args in tools:
            r = await client.call_tool(tool, args)
            out[tool] = {"text": r.content[0].text, "error": bool(r.is_error)}
    print(json.dumps(out))

asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2]))
"#;

/// The TypeScript SDK's `Client` (2.4.0), automatic mode, with an elicitation handler: the
/// SDK sends the retries itself. It speaks 2026-07-28 (pinned: its probe otherwise settles
/// on the 2025 handshake with these servers, which has no rounds). Same arguments and
/// output as the Python client.
const TS_CLIENT: &str = r#"
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
const [tools, url] = [JSON.parse(process.argv.at(-2)), process.argv.at(-1)];
const client = new Client({ name: "proxy-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {}, url: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } });
client.setRequestHandler("elicitation/create", async (request) => {
  const p = request.params;
  if (p.mode === "url") return { action: "accept" };
  if (p.message.startsWith("Question")) return { action: "accept", content: { answer: "a" + p.message.at(-1) } };
  return { action: "accept", content: { full_name: "Ada Lovelace", seat: "window" } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const out = {};
for (const [name, args] of tools) {
  const r = await client.callTool({ name, arguments: args });
  out[name] = { text: r.content[0].text, error: Boolean(r.isError) };
}
console.log(JSON.stringify(out));
await client.close();
"#;

/// The tools both servers have, and the Python server's three-round survey.
fn tools(with_survey: bool) -> Value {
    let mut tools = vec![
        json!(["book_flight", {"origin": "LIS", "destination": "OPO"}]),
        json!(["continue_job", {}]),
        json!(["pay", {"amount": 5}]),
    ];
    if with_survey {
        tools.push(json!(["survey", {}]));
    }
    Value::Array(tools)
}

/// Run `client` (a command line, the tools and the proxy's URL appended) through a proxy in
/// front of `upstream`; check what each tool returned and that the trail holds every round.
async fn through_the_proxy(mut client: tokio::process::Command, upstream: String, survey: bool) {
    let p = proxy_with(HttpOptions::new(upstream)).await;
    let run = client
        .arg(tools(survey).to_string())
        .arg(&p.url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(GUARD * 4, run).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = |tool: &str| got[tool]["text"].as_str().unwrap_or_default().to_owned();
    for tool in ["book_flight", "continue_job", "pay"] {
        assert_eq!(got[tool]["error"], false, "{got}");
    }
    assert!(text("book_flight").starts_with("booked LIS-OPO: "), "{got}");
    assert!(text("book_flight").contains("Ada Lovelace"), "{got}");
    assert_eq!(text("continue_job"), "job done after step-1");
    assert!(text("pay").starts_with("paid 5: "), "{got}");
    let rounds = if survey {
        assert!(text("survey").contains("a3"), "{got}");
        6
    } else {
        3
    };
    // The trail shows every round, each answered by a retry the gate built, and one
    // terminal `complete` per binding.
    let events = p.audit.events();
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(count("received"), rounds, "{events:?}");
    assert_eq!(count("submitted"), rounds, "{events:?}");
    let calls = if survey { 4 } else { 3 };
    let ends: Vec<String> = p
        .wait_terminals(calls)
        .await
        .into_iter()
        .map(|t| t.0)
        .collect();
    assert_eq!(ends, vec!["complete"; calls], "{events:?}");
    assert_eq!(count("rejected"), 0, "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_in_automatic_mode_completes_every_kind_of_round() {
    let Some(python) = sdk_python() else {
        return missing("no SDK venv (run ./scripts/python --install)");
    };
    let client = || {
        let mut c = tokio::process::Command::new(&python);
        c.args(["-c", PYTHON_CLIENT]);
        c
    };
    let (url, _python_server) = sdk_server(&python).await;
    through_the_proxy(client(), url, true).await;
    if let Some((_, ts)) = node_sdks() {
        let (url, _ts_server) = peer(Path::new("node"), &ts.join("server.mjs")).await;
        through_the_proxy(client(), url, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_client_in_automatic_mode_completes_every_kind_of_round() {
    let (Some(python), Some((node_dir, ts))) = (sdk_python(), node_sdks()) else {
        return missing("no SDK venv or node_modules (./scripts/python --install, ./scripts/node)");
    };
    let client = || {
        let mut c = tokio::process::Command::new("node");
        c.args(["--input-type=module", "-e", TS_CLIENT])
            .current_dir(&node_dir);
        c
    };
    let (url, _python_server) = sdk_server(&python).await;
    through_the_proxy(client(), url, true).await;
    let (url, _ts_server) = peer(Path::new("node"), &ts.join("server.mjs")).await;
    through_the_proxy(client(), url, false).await;
}

/// An SDK this test needs is not installed: skipped on a developer's machine, a failure in
/// the test command (`CI` set), which installs them before the Rust tests run.
fn missing(what: &str) {
    assert!(std::env::var_os("CI").is_none(), "{what}");
    eprintln!("skipped: {what}");
}
