//! The HTTP transport against servers that answer badly, served raw from a socket: a redirect
//! (never followed: it would post the user's answers elsewhere), a page that is not JSON-RPC,
//! a 202 to a request, an event stream that ends without the response, events for other ids
//! before ours, a 404 on a session, a body over the cap, and a server that never answers
//! (cancelled). Each is a typed transport failure or the right message, never a hang.

#![cfg(test)]

use mrtr_gate_client::HttpTransport;
use mrtr_gate_client::transport::{Outgoing, Patient, Transport, Waiting};
use mrtr_gate_host::core::RequestId;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// A server that answers every request with `reply` (the whole HTTP response, raw).
fn serve(reply: impl Fn() -> Vec<u8> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream.write_all(&reply());
        }
    });
    url
}

fn http(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn send(url: &str, waiting: &mut dyn Waiting) -> Result<String, String> {
    let mut t = HttpTransport::connect(url).unwrap();
    let id = RequestId::Number(7);
    t.request(
        Outgoing {
            id: &id,
            method: "tools/call",
            name: Some("t"),
            protocol_version: "2026-07-28",
            json: r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#,
        },
        waiting,
    )
    .map_err(|e| e.code.as_str().to_owned())
}

#[test]
fn a_redirect_is_never_followed() {
    let url = serve(|| {
        http(
            "307 Temporary Redirect",
            "location: http://127.0.0.1:1/elsewhere\r\n",
            b"",
        )
    });
    assert_eq!(send(&url, &mut Patient), Err("http_status".into()));
}

#[test]
fn a_page_that_is_not_json_rpc_is_a_transport_failure() {
    let url = serve(|| {
        http(
            "500 Internal Server Error",
            "content-type: text/html\r\n",
            b"<h1>oops</h1>",
        )
    });
    assert_eq!(send(&url, &mut Patient), Err("http_status".into()));
}

#[test]
fn a_json_body_at_any_status_goes_to_the_gate_as_received() {
    let body = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32022,"message":"no","data":{"supported":["x"]}},"id":8}"#;
    let url = serve(move || {
        http(
            "400 Bad Request",
            "content-type: application/json\r\n",
            body,
        )
    });
    assert_eq!(
        send(&url, &mut Patient),
        Ok(String::from_utf8_lossy(body).into_owned()),
        "byte for byte, duplicate key and all"
    );
}

#[test]
fn a_request_answered_202_has_no_response() {
    let url = serve(|| http("202 Accepted", "", b""));
    assert_eq!(send(&url, &mut Patient), Err("no_response".into()));
}

#[test]
fn an_event_stream_is_read_to_the_event_with_our_id() {
    // A priming event, a notification, a heartbeat of another type, then ours across lines.
    let stream = b"id: 1\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: heartbeat\ndata: ping\n\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":7,\"result\":{}}\r\n\r\n";
    let url = serve(move || http("200 OK", "content-type: text/event-stream\r\n", stream));
    assert_eq!(
        send(&url, &mut Patient),
        Ok("{\"jsonrpc\":\"2.0\",\n\"id\":7,\"result\":{}}".into())
    );
    // As the proxy reads a stream: a response under another id before ours, or JSON in an
    // event that is not a message, is refused (one reader would take it, another would not).
    for stream in [
        &b"data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"[..],
        &b"event: mrtr\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"[..],
    ] {
        let url = serve(move || http("200 OK", "content-type: text/event-stream\r\n", stream));
        assert_eq!(send(&url, &mut Patient), Err("invalid_message".into()));
    }
    let ended = serve(|| {
        http(
            "200 OK",
            "content-type: text/event-stream\r\n",
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n",
        )
    });
    assert_eq!(send(&ended, &mut Patient), Err("no_response".into()));
}

#[test]
fn a_body_over_the_cap_is_refused_not_buffered() {
    let url = serve(|| {
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 70000000\r\nconnection: close\r\n\r\n".to_vec();
        out.extend(std::iter::repeat_n(b' ', 70_000_000));
        out
    });
    assert_eq!(send(&url, &mut Patient), Err("transport_failed".into()));
}

#[test]
fn a_server_that_never_answers_is_cancelled_by_the_waiter() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(30));
        drop(held);
    });
    struct GiveUp(u32);
    impl Waiting for GiveUp {
        fn tick(&mut self, _: Duration) -> bool {
            self.0 += 1;
            self.0 < 4
        }
    }
    let started = std::time::Instant::now();
    assert_eq!(send(&url, &mut GiveUp(0)), Err("cancelled".into()));
    // Before the server let go: the waiter ended it, not the server (a bound on the event,
    // not a pace a loaded machine could miss).
    assert!(started.elapsed() < Duration::from_secs(30));
}
