//! `mrtr-gate proxy --listen 127.0.0.1:0 --upstream URL` in front of the Python and
//! TypeScript SDK servers over streamable HTTP, the official SDK clients (Python `mcp.Client`,
//! TypeScript `Client` 2.4.0, automatic MRTR mode, an elicitation handler) pointed at the
//! proxy's URL: form, URL, state-only and multi-round tools complete; the trail verifies and
//! shows every round received, consented (delegated to the client) and submitted, bound to the
//! configured upstream.

#![cfg(test)]
#![cfg(unix)]

#[path = "support/sdk_rounds.rs"]
mod sdk_rounds;
#[path = "support/proxy.rs"]
mod support;

use sdk_rounds::{
    Expect, assert_completed, assert_trail, book_flight, calls, continue_job, pay, survey,
};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Proxy, bin, node, python, python_client, root, ts_client};

/// A child killed when the test is done with it, pass or fail.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An SDK server over streamable HTTP on a free loopback port; its `/mcp` URL once it takes
/// connections (the bound is a backstop against a hang, never a pace).
fn http_server(program: &std::path::Path, script: &str) -> (Running, String) {
    let port = free_port();
    let child = Command::new(program)
        .arg(root().join(script))
        .args(["http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the server never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (Running(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// The proxy in front of `upstream`; the URL it says it listens on.
fn proxy_http(proxy: &Proxy, upstream: &str) -> (Running, String) {
    let trail = proxy.trail.display().to_string();
    let keys = proxy.keys.display().to_string();
    let mut child = Command::new(bin())
        .args([
            "proxy",
            "--audit",
            &trail,
            "--host-keys",
            &keys,
            "--user",
            "alice",
        ])
        .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the proxy said where it listens")
            .unwrap();
        if let Some(rest) = line.strip_prefix("mrtr-gate proxy: listening on ") {
            break rest.split(',').next().unwrap().to_owned();
        }
    };
    // The rest of its stderr is drained, never left to fill the pipe.
    std::thread::spawn(move || for _ in lines {});
    (Running(child), url)
}

fn through_http(
    name: &str,
    server: (Running, String),
    client: fn(&serde_json::Value, &[String]) -> support::Report,
    expected: &[Expect],
) {
    let (_server, upstream) = server;
    let proxy = Proxy::new(name);
    let (_proxy, url) = proxy_http(&proxy, &upstream);
    let report = client(&calls(expected), &[url]);
    assert_completed(&report, expected);
    // The trail names the configured upstream (its origin and a digest of the whole URL),
    // never what the server says of itself.
    let origin = upstream.trim_end_matches("/mcp");
    assert_trail(&proxy, expected, &format!("{origin}#sha256:"));
}

fn python_server_http() -> (Running, String) {
    http_server(&python(), "tests/peers/python_sdk/server.py")
}

fn ts_server_http() -> (Running, String) {
    http_server(&node(), "tests/peers/ts_sdk/server.mjs")
}

#[test]
fn the_python_sdk_client_completes_every_kind_of_round_through_the_http_proxy() {
    let expected = [book_flight(), pay(), continue_job(), survey()];
    through_http("http-py-py", python_server_http(), python_client, &expected);
}

#[test]
fn the_typescript_sdk_client_completes_every_kind_of_round_through_the_http_proxy() {
    let expected = [book_flight(), pay(), continue_job()];
    through_http("http-ts-ts", ts_server_http(), ts_client, &expected);
}

#[test]
fn each_sdk_client_completes_the_other_sdks_server_through_the_http_proxy() {
    through_http(
        "http-py-ts",
        ts_server_http(),
        python_client,
        &[book_flight(), pay(), continue_job()],
    );
    through_http(
        "http-ts-py",
        python_server_http(),
        ts_client,
        &[book_flight(), pay(), continue_job(), survey()],
    );
}
