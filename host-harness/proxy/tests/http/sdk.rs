//! The official SDKs' peers through the proxy.

use crate::support::*;
use hyper::StatusCode;
use mrtr_gate_proxy::http::HttpOptions;
use serde_json::Value;
use std::time::Duration;
use tokio::net::TcpStream;

/// The venv `./scripts/python --install` makes, with the official `mcp` package.
fn sdk_python() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("MRTR_GATE_VENV")
        .map(std::path::PathBuf::from)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_servers_form_round_is_gated_and_delivered() {
    let Some(python) = sdk_python() else {
        eprintln!("skipped: no SDK venv (run ./scripts/python --install)");
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/python_sdk/server.py");
    let _child = Child(
        std::process::Command::new(python)
            .arg(server)
            .args(["http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = std::time::Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(start.elapsed() < GUARD, "the SDK server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let p = proxy_with(HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"))).await;
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
