//! `mrtr-gate proxy --otlp URL`: what arrives at an OTLP/HTTP receiver (tests/siem/otlp_receiver.py,
//! decoding each export with the OpenTelemetry protocol's own message classes in the venv
//! scripts/siem makes) after a drain: a span per gated call continuing the trace the client's
//! `params._meta.traceparent` names, a span per step of the gate's under it (the consent's
//! under the retry's), the outcome and the gate's code, the call's context sent upstream as
//! the HTTP `traceparent` header and not in the body, and no argument, answer or state
//! anywhere in what was exported.
//!
//! Raw JSON-RPC written by the test against tests/peers/recording_http_server.py. Hang guards
//! only.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use support::raw::{call, exited, gate, recording_upstream, retry_with_seat, terminate};
use support::{bin, listening, post, proxy_listening, root, scratch};

/// The client's trace: the proxy's call span continues it.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_PARENT: &str = "00f067aa0ba902b7";

/// Values the client or the server put in arguments, answers and states: none may be
/// exported.
const ARGUMENT: &str = "canary-argument-8d1f";
const SEAT: &str = "Qz7#";

/// The receiver, listening; where it writes the spans.
fn receiver(dir: &Path) -> (support::Running, String, std::path::PathBuf) {
    let python = root().join("target/siem-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: ./scripts/siem makes it (./scripts/test runs it)",
        python.display()
    );
    let out = dir.join("spans.jsonl");
    let mut command = Command::new(python);
    command
        .arg(root().join("tests/siem/otlp_receiver.py"))
        .arg(&out);
    let (running, url) = listening(command);
    (running, url, out)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// A proxy exporting to a receiver, over tests/peers/recording_http_server.py, with `extra`
/// flags.
struct Traced {
    dir: std::path::PathBuf,
    spans: std::path::PathBuf,
    url: String,
    proxy: support::Running,
    _receiver: support::Running,
    _upstream: support::Running,
}

impl Traced {
    fn start(name: &str, extra: &[&str]) -> Self {
        let dir = scratch(name);
        let (receiver, collector, spans) = receiver(&dir);
        let (upstream_server, upstream) = recording_upstream(&dir);
        let mut proxy = gate(&dir);
        proxy
            // No path: the exporter posts to /v1/traces.
            .args(["--otlp", &collector])
            .args(extra);
        let (proxy, url) = proxy_listening(proxy, &upstream);
        Self {
            dir,
            spans,
            url,
            proxy,
            _receiver: receiver,
            _upstream: upstream_server,
        }
    }

    /// Drain the proxy (its last spans are sent as it stops); every span the receiver took.
    fn drained(mut self) -> (Vec<Value>, Self) {
        terminate(&self.proxy.0);
        assert!(exited(&mut self.proxy.0).success());
        let spans = lines(&self.spans);
        assert!(
            spans.iter().all(|s| s.get("refused").is_none()),
            "the receiver refused an export: {spans:?}"
        );
        (spans, self)
    }
}

/// The spans under `parent`, by their start.
fn children<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a Value> {
    let mut c: Vec<&Value> = spans
        .iter()
        .filter(|s| s["parent_span_id"] == parent["span_id"])
        .collect();
    c.sort_by_key(|s| s["start"].as_u64());
    c
}

fn names(spans: &[&Value]) -> Vec<String> {
    spans
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_call_and_its_rounds_arrive_as_spans_continuing_the_clients_trace_with_names_and_codes_only() {
    let traced = Traced::start("traces", &[]);
    let url = traced.url.clone();

    // A call in the client's trace, answered after one round.
    let mut first = call(1, "book");
    first["params"]["arguments"] = json!({"note": ARGUMENT});
    first["params"]["_meta"]["traceparent"] =
        json!(format!("00-{CLIENT_TRACE}-{CLIENT_PARENT}-01"));
    first["params"]["_meta"]["tracestate"] = json!("vendor=opaque");
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let state = round["result"]["requestState"].as_str().unwrap().to_owned();
    let done = post(&url, &retry_with_seat(&first, &round, 2, SEAT)).unwrap();
    assert_eq!(
        done["result"]["content"][0]["text"],
        format!("booked {SEAT}"),
        "{done}"
    );
    // A retry of no round, in no trace of the client's: refused by the gate.
    let orphan = retry_with_seat(&call(3, "book"), &json!({"result": {}}), 3, SEAT);
    let refused = post(&url, &orphan).unwrap();
    let code = refused["error"]["data"]["mrtr_gate"]["code"]
        .as_str()
        .unwrap()
        .to_owned();

    let (spans, traced) = traced.drained();
    let dir = &traced.dir;
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap(), s))
        .collect();
    // The call: in the client's trace, under the client's span.
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "tools/call book")
        .collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    let call_span = calls
        .iter()
        .find(|s| s["trace_id"] == CLIENT_TRACE)
        .expect("the call continues the client's trace");
    assert_eq!(call_span["parent_span_id"], CLIENT_PARENT);
    assert_eq!(call_span["kind"], 3, "a client span (SPAN_KIND_CLIENT)");
    assert_eq!(attr(call_span, "mcp.method.name"), "tools/call");
    assert_eq!(attr(call_span, "gen_ai.tool.name"), "book");
    assert!(
        attr(call_span, "jsonrpc.request.id")
            .as_str()
            .unwrap()
            .starts_with("mg:"),
        "the id the proxy minted: {call_span}"
    );
    assert_eq!(attr(call_span, "mrtr_gate.outcome"), "result");
    assert_eq!(call_span["status"]["code"], 0, "unset: {call_span}");
    assert_eq!(call_span["resource"]["service.name"], "mrtr-gate");

    // Its steps, in order: the consent asked inside the retry.
    let steps = children(&spans, call_span);
    assert_eq!(
        names(&steps),
        [
            "mrtr_gate.register",
            "mrtr_gate.accept",
            "mrtr_gate.retry",
            "mrtr_gate.accept"
        ],
        "{steps:#?}"
    );
    assert_eq!(attr(steps[1], "mrtr_gate.outcome"), "input_required");
    assert_eq!(attr(steps[3], "mrtr_gate.outcome"), "result");
    let consent = children(&spans, steps[2]);
    assert_eq!(names(&consent), ["mrtr_gate.consent"]);
    assert_eq!(attr(consent[0], "mrtr_gate.outcome"), "granted");
    for span in steps.iter().chain(&consent) {
        assert_eq!(span["trace_id"], CLIENT_TRACE);
        assert!(span["start"].as_u64() >= call_span["start"].as_u64());
        assert!(span["end"].as_u64() <= call_span["end"].as_u64(), "{span}");
    }

    // The refused retry: a trace of its own, the gate's code on it.
    let orphan = calls
        .iter()
        .find(|s| s["trace_id"] != CLIENT_TRACE)
        .unwrap();
    assert_eq!(orphan["parent_span_id"], "");
    assert_eq!(attr(orphan, "mrtr_gate.outcome"), "refused");
    assert_eq!(attr(orphan, "mrtr_gate.code"), code.as_str());
    assert_eq!(attr(orphan, "error.type"), code.as_str());
    assert_eq!(orphan["status"]["code"], 2, "error: {orphan}");
    let steps = children(&spans, orphan);
    assert_eq!(names(&steps), ["mrtr_gate.retry"]);
    assert_eq!(attr(steps[0], "mrtr_gate.code"), code.as_str());
    assert!(
        spans.iter().all(
            |s| by_id.contains_key(s["parent_span_id"].as_str().unwrap())
                || s["parent_span_id"] == ""
                || s["parent_span_id"] == CLIENT_PARENT
        ),
        "no span under one that was never exported"
    );

    // Upstream: the call's context as headers, the client's body as it came.
    let headers = lines(&dir.join("received.jsonl.headers"));
    let received = lines(&dir.join("received.jsonl"));
    assert_eq!(headers.len(), 2, "{headers:?}");
    let expected = format!(
        "00-{CLIENT_TRACE}-{}-01",
        call_span["span_id"].as_str().unwrap()
    );
    for (h, m) in headers.iter().zip(&received) {
        assert_eq!(h["traceparent"], expected.as_str(), "{h}");
        assert_eq!(h["tracestate"], "vendor=opaque", "{h}");
        assert_eq!(
            m["params"]["_meta"]["traceparent"], first["params"]["_meta"]["traceparent"],
            "the body is the client's: {m}"
        );
    }

    // Nothing exported carries an argument, an answer or a state.
    let raw = std::fs::read_to_string(traced.spans.with_extension("jsonl.raw")).unwrap();
    let exported: Vec<u8> = raw
        .lines()
        .flat_map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
        })
        .collect();
    let exported = String::from_utf8_lossy(&exported);
    for secret in [ARGUMENT, SEAT, state.as_str()] {
        assert!(
            !exported.contains(secret),
            "{secret:?} was exported: {exported}"
        );
    }
}

#[test]
fn a_consent_asked_off_the_engines_thread_is_a_span_of_the_call_and_a_round_left_open_ends_cancelled()
 {
    // Over HTTP a hook decides off the engine's thread; this one says no.
    let traced = Traced::start(
        "traces-hook",
        &["--consent", "command", "sh -c 'cat >/dev/null; echo no'"],
    );
    let first = call(1, "book");
    let round = post(&traced.url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let declined = post(&traced.url, &retry_with_seat(&first, &round, 2, SEAT)).unwrap();
    let code = declined["error"]["data"]["mrtr_gate"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{declined}"))
        .to_owned();

    let (spans, _traced) = traced.drained();
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "tools/call book")
        .collect();
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let call_span = calls[0];
    // The round was never answered: the drain ended it.
    assert_eq!(attr(call_span, "mrtr_gate.outcome"), "cancelled");
    let steps = children(&spans, call_span);
    assert_eq!(
        names(&steps),
        [
            "mrtr_gate.register",
            "mrtr_gate.accept",
            "mrtr_gate.consent",
            "mrtr_gate.retry",
            "mrtr_gate.finish"
        ],
        "{steps:#?}"
    );
    assert_eq!(attr(steps[2], "mrtr_gate.outcome"), "declined");
    assert_eq!(attr(steps[3], "mrtr_gate.outcome"), "refused");
    assert_eq!(attr(steps[3], "mrtr_gate.code"), code.as_str());
    assert_eq!(attr(steps[4], "mrtr_gate.outcome"), "done");
}

#[test]
fn an_otlp_url_that_is_no_http_url_is_a_usage_error_naming_the_flag() {
    let dir = scratch("traces-usage");
    for bad in [
        "ftp://127.0.0.1:4318",
        "127.0.0.1:4318",
        "http://",
        "not a url",
    ] {
        let out = Command::new(bin())
            .args(["proxy", "--user", "alice", "--otlp", bad])
            .arg("--audit")
            .arg(dir.join("audit.jsonl"))
            .arg("--host-keys")
            .arg(dir.join("host-keys.json"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://127.0.0.1:9/mcp",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--otlp"), "{bad}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_collector_that_takes_nothing_costs_no_call_and_is_said_once() {
    let dir = scratch("traces-down");
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_upstream_server, upstream) = recording_upstream(&dir);
    let mut proxy = gate(&dir);
    proxy
        .args(["--log-format", "json"])
        .args(["--otlp", &format!("http://127.0.0.1:{port}")])
        .args(["--listen", "127.0.0.1:0", "--upstream", &upstream])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = proxy.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    let mut proxy = support::Running(child);
    let url = loop {
        let line = lines
            .recv_timeout(support::raw::HANG_GUARD)
            .expect("the proxy said where it listens");
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["event"] == "listening" {
            break format!("http://{}/mcp", event["address"].as_str().unwrap());
        }
    };
    for id in 1..=3 {
        let first = call(id * 10, "book");
        let round = post(&url, &first).unwrap();
        assert_eq!(round["result"]["resultType"], "input_required", "{round}");
        let done = post(&url, &retry_with_seat(&first, &round, id * 10 + 1, SEAT)).unwrap();
        assert_eq!(
            done["result"]["content"][0]["text"],
            format!("booked {SEAT}"),
            "{done}"
        );
    }
    terminate(&proxy.0);
    assert!(exited(&mut proxy.0).success());
    let events: Vec<Value> = lines
        .try_iter()
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect();
    let unexported: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "traces_unexported")
        .collect();
    assert!(!unexported.is_empty(), "{events:#?}");
    assert_eq!(unexported[0]["level"], "warn");
    assert_eq!(
        unexported[0]["collector"],
        format!("http://127.0.0.1:{port}/v1/traces")
    );
    // Said once while the collector stays down (the drain's last flush may add its own).
    assert!(unexported.len() <= 2, "{unexported:#?}");
}
