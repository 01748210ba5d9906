//! `mrtr-gate proxy --admin ADDR`: `/metrics` read by the parser Prometheus itself uses
//! (Debian's `promtool check metrics`, installed by scripts/setup) and counting what the test
//! did, `/healthz`, and `/readyz` naming each check (the gate, the trail, the upstream) and
//! failing when the upstream goes; a page that rebound its domain to the admin port reads
//! nothing; only GET and HEAD.
//!
//! Raw JSON-RPC written by the test against tests/peers/recording_http_server.py (HTTP) and
//! tests/peers/recording_server.py (stdio). Hang guards only.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::raw::{HANG_GUARD, call, gate, recording_upstream, retry};
use support::{bin, post, proxy_listening_with_admin, root, scratch};

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// GET `path` of the admin listener: the status and the body.
fn get(admin: &str, path: &str) -> (u16, String) {
    let mut answer = agent().get(format!("{admin}{path}")).call().unwrap();
    let status = answer.status().as_u16();
    (status, answer.body_mut().read_to_string().unwrap())
}

/// The metrics page, checked by Prometheus's own parser and linter first.
fn scrape(admin: &str) -> String {
    let (status, page) = get(admin, "/metrics");
    assert_eq!(status, 200, "{page}");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package) is installed by ./scripts/setup");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool refused the page: {}{}\n{page}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    page
}

/// The value of the sample `series` (its name and labels exactly as rendered).
fn sample(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in\n{page}"))
        .parse()
        .unwrap()
}

fn readiness(admin: &str) -> (u16, Value) {
    let (status, body) = get(admin, "/readyz");
    (status, serde_json::from_str(&body).unwrap())
}

/// `/readyz` once it says ready (the engines load their gates after the listener is bound,
/// as a balancer's probe sees: not ready until then), hang-guarded.
fn once_ready(admin: &str) -> (u16, Value) {
    let started = Instant::now();
    loop {
        let (status, ready) = readiness(admin);
        if status == 200 || started.elapsed() > HANG_GUARD {
            return (status, ready);
        }
        assert_eq!(ready["checks"]["gate"], "no gate is loaded yet", "{ready}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn over_http_the_admin_listener_counts_the_rounds_says_ready_and_names_a_lost_upstream() {
    let dir = scratch("admin-http");
    let (upstream_server, upstream) = recording_upstream(&dir);
    let (_proxy, url, admin) = proxy_listening_with_admin(gate(&dir), &upstream);

    let (status, body) = get(&admin, "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, ready) = once_ready(&admin);
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready,
        json!({"ready": true, "checks": {"gate": "ok", "trail": "ok", "upstream": "ok"}})
    );

    // One round answered, one left open, and a retry of no round (refused by the gate).
    let first = call(1, "book");
    let round = post(&url, &first).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let done = post(&url, &retry(&first, &round, 2)).unwrap();
    assert_eq!(done["result"]["content"][0]["text"], "booked 12A", "{done}");
    let open = post(&url, &call(3, "book")).unwrap();
    assert_eq!(open["result"]["resultType"], "input_required", "{open}");
    let orphan = retry(&call(4, "book"), &json!({"result": {}}), 4);
    let refused = post(&url, &orphan).unwrap();
    let (cause, code) = (
        refused["error"]["data"]["mrtr_gate"]["cause"]
            .as_str()
            .unwrap(),
        refused["error"]["data"]["mrtr_gate"]["code"]
            .as_str()
            .unwrap(),
    );

    let page = scrape(&admin);
    let tools = |name: &str, labels: &str| {
        sample(&page, &format!("{name}{{method=\"tools/call\",{labels}}}"))
    };
    assert_eq!(tools("mrtr_gate_requests_total", "kind=\"call\""), 2.0);
    assert_eq!(tools("mrtr_gate_requests_total", "kind=\"retry\""), 1.0);
    assert_eq!(
        tools("mrtr_gate_answers_total", "verdict=\"input_required\""),
        2.0
    );
    assert_eq!(tools("mrtr_gate_answers_total", "verdict=\"result\""), 1.0);
    assert_eq!(tools("mrtr_gate_answers_total", "verdict=\"refused\""), 0.0);
    assert_eq!(
        sample(
            &page,
            "mrtr_gate_upstream_seconds_count{method=\"tools/call\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            &page,
            &format!("mrtr_gate_refusals_total{{cause=\"{cause}\",code=\"{code}\"}}")
        ),
        1.0
    );
    assert_eq!(sample(&page, "mrtr_gate_open_rounds"), 1.0);
    assert_eq!(sample(&page, "mrtr_gate_calls_in_flight"), 0.0);
    let written = sample(&page, "mrtr_gate_audit_appends_total{result=\"written\"}");
    let trail_lines = std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"shard\":\"root\""))
        .count();
    assert_eq!(written, trail_lines as f64, "every gate line counted once");
    assert_eq!(
        sample(&page, "mrtr_gate_audit_appends_total{result=\"failed\"}"),
        0.0
    );
    assert_eq!(
        sample(&page, "mrtr_gate_consent_total{decision=\"granted\"}"),
        1.0
    );
    // No value of a call's (its tool's name, its arguments, its answers) is in the page.
    for secret in ["book", "12A", "alice", "acme"] {
        assert!(!page.contains(secret), "{secret} in\n{page}");
    }

    // A page whose domain was rebound to the admin port reads nothing, and nothing is written.
    let rebound = agent()
        .get(format!("{admin}/metrics"))
        .header("host", "attacker.example")
        .call()
        .unwrap();
    assert_eq!(rebound.status().as_u16(), 403);
    let posted = agent().post(format!("{admin}/metrics")).send("").unwrap();
    assert_eq!(posted.status().as_u16(), 405);
    assert_eq!(get(&admin, "/nothing").0, 404);

    // The upstream goes away: not ready, and the check says which and where.
    drop(upstream_server);
    let started = Instant::now();
    let (status, ready) = loop {
        let (status, ready) = readiness(&admin);
        if status != 200 || started.elapsed() > HANG_GUARD {
            break (status, ready);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["ready"], false, "{ready}");
    assert_eq!(ready["checks"]["gate"], "ok", "{ready}");
    let lost = ready["checks"]["upstream"].as_str().unwrap();
    let authority = upstream
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    assert!(lost.contains(authority), "{lost}");
    // A call meanwhile fails as the upstream's failure, not the gate's refusal, naming where.
    let failed = post(&url, &call(5, "book")).unwrap();
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the upstream failed, mrtr-gate refused nothing (transport_failed)")
            && message.contains(authority),
        "{failed}"
    );
    let page = scrape(&admin);
    assert_eq!(
        sample(
            &page,
            "mrtr_gate_refusals_total{cause=\"upstream\",code=\"transport_failed\"}"
        ),
        1.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn over_stdio_the_admin_listener_serves_beside_the_relay() {
    let dir = scratch("admin-stdio");
    std::fs::create_dir_all(dir.join("server")).unwrap();
    std::fs::create_dir_all(dir.join("gate")).unwrap();
    let mut proxy = Command::new(bin())
        .args(["proxy", "--user", "alice", "--admin", "127.0.0.1:0"])
        .arg("--audit")
        .arg(dir.join("gate/audit.jsonl"))
        .arg("--host-keys")
        .arg(dir.join("gate/host-keys.json"))
        .arg("--server-log")
        .arg(dir.join("gate/server.log"))
        .arg("--")
        .arg("python3")
        .arg(root().join("tests/peers/recording_server.py"))
        .arg(dir.join("server/received.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read to its end on a thread of its own: the proxy never writes to a closed stderr.
    let stderr = BufReader::new(proxy.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("mrtr-gate proxy: admin on ") {
                let _ = tx.send(rest.split(' ').next().unwrap_or_default().to_owned());
            }
        }
    });
    let admin = rx
        .recv_timeout(HANG_GUARD)
        .expect("the proxy said where its admin listener is");
    let mut input = proxy.stdin.take().unwrap();
    let mut output = BufReader::new(proxy.stdout.take().unwrap());
    writeln!(input, "{}", call(1, "book")).unwrap();
    input.flush().unwrap();
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    let round: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");

    let (status, ready) = readiness(&admin);
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready,
        json!({"ready": true, "checks": {"gate": "ok", "trail": "ok"}})
    );
    let page = scrape(&admin);
    assert_eq!(sample(&page, "mrtr_gate_open_rounds"), 1.0);
    assert_eq!(sample(&page, "mrtr_gate_engines"), 1.0);
    let _ = proxy.kill();
    let _ = proxy.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
