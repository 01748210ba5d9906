//! The two checks that read more than the requests: `min_gap_ms` (state-only pacing) and the
//! `cancelled` precondition (a round delivered after its call was cancelled), judged over
//! recordings made here, and the held call served over real sockets: its notification, the
//! close that cancels it, the late round first on the next request's stream, the fallback.

#[cfg(test)]
mod timing_checks {
    use mrtr_gate_probe::embedded;
    use mrtr_gate_probe::hold::HoldRecord;
    use mrtr_gate_probe::http::Server;
    use mrtr_gate_probe::judge::{Status, judge};
    use mrtr_gate_probe::record::{Recording, Request};
    use mrtr_gate_probe::scenario::{self, Scenario};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    fn named(name: &str) -> Scenario {
        embedded::scenarios()
            .expect("valid")
            .into_iter()
            .find(|s| s.name == name)
            .expect("embedded")
    }

    fn call(seq: usize, tool: &str, leg: usize, state: Option<&str>) -> Request {
        let state = state.map_or(String::new(), |s| format!(r#","requestState":"{s}""#));
        let mut r = Request::read(
            seq,
            "POST",
            "/mcp",
            format!(
                r#"{{"jsonrpc":"2.0","id":{seq},"method":"tools/call","params":{{"name":"{tool}"{state}}}}}"#
            ),
        );
        r.leg = Some(leg);
        r
    }

    /// Four calls of `poll`, each retry's head `gaps[n]` after round n was answered (`None`:
    /// before it).
    fn paced(gaps: [Option<u64>; 3]) -> Recording {
        let base = Instant::now();
        let mut at = base;
        let mut requests = Vec::new();
        for leg in 0..4 {
            let state = (leg > 0).then(|| format!("S-only-{}", leg - 1));
            let mut r = call(leg, "poll", leg, state.as_deref());
            if leg > 0 {
                r.started = match gaps[leg - 1] {
                    Some(ms) => at + Duration::from_millis(ms),
                    None => at.checked_sub(Duration::from_millis(1)).unwrap_or(base),
                };
            } else {
                r.started = at;
            }
            at = r.started.max(at) + Duration::from_millis(2);
            r.answered = Some(at);
            requests.push(r);
        }
        Recording {
            requests,
            ..Recording::default()
        }
    }

    fn status(scenario: &Scenario, rec: &Recording) -> (Status, String) {
        let v = judge(scenario, rec, 1)
            .into_iter()
            .next()
            .expect("one check");
        (v.status, v.message.unwrap_or_default())
    }

    #[test]
    fn a_state_only_retry_sooner_than_40_ms_fails_and_paced_ones_pass() {
        let s = named("mrtr-state-only-pacing");
        let (st, msg) = status(&s, &paced([Some(50), Some(100), Some(200)]));
        assert_eq!(st, Status::Success, "{msg}");
        let (st, msg) = status(&s, &paced([Some(250), Some(3), Some(250)]));
        assert_eq!(st, Status::Failure);
        assert!(msg.contains("round 1 of `poll`"), "{msg}");
        let (st, msg) = status(&s, &paced([None, Some(250), Some(250)]));
        assert_eq!(st, Status::Failure);
        assert!(msg.contains("before the round was written"), "{msg}");
        // The boundary: 40 ms is paced, 39 is not.
        assert_eq!(
            status(&s, &paced([Some(40), Some(40), Some(40)])).0,
            Status::Success
        );
        assert_eq!(
            status(&s, &paced([Some(40), Some(39), Some(40)])).0,
            Status::Failure
        );
        // A client that never retries the state-only round has shown nothing.
        let only_first = Recording {
            requests: vec![call(0, "poll", 0, None)],
            ..Recording::default()
        };
        let (st, msg) = status(&s, &only_first);
        assert_eq!(st, Status::Failure);
        assert!(msg.contains("no retry"), "{msg}");
    }

    fn held(rec_hold: Option<HoldRecord>, requests: Vec<Request>) -> Recording {
        Recording {
            requests,
            hold: rec_hold,
            ..Recording::default()
        }
    }

    #[test]
    fn the_late_round_is_judged_only_after_a_cancellation_and_its_delivery() {
        let s = named("mrtr-round-after-cancel");
        let first = || call(0, "transfer", 0, None);
        let record = |cancelled, fell_back, late_on| {
            Some(HoldRecord {
                id: "0".into(),
                cancelled,
                fell_back,
                late_on,
                fallback: Duration::from_secs(90),
            })
        };
        // Cancelled, the late round delivered on the sentinel's stream, not answered.
        let sentinel = call(1, "probe_done", 0, None);
        let rec = held(
            record(Some("closed"), false, Some(1)),
            vec![first(), sentinel.clone()],
        );
        assert_eq!(status(&s, &rec).0, Status::Success);
        // ... answered: the sentinel's retry carries S-late.
        let answered = call(2, "probe_done", 1, Some("S-late"));
        let rec = held(
            record(Some("notifications/cancelled"), false, Some(1)),
            vec![first(), sentinel, answered],
        );
        let (st, msg) = status(&s, &rec);
        assert_eq!(st, Status::Failure);
        assert!(msg.contains("S-late"), "{msg}");
        // No cancellation: the fallback answered the call; never a SUCCESS.
        let rec = held(record(None, true, None), vec![first()]);
        let (st, msg) = status(&s, &rec);
        assert_eq!(st, Status::Skipped);
        assert!(msg.contains("unsupported: cancel"), "{msg}");
        // Cancelled, then nothing more sent: the late round never went out.
        let rec = held(record(Some("closed"), false, None), vec![first()]);
        let (st, msg) = status(&s, &rec);
        assert_eq!(st, Status::Failure);
        assert!(msg.contains("never delivered"), "{msg}");
        // A client that says it cannot cancel is skipped, though it called nothing.
        let mut rec = held(None, vec![]);
        rec.unsupported = vec!["cancel".into()];
        assert_eq!(status(&s, &rec).0, Status::Skipped);
        // A client that did nothing proved nothing.
        assert_eq!(status(&s, &held(None, vec![])).0, Status::Failure);
    }

    const GOOD: &str = r#"{"name": "x", "description": "d", "safe": "s",
      "clauses": [{"id": "c", "source": "s", "text": "t"}],
      "tools": [{"name": "t", "legs": [
        {"hold": {"notify": {"jsonrpc": "2.0", "method": "notifications/message", "params": {}},
                  "late": {"result": {"resultType": "input_required", "requestState": "S-late"}}}},
        {"result": {"resultType": "input_required", "requestState": "S-{{n}}"}}],
        "then": {"result": {"resultType": "complete"}}}],
      "checks": [
        {"id": "mrtr-x", "kind": "no_request", "description": "d", "match": {"state": "S-late"}, "says": "s", "requires": "cancelled"},
        {"id": "mrtr-y", "kind": "min_gap_ms", "description": "d", "tool": "t", "ms": 40}]}"#;

    #[test]
    fn hostile_holds_and_gap_checks_are_refused_with_typed_errors() {
        assert!(scenario::parse("x", GOOD).is_ok());
        let cases = [
            // A notification has a method and no id.
            (
                "invalid_answer",
                GOOD.replace(
                    r#""method": "notifications/message", "params": {}"#,
                    r#""id": 1, "method": "notifications/message""#,
                ),
            ),
            (
                "invalid_answer",
                GOOD.replace(r#""method": "notifications/message", "#, ""),
            ),
            // The late answer is one message, not a stream, a close or another hold.
            (
                "invalid_answer",
                GOOD.replace(
                    r#""late": {"result""#,
                    r#""late": {"close": true, "result""#,
                ),
            ),
            (
                "invalid_answer",
                GOOD.replace(r#""late": {"result""#, r#""late": {"as_sse": true, "result""#),
            ),
            // One hold per scenario, and never in `then`.
            (
                "invalid_answer",
                GOOD.replace(
                    r#""then": {"result": {"resultType": "complete"}}"#,
                    r#""then": {"hold": {"notify": {"method": "m"}, "late": {"error": {}}}}"#,
                ),
            ),
            (
                "invalid_answer",
                GOOD.replace(r#"{"hold""#, r#"{"result": {}, "hold""#),
            ),
            (
                "unknown_field",
                GOOD.replace(r#""notify""#, r#""timeout_ms": 5, "notify""#),
            ),
            (
                "unknown_placeholder",
                GOOD.replace(r#""params": {}"#, r#""params": {"p": "{{port}}"}"#),
            ),
            // min_gap_ms: a tool with a state-only leg, and ms in 1..=10000.
            ("invalid_check", GOOD.replace(r#", "ms": 40"#, "")),
            ("invalid_check", GOOD.replace(r#""ms": 40"#, r#""ms": 0"#)),
            ("invalid_check", GOOD.replace(r#""ms": 40"#, r#""ms": 600000"#)),
            ("invalid_scenario", GOOD.replace(r#""ms": 40"#, r#""ms": -1"#)),
            (
                "invalid_check",
                GOOD.replace(r#""tool": "t", "ms": 40"#, r#""ms": 40"#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""tool": "t", "ms""#, r#""tool": "u", "ms""#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""S-{{n}}"}}"#, r#""S-{{n}}", "inputRequests": {}}}"#),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""says": "s", "requires""#, r#""says": "s", "ms": 5, "requires""#),
            ),
            // `requires: cancelled` needs a held call.
            (
                "invalid_check",
                GOOD.replace(
                    r#"{"hold": {"notify": {"jsonrpc": "2.0", "method": "notifications/message", "params": {}},
                  "late": {"result": {"resultType": "input_required", "requestState": "S-late"}}}},"#,
                    "",
                ),
            ),
            (
                "invalid_check",
                GOOD.replace(r#""requires": "cancelled""#, r#""requires": "canceled""#),
            ),
        ];
        for (code, text) in &cases {
            assert_ne!(text, GOOD, "the case changes the file");
            let error = scenario::parse("x", text).expect_err("refused");
            assert_eq!(error.code, *code, "{error}\n{text}");
        }
    }

    async fn post(stream: &mut TcpStream, body: &str) {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream
            .write_all(format!("{head}{body}").as_bytes())
            .await
            .expect("written");
    }

    /// Reads until `needle` has come (or the stream ends).
    async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(needle) {
            let n = stream.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    const CALL: &str =
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"transfer"}}"#;
    const DONE: &str =
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"probe_done"}}"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_held_call_is_cancelled_and_its_round_opens_the_next_stream() {
        let scenario = Arc::new(named("mrtr-round-after-cancel"));
        let server = Server::start(scenario, 1, Duration::from_secs(60)).expect("serving");
        let addr = server.url().replace("http://", "").replace("/mcp", "");
        let mut held = TcpStream::connect(&addr).await.expect("connected");
        post(&mut held, CALL).await;
        let first = read_until(&mut held, "notifications/message").await;
        assert!(first.contains("text/event-stream"), "{first}");
        assert!(!first.contains("S-late"), "{first}");
        drop(held);
        let mut next = TcpStream::connect(&addr).await.expect("connected");
        post(&mut next, DONE).await;
        let body = read_until(&mut next, r#""text":"done""#).await;
        let late = body.find("S-late").expect("the late round");
        assert!(body[..late].contains(r#""id":7"#), "{body}");
        assert!(
            late < body.find(r#""id":8"#).expect("its own result"),
            "{body}"
        );
        drop(next);
        let (requests, ended, hold) = server.finish(Duration::from_secs(60)).await;
        assert!(ended);
        assert_eq!(requests.len(), 2);
        let hold = hold.expect("held");
        assert_eq!((hold.cancelled, hold.late_on), (Some("closed"), Some(1)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_held_call_nobody_cancels_is_answered_by_the_fallback_and_nothing_comes_late() {
        let scenario = Arc::new(named("mrtr-round-after-cancel"));
        let server = Server::start(scenario, 1, Duration::from_millis(100)).expect("serving");
        let addr = server.url().replace("http://", "").replace("/mcp", "");
        let mut held = TcpStream::connect(&addr).await.expect("connected");
        post(&mut held, CALL).await;
        let body = read_until(&mut held, "fallback").await;
        assert!(body.contains("notifications/message"), "{body}");
        post(&mut held, DONE).await;
        let next = read_until(&mut held, r#""text":"done""#).await;
        assert!(!next.contains("S-late"), "{next}");
        drop(held);
        let (_, ended, hold) = server.finish(Duration::from_secs(60)).await;
        assert!(ended);
        let hold = hold.expect("held");
        assert!(hold.fell_back);
        assert_eq!((hold.cancelled, hold.late_on), (None, None));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_notification_naming_the_call_cancels_it() {
        let scenario = Arc::new(named("mrtr-round-after-cancel"));
        let server = Server::start(scenario, 1, Duration::from_secs(60)).expect("serving");
        let addr = server.url().replace("http://", "").replace("/mcp", "");
        let mut held = TcpStream::connect(&addr).await.expect("connected");
        post(&mut held, CALL).await;
        read_until(&mut held, "notifications/message").await;
        let mut other = TcpStream::connect(&addr).await.expect("connected");
        post(
            &mut other,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
        )
        .await;
        read_until(&mut other, "\r\n\r\n").await;
        // The held stream ends (its chunked body's last chunk), the connection stays usable.
        read_until(&mut held, "0\r\n\r\n").await;
        post(&mut held, DONE).await;
        let body = read_until(&mut held, r#""text":"done""#).await;
        assert!(body.contains("S-late"), "{body}");
        drop((held, other));
        let (_, _, hold) = server.finish(Duration::from_secs(60)).await;
        let hold = hold.expect("held");
        assert_eq!(hold.cancelled, Some("notifications/cancelled"));
        assert_eq!(hold.late_on, Some(2));
    }
}
