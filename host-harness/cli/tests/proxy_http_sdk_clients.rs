//! `mrtr-gate proxy --listen 127.0.0.1:0 --upstream URL` in front of the Python and
//! TypeScript SDK servers over streamable HTTP, the official SDK clients (Python `mcp.Client`,
//! TypeScript `Client` 2.4.0, automatic MRTR mode, an elicitation handler) pointed at the
//! proxy's URL: form, URL, state-only and multi-round tools complete; the trail verifies and
//! shows every round received, consented (delegated to the client) and submitted, bound to the
//! configured upstream.

#![cfg(test)]
#![cfg(unix)]

mod support;
use support::sdk_rounds;

use sdk_rounds::{
    Expect, assert_completed, assert_trail, book_flight, calls, continue_job, pay, survey,
};
use support::{Proxy, Running, python_client, python_server_http, ts_client, ts_server_http};

fn through_http(
    name: &str,
    server: (Running, String),
    client: fn(&serde_json::Value, &[String]) -> support::Report,
    expected: &[Expect],
) {
    let (_server, upstream) = server;
    let proxy = Proxy::new(name);
    let (_proxy, url) = proxy.http(&upstream);
    let report = client(&calls(expected), &[url]);
    assert_completed(&report, expected);
    // The trail names the configured upstream (its origin and a digest of the whole URL),
    // never what the server says of itself.
    let origin = upstream.trim_end_matches("/mcp");
    assert_trail(&proxy, expected, &format!("{origin}#sha256:"));
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
