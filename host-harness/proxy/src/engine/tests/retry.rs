//! A client's retry through the engine: matched to its round by what it repeats, built by
//! the gate, refused (and audited) when it matches no open round, and never sent twice.

use super::*;

/// The SDK clients' retry: the request's params with the answers and the exact state added,
/// under a new id, `_meta` as the client sends it.
fn retry(id: &str, arguments: &str, answers: Option<&str>, state: Option<&str>) -> String {
    let mut extra = String::new();
    if let Some(answers) = answers {
        extra.push_str(&format!(r#","inputResponses":{answers}"#));
    }
    if let Some(state) = state {
        extra.push_str(&format!(r#","requestState":{state}"#));
    }
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"book","arguments":{arguments},"_meta":{{"progressToken":{id}}}{extra}}}}}"#
    )
}

const SEAT: &str = r#"{"seat":{"action":"accept","content":{"seat":"12A"}}}"#;
const LIS: &str = r#"{"to":"LIS"}"#;

/// A round without state (the form round of `form_round` minus its state).
fn stateless_round(id: &str) -> String {
    form_round(id).replace(r#","requestState":"opaque""#, "")
}

/// A round delivered to the client under `client_id`; the id it went upstream under.
fn delivered(r: &mut Rig, client_id: &str, round: fn(&str) -> String) -> String {
    let minted = sent_id(&r.engine.on_client(&call(client_id)));
    to_client(r.engine.on_server(&round(&minted)));
    minted
}

fn refused(action: Action) -> (i64, String) {
    let (_, code, gate_code) = error_of(&to_client(action));
    (code, gate_code)
}

fn events(audit: &MemoryAudit, kind: &str) -> Vec<Value> {
    audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == kind)
        .collect()
}

#[test]
fn a_retry_goes_upstream_as_the_gates_text_under_a_new_id_and_its_answer_comes_back() {
    let mut r = rig();
    let first = delivered(&mut r, "1", form_round);
    let up = r
        .engine
        .on_client(&retry("2", LIS, Some(SEAT), Some(r#""opaque""#)));
    let second = sent_id(&up);
    assert_ne!(first, second);
    let Action::Gated { text, .. } = &up else {
        panic!("{up:?}");
    };
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        v["params"]["inputResponses"]["seat"]["content"]["seat"],
        "12A"
    );
    assert_eq!(v["params"]["requestState"], "opaque");
    // The registered `_meta`, not the retry's.
    assert_eq!(v["params"]["_meta"]["progressToken"], Value::Null);
    assert_eq!(
        to_client(r.engine.on_server(&complete(&second))),
        complete("2")
    );
    assert_eq!(events(&r.audit, "submitted").len(), 1);
    assert_eq!((r.engine.in_flight(), r.engine.open_rounds()), (0, 0));
}

#[test]
fn a_retrys_answer_reaches_the_client_uncacheable_and_a_first_calls_as_it_came() {
    let cacheable = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","ttlMs":600000,"cacheScope":"private","content":[]}}}}"#
        )
    };
    let mut r = rig();
    // A call answered at once: its hints are the server's to give.
    let minted = sent_id(&r.engine.on_client(&call("1")));
    assert_eq!(
        to_client(r.engine.on_server(&cacheable(&minted))),
        cacheable("1")
    );
    // A retry's answer depends on answers no cache key holds: stale at once.
    delivered(&mut r, "2", form_round);
    let up = r
        .engine
        .on_client(&retry("3", LIS, Some(SEAT), Some(r#""opaque""#)));
    let second = sent_id(&up);
    assert_eq!(
        to_client(r.engine.on_server(&cacheable(&second))),
        cacheable("3").replace(r#""ttlMs":600000"#, r#""ttlMs":0"#)
    );
}

#[test]
fn a_round_without_state_is_found_by_its_arguments_and_changed_ones_find_nothing() {
    let mut r = rig();
    delivered(&mut r, "1", stateless_round);
    let changed = r
        .engine
        .on_client(&retry("2", r#"{"to":"OPO"}"#, Some(SEAT), None));
    assert_eq!(
        refused(changed),
        (CALLER_REFUSED, "inactive_mrtr_round".into())
    );
    // Nothing went upstream, and the refusal is in the trail.
    assert_eq!(r.engine.in_flight(), 0);
    assert_eq!(events(&r.audit, "rejected").len(), 1);
    // The round is still there for the retry that repeats the call.
    let up = r.engine.on_client(&retry("3", LIS, Some(SEAT), None));
    sent_id(&up);
}

#[test]
fn a_state_names_its_round_and_the_gate_refuses_other_arguments_under_it() {
    let mut r = rig();
    delivered(&mut r, "1", form_round);
    let changed = r.engine.on_client(&retry(
        "2",
        r#"{"to":"OPO"}"#,
        Some(SEAT),
        Some(r#""opaque""#),
    ));
    assert_eq!(
        refused(changed),
        (CALLER_REFUSED, "mrtr_identity_or_argument_mismatch".into())
    );
    let edited = r
        .engine
        .on_client(&retry("3", LIS, Some(SEAT), Some(r#""opaque2""#)));
    assert_eq!(
        refused(edited),
        (CALLER_REFUSED, "inactive_mrtr_round".into())
    );
    // Neither used the round up.
    sent_id(
        &r.engine
            .on_client(&retry("4", LIS, Some(SEAT), Some(r#""opaque""#))),
    );
    assert_eq!(events(&r.audit, "rejected").len(), 2);
}

#[test]
fn a_round_is_retried_once() {
    let mut r = rig();
    delivered(&mut r, "1", form_round);
    let again = retry("2", LIS, Some(SEAT), Some(r#""opaque""#));
    sent_id(&r.engine.on_client(&again));
    let (code, gate_code) = refused(r.engine.on_client(&again.replace(r#""id":2"#, r#""id":3"#)));
    assert_eq!(
        (code, gate_code.as_str()),
        (CALLER_REFUSED, "inactive_mrtr_round")
    );
    assert_eq!(events(&r.audit, "submitted").len(), 1);
}

#[test]
fn answers_the_schema_refuses_never_go_upstream_and_right_ones_then_do() {
    let mut r = rig();
    delivered(&mut r, "1", form_round);
    let long = r#"{"seat":{"action":"accept","content":{"seat":"12ABCDEF"}}}"#;
    let (code, gate_code) =
        refused(
            r.engine
                .on_client(&retry("2", LIS, Some(long), Some(r#""opaque""#))),
        );
    assert_eq!(
        (code, gate_code.as_str()),
        (CALLER_REFUSED, "input_response_schema_mismatch")
    );
    assert_eq!(r.engine.in_flight(), 0);
    sent_id(
        &r.engine
            .on_client(&retry("3", LIS, Some(SEAT), Some(r#""opaque""#))),
    );
}

#[test]
fn a_retry_after_the_rounds_lifetime_is_refused() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    let mut r = replica(clock.clone(), storage, MemoryAudit::new(), 1);
    delivered(&mut r, "1", form_round);
    clock.advance(Policy::default().round_trip_lifetime_ms + 1);
    let (code, gate_code) =
        refused(
            r.engine
                .on_client(&retry("2", LIS, Some(SEAT), Some(r#""opaque""#))),
        );
    assert_eq!(
        (code, gate_code.as_str()),
        (CALLER_REFUSED, "inactive_mrtr_round")
    );
    assert_eq!(r.engine.in_flight(), 0);
}

#[test]
fn a_state_only_retry_without_input_responses_is_the_empty_answer() {
    let mut r = rig();
    let state_only = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","requestState":"s1"}}}}"#
        )
    };
    delivered(&mut r, "1", state_only);
    // The Python SDK leaves `inputResponses` out when there is nothing to answer.
    let up = r.engine.on_client(&retry("2", LIS, None, Some(r#""s1""#)));
    let Action::Gated { text, .. } = &up else {
        panic!("{up:?}");
    };
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["params"]["requestState"], "s1");
}

/// HTTP replicas of one endpoint (or engines of one pool) over one store and one trail: every
/// one may take a round. Also the trail.
fn two_http_replicas() -> (Rig, Rig, MemoryAudit) {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    let audit = MemoryAudit::new();
    let mut a = replica(clock.clone(), storage.clone(), audit.clone(), 1);
    a.engine = a.engine.shared_by_many_clients();
    let mut b = replica(clock, storage, audit.clone(), 2);
    b.engine = b.engine.shared_by_many_clients();
    (a, b, audit)
}

#[test]
fn a_retry_finds_a_round_another_replica_delivered_and_is_refused_after_it_was_used() {
    let (mut a, mut b, audit) = two_http_replicas();
    delivered(&mut a, "1", form_round);
    let text = retry("2", LIS, Some(SEAT), Some(r#""opaque""#));
    let up = sent_id(&b.engine.on_client(&text));
    assert!(up.starts_with(r#""mg:0000000000000002:"#), "{up}");
    // The same retry at the first replica: the round is used.
    let (code, gate_code) = refused(a.engine.on_client(&text));
    assert_eq!(
        (code, gate_code.as_str()),
        (CALLER_REFUSED, "inactive_mrtr_round")
    );
    assert_eq!(events(&audit, "submitted").len(), 1);
}

/// Engines of one pool (or replicas) share the index: a round one delivered and another
/// retried is not the first one's open round any more, so a principal whose every round is
/// retried elsewhere never reaches its cap of open rounds (it did, after 1,024 rounds within a
/// lifetime, in `bench-proxy` with two engines).
#[test]
fn rounds_retried_through_another_engine_do_not_count_against_the_cap() {
    let (mut a, mut b, _) = two_http_replicas();
    for n in 0..MAX_OPEN_ROUNDS + 1 {
        delivered(&mut a, &(2 * n).to_string(), form_round);
        let text = retry(
            &(2 * n + 1).to_string(),
            LIS,
            Some(SEAT),
            Some(r#""opaque""#),
        );
        sent_id(&b.engine.on_client(&text));
    }
    // The next round is delivered: at the cap, what was retried elsewhere was forgotten (the
    // last one retried since stays until the cap is reached again).
    let minted = sent_id(&a.engine.on_client(&call(r#""x""#)));
    let shown = to_client(a.engine.on_server(&form_round(&minted)));
    assert!(shown.contains("input_required"), "{shown}");
    assert_eq!(a.engine.open_rounds(), 2);
    // Rounds nobody retried still count: the cap holds.
    for n in 1..MAX_OPEN_ROUNDS {
        let minted = sent_id(&a.engine.on_client(&call(&format!("\"y{n}\""))));
        let shown = to_client(a.engine.on_server(&form_round(&minted)));
        assert!(shown.contains("input_required"), "{n}: {shown}");
    }
    assert_eq!(a.engine.open_rounds(), MAX_OPEN_ROUNDS);
    let minted = sent_id(&a.engine.on_client(&call(r#""z""#)));
    let (code, gate_code) = refused(a.engine.on_server(&form_round(&minted)));
    assert_eq!(
        (code, gate_code.as_str()),
        (MESSAGE_REFUSED, "too_many_open_rounds")
    );
}

#[test]
fn a_cancelled_call_is_cancelled_upstream_under_its_minted_id_and_its_binding_ends() {
    let mut r = rig();
    let minted = sent_id(&r.engine.on_client(&call(r#""c1""#)));
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"user"}}"#;
    let Action::ToServer(up) = r.engine.on_client(note) else {
        panic!("the server is told");
    };
    let v: Value = serde_json::from_str(&up).unwrap();
    assert_eq!(v["params"]["requestId"].to_string(), minted);
    assert_eq!(v["params"]["reason"], "user");
    assert_eq!(r.engine.in_flight(), 0);
    // Its binding is gone (a plain request that saw no round leaves no trail): a late answer
    // reaches nobody.
    assert!(matches!(
        r.engine.on_server(&complete(&minted)),
        Action::Drop(_)
    ));
    assert!(r.audit.events().is_empty());
    // A cancel of a request the proxy relayed goes as it came.
    let other = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#;
    assert_eq!(r.engine.on_client(other), Action::ToServer(other.into()));
}

#[test]
fn a_round_on_an_answer_the_gate_does_not_bind_never_reaches_the_client() {
    let mut r = rig();
    // The answers to a request of the client's the proxy relayed as it came.
    let list = r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#;
    for result_type in ["input_required", "INPUT_REQUIRED"] {
        r.engine.on_client(list);
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":8,"result":{{"resultType":"{result_type}","inputRequests":{{}}}}}}"#
        );
        let (id, code, gate_code) = error_of(&to_client(r.engine.on_server(&text)));
        assert_eq!(
            (id, code, gate_code.as_str()),
            (json!(8), PEER_REFUSED, "input_required_not_allowed")
        );
    }
    let complete = r#"{"jsonrpc":"2.0","id":8,"result":{"resultType":"complete","tools":[]}}"#;
    r.engine.on_client(list);
    assert_eq!(
        r.engine.on_server(complete),
        Action::ToClient(complete.into())
    );
}

#[test]
fn an_old_servers_input_requests_reach_the_client_only_when_allowed() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    let mut r = replica(clock, storage, MemoryAudit::new(), 3);
    r.engine.config.allow_legacy_server_requests = true;
    let ask = r#"{"jsonrpc":"2.0","id":"s1","method":"roots/list"}"#;
    assert_eq!(r.engine.on_server(ask), Action::ToClient(ask.into()));
}

#[test]
fn a_sweep_ends_the_bindings_past_their_lifetime() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    let audit = MemoryAudit::new();
    let mut r = replica(clock.clone(), storage, audit.clone(), 4);
    delivered(&mut r, "1", form_round);
    r.engine.sweep();
    assert!(events(&audit, "terminal").is_empty());
    clock.advance(Policy::default().round_trip_lifetime_ms + 1);
    r.engine.sweep();
    let ends: Vec<Value> = events(&audit, "terminal")
        .into_iter()
        .map(|e| e["outcome"].clone())
        .collect();
    assert_eq!(ends, vec![json!("expired")]);
}

#[test]
fn on_a_shared_endpoint_a_cancel_never_ends_a_call() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    let mut r = replica(clock, storage, MemoryAudit::new(), 5);
    r.engine = r.engine.shared_by_many_clients();
    // Another client's call with id 1 in flight; this client cancels "its" id 1.
    let minted = sent_id(&r.engine.on_client(&call("1")));
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
    assert!(matches!(r.engine.on_client(note), Action::Drop(_)));
    assert_eq!(r.engine.in_flight(), 1);
    assert_eq!(
        to_client(r.engine.on_server(&complete(&minted))),
        complete("1")
    );
    // A minted id is nobody's to cancel, shared or not.
    let mut one = rig();
    let minted = sent_id(&one.engine.on_client(&call("2")));
    let forged = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{minted}}}}}"#
    );
    assert!(matches!(one.engine.on_client(&forged), Action::Drop(_)));
    assert_eq!(one.engine.in_flight(), 1);
}

#[test]
fn an_answer_whose_result_cannot_be_read_for_sure_is_refused_like_a_round() {
    let mut r = rig();
    r.engine
        .on_client(r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#);
    let twice = r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","resultType":"input_required","inputRequests":{}}}"#;
    let (id, code, gate_code) = error_of(&to_client(r.engine.on_server(twice)));
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!(3), PEER_REFUSED, "input_required_not_allowed")
    );
}

#[test]
fn a_gated_method_sent_as_a_notification_never_goes_upstream() {
    let mut r = rig();
    let note = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pay","arguments":{},"inputResponses":{}}}"#;
    let (id, code, _) = error_of(&to_client(r.engine.on_client(note)));
    assert_eq!((id, code), (json!(null), MESSAGE_REFUSED));
}

#[test]
fn a_stdio_proxys_rounds_are_its_own_even_on_a_shared_store() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    let audit = MemoryAudit::new();
    let mut a = replica(clock.clone(), storage.clone(), audit.clone(), 1);
    let mut b = replica(clock, storage, audit.clone(), 2);
    delivered(&mut a, "1", form_round);
    let text = retry("2", LIS, Some(SEAT), Some(r#""opaque""#));
    // Another stdio proxy's client (and server process) cannot take it...
    let (code, gate_code) = refused(b.engine.on_client(&text));
    assert_eq!(
        (code, gate_code.as_str()),
        (CALLER_REFUSED, "inactive_mrtr_round")
    );
    // ...its own client can.
    sent_id(&a.engine.on_client(&text));
}

/// A round without state whose seat may be at most `max` characters.
fn stateless_seat_round(id: &str, max: u32) -> String {
    stateless_round(id).replace(r#""maxLength":4"#, &format!(r#""maxLength":{max}"#))
}

#[test]
fn parallel_identical_calls_each_get_the_retry_that_fits_their_round() {
    let mut r = rig();
    // Two identical calls in flight; the rounds ask different things and carry no state.
    let one = sent_id(&r.engine.on_client(&call("1")));
    let two = sent_id(&r.engine.on_client(&call("2")));
    to_client(r.engine.on_server(&stateless_seat_round(&one, 1)));
    to_client(r.engine.on_server(&stateless_seat_round(&two, 4)));
    // The answer to the second round comes first: the oldest round refuses it (audited), the
    // next takes it.
    sent_id(&r.engine.on_client(&retry("3", LIS, Some(SEAT), None)));
    // The first round is still there for its own answer.
    let short = r#"{"seat":{"action":"accept","content":{"seat":"9"}}}"#;
    sent_id(&r.engine.on_client(&retry("4", LIS, Some(short), None)));
    assert_eq!(events(&r.audit, "submitted").len(), 2);
}

#[test]
fn a_round_whose_client_left_is_taken_out_of_the_index() {
    let (mut a, mut b, audit) = two_http_replicas();
    let minted = delivered(&mut a, "1", stateless_round);
    // That client hangs up: its round ends cancelled and leaves the index.
    a.engine
        .on_cancel(&RequestId::Text(serde_json::from_str(&minted).unwrap()));
    // A new identical call's round is the only one a retry finds: no refused attempt first.
    delivered(&mut b, "1", stateless_round);
    sent_id(&b.engine.on_client(&retry("2", LIS, Some(SEAT), None)));
    assert!(
        events(&audit, "rejected").is_empty(),
        "{:?}",
        events(&audit, "rejected")
    );
}
