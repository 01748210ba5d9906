//! The engine over the native gate and in-memory services: what reaches each side.

use super::*;
use crate::errors::{CALLER_REFUSED, MESSAGE_REFUSED, PEER_REFUSED, UPSTREAM_FAILED};
use mrtr_gate_host::core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::{HostServices, NativeGate};
use serde_json::{Value, json};
use std::sync::Arc;

struct Rig {
    engine: Engine<NativeGate>,
    audit: MemoryAudit,
}

fn rig() -> Rig {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let storage = Arc::new(MemoryStorage::new(clock.clone()));
    replica(clock, storage, MemoryAudit::new(), 0xabc)
}

/// An engine over `storage` and `audit`, as a replica sharing them with others would be.
fn replica(
    clock: Arc<ManualClock>,
    storage: Arc<MemoryStorage>,
    audit: MemoryAudit,
    nonce: u64,
) -> Rig {
    let services = HostServices {
        clock,
        storage: storage.clone(),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
        audit: Arc::new(audit.clone()),
    };
    let policy = Policy::default();
    let config = EngineConfig {
        server: ServerIdentity::endpoint("stdio:test-server").unwrap(),
        principal: Principal {
            user: "alice".into(),
            tenant: "acme".into(),
        },
        rounds: RoundIndex::new(storage, policy.round_trip_lifetime_ms + 60_000),
        policy,
        allow_legacy_server_requests: false,
        allow_ungated_input: false,
        deferred_consent: None,
        policies: None,
    };
    Rig {
        engine: Engine::new(
            NativeGate::new(services),
            config,
            IdMinter::with_nonce(nonce),
        ),
        audit,
    }
}

fn call(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"book","arguments":{{"to":"LIS"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{}}}}}}}}}}"#
    )
}

fn form_round(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"input_required","inputRequests":{{"seat":{{"method":"elicitation/create","params":{{"message":"Pick a seat","requestedSchema":{{"type":"object","properties":{{"seat":{{"type":"string","maxLength":4}}}},"required":["seat"]}}}}}}}},"requestState":"opaque"}}}}"#
    )
}

fn complete(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0",  "id":{id},"result":{{"content":[{{"type":"text","text":"booked \u00e9"}}]}}}}"#
    )
}

/// The id the engine sent upstream, as JSON text.
fn sent_id(action: &Action) -> String {
    let Action::Gated {
        text, upstream_id, ..
    } = action
    else {
        panic!("nothing went upstream: {action:?}");
    };
    assert_eq!(
        &RequestId::Text(
            serde_json::from_str::<String>(
                &serde_json::from_str::<Value>(text).unwrap()["id"].to_string()
            )
            .unwrap()
        ),
        upstream_id
    );
    let v: Value = serde_json::from_str(text).unwrap();
    let id = v["id"].as_str().unwrap();
    assert!(id.starts_with("mg:"), "{id}");
    v["id"].to_string()
}

fn to_client(action: Action) -> String {
    let Action::ToClient(text) = action else {
        panic!("nothing for the client: {action:?}");
    };
    text
}

fn error_of(text: &str) -> (Value, i64, String) {
    let v: Value = serde_json::from_str(text).unwrap();
    let code = v["error"]["code"].as_i64().unwrap();
    let gate_code = v["error"]["data"]["mrtr_gate"]["code"]
        .as_str()
        .unwrap()
        .to_owned();
    (v["id"].clone(), code, gate_code)
}

#[test]
fn a_gated_call_goes_up_under_a_minted_id_and_comes_back_byte_exact_under_the_clients() {
    let mut r = rig();
    for client_id in [
        "7",
        r#""seven""#,
        "1e400",
        &"9".repeat(300),
        &format!("\"{}\"", "i".repeat(5000)),
    ] {
        let up = r.engine.on_client(&call(client_id));
        let minted = sent_id(&up);
        assert_eq!(r.engine.in_flight(), 1);
        let back = to_client(r.engine.on_server(&complete(&minted)));
        assert_eq!(back, complete(client_id), "byte-exact but for the id");
        assert_eq!(r.engine.in_flight(), 0);
    }
}

#[test]
fn the_gates_text_goes_upstream_with_the_clients_params() {
    let mut r = rig();
    let up = r.engine.on_client(&call("1"));
    let Action::Gated { text, .. } = &up else {
        panic!("{up:?}");
    };
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["method"], "tools/call");
    assert_eq!(v["params"]["name"], "book");
    assert_eq!(v["params"]["arguments"], json!({"to": "LIS"}));
}

#[test]
fn an_accepted_round_reaches_the_client_byte_exact_and_its_binding_stays_open() {
    let mut r = rig();
    let minted = sent_id(&r.engine.on_client(&call(r#""a""#)));
    let back = to_client(r.engine.on_server(&form_round(&minted)));
    assert_eq!(back, form_round(r#""a""#));
    assert_eq!((r.engine.in_flight(), r.engine.open_rounds()), (0, 1));
    // The client leaves: the binding ends cancelled.
    r.engine.on_client_gone();
    assert_eq!(r.engine.open_rounds(), 0);
    let ends: Vec<Value> = r
        .audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "terminal")
        .map(|e| e["outcome"].clone())
        .collect();
    assert_eq!(ends, vec![json!("cancelled")]);
}

#[test]
fn a_round_the_gate_refuses_never_reaches_the_client() {
    let mut r = rig();
    let minted = sent_id(&r.engine.on_client(&call("3")));
    // A URL round over plain http: the gate refuses it (peer).
    let hostile = format!(
        r#"{{"jsonrpc":"2.0","id":{minted},"result":{{"resultType":"input_required","inputRequests":{{"u":{{"method":"elicitation/create","params":{{"mode":"url","message":"Sign in","url":"javascript:alert(1)","elicitationId":"e1"}}}}}}}}}}"#
    );
    let back = to_client(r.engine.on_server(&hostile));
    let (id, code, gate_code) = error_of(&back);
    assert_eq!(id, json!(3));
    assert_eq!(code, PEER_REFUSED, "{back}");
    assert!(!back.contains("javascript"), "{back}");
    assert!(!gate_code.is_empty());
    assert_eq!((r.engine.in_flight(), r.engine.open_rounds()), (0, 0));
}

#[test]
fn a_request_the_gate_refuses_never_goes_upstream() {
    let mut r = rig();
    // A retry of no round, and a call without params: both refused (caller).
    let retry = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"book","arguments":{},"inputResponses":{},"requestState":"opaque"}}"#;
    let (id, code, gate_code) = error_of(&to_client(r.engine.on_client(retry)));
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!(4), CALLER_REFUSED, "inactive_mrtr_round")
    );
    let bare = r#"{"jsonrpc":"2.0","id":"b","method":"resources/read"}"#;
    let (id, code, _) = error_of(&to_client(r.engine.on_client(bare)));
    assert_eq!((id, code), (json!("b"), CALLER_REFUSED));
    assert_eq!(r.engine.in_flight(), 0);
}

#[test]
fn hostile_client_messages_are_refused_by_the_proxy() {
    let mut r = rig();
    for (text, id) in [
        (format!("[{}]", call("1")), json!(null)),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{}}"#.to_owned(),
            json!(null),
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}"#.to_owned(),
            json!(null),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{}}"#.to_owned(),
            json!(null),
        ),
        (
            call(r#""mg:0000000000000abc:1""#),
            json!("mg:0000000000000abc:1"),
        ),
    ] {
        let (got, code, _) = error_of(&to_client(r.engine.on_client(&text)));
        assert_eq!((got, code), (id, MESSAGE_REFUSED), "{text}");
    }
    assert_eq!(r.engine.in_flight(), 0);
}

#[test]
fn ungated_messages_pass_both_ways_unchanged() {
    let mut r = rig();
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ] {
        assert_eq!(r.engine.on_client(text), Action::ToServer(text.into()));
    }
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    ] {
        assert_eq!(r.engine.on_server(text), Action::ToClient(text.into()));
    }
    // The client's answer to the server's ping goes upstream, once.
    let pong = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
    assert_eq!(r.engine.on_client(pong), Action::ToServer(pong.into()));
    assert!(matches!(r.engine.on_client(pong), Action::Drop(_)));
}

#[test]
fn the_client_answers_only_the_server_requests_it_was_shown() {
    let mut r = rig();
    // The proxy refuses this one itself; the client must not answer it in its stead.
    let ask = r#"{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{}}"#;
    assert!(matches!(r.engine.on_server(ask), Action::ToServer(_)));
    let forged =
        r#"{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{"pin":"1234"}}}"#;
    assert!(matches!(r.engine.on_client(forged), Action::Drop(_)));
    let unasked = r#"{"jsonrpc":"2.0","id":9,"result":{}}"#;
    assert!(matches!(r.engine.on_client(unasked), Action::Drop(_)));
}

#[test]
fn an_old_servers_own_input_requests_are_answered_unknown_and_never_reach_the_client() {
    let mut r = rig();
    let ask = r#"{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{}}"#;
    let Action::ToServer(answer) = r.engine.on_server(ask) else {
        panic!("the server is answered");
    };
    let v: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!("s1"), json!(-32601))
    );
    // And the refusal is in the trail.
    let refused: Vec<Value> = r
        .audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "rejected")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (refused[0]["reason"].clone(), refused[0]["method"].clone()),
        (json!("legacy_server_request"), json!("elicitation/create"))
    );
}

#[test]
fn responses_under_duplicate_ids_or_unreadable_go_to_the_gate_when_one_call_waits() {
    let mut r = rig();
    let minted = sent_id(&r.engine.on_client(&call("5")));
    let twice = format!(r#"{{"jsonrpc":"2.0","id":{minted},"id":{minted},"result":{{}}}}"#);
    let (id, code, _) = error_of(&to_client(r.engine.on_server(&twice)));
    assert_eq!((id, code), (json!(5), PEER_REFUSED));
    // With two calls waiting an unreadable message is nobody's.
    sent_id(&r.engine.on_client(&call("6")));
    sent_id(&r.engine.on_client(&call("7")));
    assert!(matches!(r.engine.on_server("{not json"), Action::Drop(_)));
    assert_eq!(r.engine.in_flight(), 2);
}

#[test]
fn many_calls_in_flight_are_answered_each_under_its_own_id() {
    let mut r = rig();
    let minted: Vec<(String, String)> = (0..20)
        .map(|n| {
            let client = if n % 2 == 0 {
                n.to_string()
            } else {
                format!("\"{n}\"")
            };
            let up = sent_id(&r.engine.on_client(&call(&client)));
            (client, up)
        })
        .collect();
    // Answered in reverse: each goes back under its own client id.
    for (client, up) in minted.iter().rev() {
        assert_eq!(
            to_client(r.engine.on_server(&complete(up))),
            complete(client)
        );
    }
    // A second answer to an ended call is never judged twice, nor shown to the client.
    let (_, up) = &minted[0];
    assert!(matches!(r.engine.on_server(&complete(up)), Action::Drop(_)));
}

#[test]
fn a_server_that_goes_away_ends_every_call_with_an_error() {
    let mut r = rig();
    let a = sent_id(&r.engine.on_client(&call("1")));
    to_client(r.engine.on_server(&form_round(&a)));
    sent_id(&r.engine.on_client(&call("2")));
    let mut ids: Vec<Value> = r
        .engine
        .on_server_gone()
        .iter()
        .map(|text| {
            let (id, code, gate_code) = error_of(text);
            assert_eq!(
                (code, gate_code.as_str()),
                (UPSTREAM_FAILED, "server_closed")
            );
            id
        })
        .collect();
    ids.sort_by_key(Value::as_i64);
    // Call 1's round was answered already: only call 2 is told.
    assert_eq!(ids, vec![json!(2)]);
    assert_eq!((r.engine.in_flight(), r.engine.open_rounds()), (0, 0));
}

mod retry;

#[test]
fn only_a_response_the_client_waits_on_reaches_it() {
    let mut r = rig();
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    assert_eq!(r.engine.on_client(list), Action::ToServer(list.into()));
    // Not asked for: another id, the same id again, a null id, an id of another JSON type.
    for unasked in [
        r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":"1","result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
    ] {
        assert!(
            matches!(r.engine.on_server(unasked), Action::Drop(_)),
            "{unasked}"
        );
    }
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
    assert_eq!(r.engine.on_server(answer), Action::ToClient(answer.into()));
    assert!(
        matches!(r.engine.on_server(answer), Action::Drop(_)),
        "once"
    );
}

#[test]
fn a_server_answering_a_gated_call_under_the_clients_id_is_dropped_and_audited() {
    let mut r = rig();
    let minted = sent_id(&r.engine.on_client(&call("0")));
    // A result the client would take with no gate behind it: a miscased state, an extra
    // envelope member.
    let around = r#"{"jsonrpc":"2.0","id":0,"result":{"resultType":"complete","RequestState":"x","content":[]},"extra":1}"#;
    assert!(matches!(r.engine.on_server(around), Action::Drop(_)));
    let refused: Vec<Value> = r
        .audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "rejected")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["reason"], json!("no_live_request"));
    // The gate still holds the call: its own answer, under the minted id, is judged.
    assert_eq!(r.engine.in_flight(), 1);
    let back = to_client(r.engine.on_server(&complete(&minted)));
    assert_eq!(back, complete("0"));
    // Once the call has been answered its id names nothing the client waits on.
    assert!(matches!(
        r.engine.on_server(&complete("0")),
        Action::Drop(_)
    ));
}

#[test]
fn a_server_gone_answers_the_clients_ungated_requests_too() {
    let mut r = rig();
    let list = r#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#;
    r.engine.on_client(list);
    let replies = r.engine.on_server_gone();
    assert_eq!(replies.len(), 1, "{replies:?}");
    let (id, code, gate_code) = error_of(&replies[0]);
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!("l"), UPSTREAM_FAILED, "server_closed")
    );
}

#[test]
fn a_client_that_never_reads_its_answers_cannot_grow_the_proxy_without_bound() {
    let mut r = rig();
    for n in 0..MAX_RELAYED {
        let ping = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
        assert!(matches!(r.engine.on_client(&ping), Action::ToServer(_)));
    }
    let one_more = r#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#;
    let (id, code, gate_code) = error_of(&to_client(r.engine.on_client(one_more)));
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!("x"), MESSAGE_REFUSED, "too_many_in_flight")
    );
    // An answer frees its place.
    let pong = r#"{"jsonrpc":"2.0","id":0,"result":{}}"#;
    assert_eq!(r.engine.on_server(pong), Action::ToClient(pong.into()));
    assert!(matches!(r.engine.on_client(one_more), Action::ToServer(_)));
}

#[test]
fn input_channels_no_round_binds_are_refused() {
    let mut r = rig();
    // A task's answers (`tasks/update`, any casing, at any depth) never reach the server.
    for update in [
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/update","params":{"taskId":"t1","inputResponses":{"a":{"action":"accept","content":{"pin":"1234"}}}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/update","params":{"taskId":"t1","update":{"InputResponses":{}}}}"#,
    ] {
        let (id, code, gate_code) = error_of(&to_client(r.engine.on_client(update)));
        assert_eq!(
            (id, code, gate_code.as_str()),
            (json!(4), CALLER_REFUSED, "input_responses_not_bound")
        );
    }
    let note =
        r#"{"jsonrpc":"2.0","method":"notifications/tasks/answer","params":{"inputResponses":{}}}"#;
    assert!(matches!(r.engine.on_client(note), Action::Drop(_)));
    // Data that names such a member deeper (a tool's schema) is no channel: it passes.
    let list = r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#;
    assert_eq!(r.engine.on_client(list), Action::ToServer(list.into()));
    let tools = r#"{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"inputRequests":{"type":"string"}}}}]}}"#;
    assert_eq!(r.engine.on_server(tools), Action::ToClient(tools.into()));
    // A task that asks for input, on an ungated answer or a notification, never reaches the
    // client.
    r.engine
        .on_client(r#"{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"t1"}}"#);
    let task = r#"{"jsonrpc":"2.0","id":5,"result":{"taskId":"t1","status":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://evil.example/"}}}}}"#;
    let (id, code, gate_code) = error_of(&to_client(r.engine.on_server(task)));
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!(5), PEER_REFUSED, "input_required_not_allowed")
    );
    let status = r#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"task":{"status":"input_required","inputRequests":{}}}}"#;
    assert!(matches!(r.engine.on_server(status), Action::Drop(_)));
    // A 2025-11-25 URL elicitation error, on an ungated answer...
    r.engine
        .on_client(r#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#);
    let url_error = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32042,"message":"authorise","data":{{"elicitations":[{{"mode":"url","url":"https://evil.example/","message":"m","elicitationId":"e"}}]}}}}}}"#
        )
    };
    let (_, code, gate_code) = error_of(&to_client(r.engine.on_server(&url_error("6"))));
    assert_eq!(
        (code, gate_code.as_str()),
        (PEER_REFUSED, "input_required_not_allowed")
    );
    // ...and on a gated call: the gate ends the binding, the URL stays behind.
    let minted = sent_id(&r.engine.on_client(&call("7")));
    let back = to_client(r.engine.on_server(&url_error(&minted)));
    assert!(!back.contains("evil.example"), "{back}");
    let (id, code, gate_code) = error_of(&back);
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!(7), PEER_REFUSED, "input_required_not_allowed")
    );
    assert_eq!(r.engine.in_flight(), 0);
    // Every refusal is in the trail, under the client's principal; the gated call's is the
    // gate's own: its binding refused and ended (`terminal`, outcome error) by the core.
    let events = r.audit.events();
    let refused: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "rejected")
        .map(|e| e["reason"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        refused,
        [
            "input_responses_not_bound",
            "input_responses_not_bound",
            "input_responses_not_bound",
            "input_required_not_allowed",
            "input_requests_not_bound",
            "input_required_not_allowed",
            "input_required_not_allowed",
        ]
    );
    let ended: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["event"] == "terminal")
        .map(|e| (&e["outcome"], &e["reason"]))
        .collect();
    assert_eq!(
        ended,
        [(&json!("error"), &json!("input_required_not_allowed"))]
    );
    assert!(
        events
            .iter()
            .all(|e| e["user_sha256"] == events[0]["user_sha256"]
                && e["tenant_sha256"] == events[0]["tenant_sha256"])
    );
}

#[test]
fn a_gated_calls_url_elicitation_error_is_refused_even_when_ungated_input_is_let_through() {
    let mut r = rig();
    r.engine.config.allow_ungated_input = true;
    let minted = sent_id(&r.engine.on_client(&call("9")));
    let url_error = format!(
        r#"{{"jsonrpc":"2.0","id":{minted},"error":{{"code":-32042,"message":"authorise","data":{{"elicitations":[{{"mode":"url","url":"https://evil.example/","message":"m"}}]}}}}}}"#
    );
    let back = to_client(r.engine.on_server(&url_error));
    assert!(!back.contains("evil.example"), "{back}");
    let (id, code, gate_code) = error_of(&back);
    assert_eq!(
        (id, code, gate_code.as_str()),
        (json!(9), PEER_REFUSED, "input_required_not_allowed")
    );
}

#[test]
fn an_operator_may_let_them_through_loudly() {
    let mut r = rig();
    r.engine.config.allow_ungated_input = true;
    let update = r#"{"jsonrpc":"2.0","id":4,"method":"tasks/update","params":{"taskId":"t1","inputResponses":{}}}"#;
    assert_eq!(r.engine.on_client(update), Action::ToServer(update.into()));
    let task = r#"{"jsonrpc":"2.0","id":4,"result":{"taskId":"t1","status":"input_required","inputRequests":{}}}"#;
    assert_eq!(r.engine.on_server(task), Action::ToClient(task.into()));
}

#[test]
fn a_principal_at_its_cap_of_open_rounds_gets_no_more_and_others_do() {
    let mut r = rig();
    let alice = r.engine.config.principal.clone();
    let bob = Principal {
        user: "bob".into(),
        tenant: "acme".into(),
    };
    let round_for = |r: &mut Rig, who: &Principal, id: usize| {
        let minted = sent_id(&r.engine.on_client_as(who, &call(&id.to_string())));
        to_client(r.engine.on_server_as(who, &form_round(&minted)))
    };
    for n in 0..MAX_OPEN_ROUNDS {
        let delivered = round_for(&mut r, &alice, n);
        assert!(delivered.contains("input_required"), "{delivered}");
    }
    assert_eq!(r.engine.open_rounds(), MAX_OPEN_ROUNDS);
    let (id, code, gate_code) = error_of(&round_for(&mut r, &alice, MAX_OPEN_ROUNDS));
    assert_eq!(
        (id, code, gate_code.as_str()),
        (
            json!(MAX_OPEN_ROUNDS),
            MESSAGE_REFUSED,
            "too_many_open_rounds"
        )
    );
    // Its binding ended, on record; nothing of it stays.
    let last = r.audit.events().pop().unwrap();
    assert_eq!(
        (last["event"].clone(), last["reason"].clone()),
        (json!("terminal"), json!("too_many_open_rounds"))
    );
    assert_eq!(r.engine.open_rounds(), MAX_OPEN_ROUNDS);
    assert_eq!(r.engine.in_flight(), 0);
    // Bob is not Alice.
    let bobs = round_for(&mut r, &bob, 1);
    assert!(bobs.contains("input_required"), "{bobs}");
}

/// The count the process registry renders for refusals of `code` (its `cause`).
fn refusals_counted(cause: &str, code: &str) -> u64 {
    let series = format!("mrtr_gate_refusals_total{{cause=\"{cause}\",code=\"{code}\"}} ");
    crate::metrics::global()
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_refusal_recorded_for_a_dropped_message_is_counted_as_one_sent_is() {
    let mut r = rig();
    // Other tests of the process count into the same registry at the same time: only ever up.
    let (before_dropped, before_sent) = (
        refusals_counted("peer", "input_requests_not_bound"),
        refusals_counted("caller", "input_responses_not_bound"),
    );
    let status = r#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"task":{"status":"input_required","inputRequests":{}}}}"#;
    assert!(matches!(r.engine.on_server(status), Action::Drop(_)));
    let update = r#"{"jsonrpc":"2.0","id":4,"method":"tasks/update","params":{"taskId":"t1","inputResponses":{}}}"#;
    assert!(matches!(r.engine.on_client(update), Action::ToClient(_)));
    assert!(refusals_counted("peer", "input_requests_not_bound") > before_dropped);
    assert!(refusals_counted("caller", "input_responses_not_bound") > before_sent);
}
