//! Redis losing what it held while two gates (each with its own connection and its own
//! record cache, as two processes) share it: restarted empty, flushed (`FLUSHALL`), and with
//! only its version counters evicted (`DEL`). Gate A holds round R; R is used through gate B
//! and its request completes; then Redis loses its data or its counter, and a new request
//! with the same id reaches, under the same key, as many writes as R's binding had when A
//! cached it. A plain counter would hand out the version A holds, and A's cache would
//! answer R a second time; a version that carries the counter's life never comes round
//! again, so A judges what Redis holds now. Each case on a redis-server of the test's own.

#![cfg(test)]

mod support;

use mrtr_gate_host::core::host::{Storage, Write};
use mrtr_gate_host::core::{Policy, Registration, RequestId, ResponseVerdict, RetryRequest};
use mrtr_gate_host::core::{ServerIdentity, host::Clock};
use mrtr_gate_host::reference_hosts::{MemoryAudit, ScriptedAnswer, ScriptedConsent, SystemClock};
use mrtr_gate_host::{GateApi, GateDenial, HostServices};
use mrtr_gate_redis::RedisStorage;
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::sync::Arc;
use support::OwnRedis;

const NAMESPACE: &str = "versions";

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://versions.example.com/mcp").unwrap()
}

/// A gate with its own Redis connection and its own cache; the trail is shared.
fn gate(runtime: &GateRuntime, url: &str, audit: &MemoryAudit) -> ComponentGate {
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(SystemClock);
    let services = HostServices {
        clock: clock.clone(),
        storage: Arc::new(RedisStorage::connect(url, NAMESPACE, clock).unwrap()),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
        audit: Arc::new(audit.clone()),
    };
    ComponentGate::new(runtime, services)
}

/// `call`, once more if the first attempt met the connection Redis dropped when it
/// restarted (a host fault, denied as such; the next call reconnects).
fn again_after_reconnect<T>(
    mut call: impl FnMut() -> Result<T, GateDenial>,
) -> Result<T, GateDenial> {
    match call() {
        Err(d) if d.code == "storage_failed" => call(),
        other => other,
    }
}

fn register(g: &mut ComponentGate) -> Result<(), GateDenial> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    g.register(Registration {
        request_id: RequestId::Number(1),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: json!({"name": "book", "arguments": {}, "_meta": meta}).to_string(),
        policy: Policy::default(),
    })
    .map(|_| ())
}

fn round(state: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "inputRequests": {"seat": {"method": "elicitation/create", "params": {
            "message": "Pick a seat", "requestedSchema": {"type": "object",
            "properties": {"seat": {"type": "string", "maxLength": 4}}, "required": ["seat"]}}}},
        "requestState": state}})
    .to_string()
}

fn retry(g: &mut ComponentGate, retry_id: i64) -> Result<String, GateDenial> {
    g.build_retry(RetryRequest {
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(retry_id),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        responses_json: json!({"seat": {"action": "accept", "content": {"seat": "12A"}}})
            .to_string(),
    })
    .map(|r| r.request_json)
}

fn state_of(retry_json: &str) -> Value {
    serde_json::from_str::<Value>(retry_json).unwrap()["params"]["requestState"].clone()
}

fn connection(redis: &OwnRedis) -> redis::Connection {
    redis::Client::open(redis.url().as_str())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// What Redis loses after R was used.
#[derive(Clone, Copy, Debug)]
enum Loss {
    RestartedEmpty,
    Flushed,
    CounterEvicted,
}

fn lose(redis: &mut OwnRedis, loss: Loss) {
    match loss {
        Loss::RestartedEmpty => {
            redis.down();
            redis.up();
        }
        Loss::Flushed => {
            let () = redis::cmd("FLUSHALL")
                .query(&mut connection(redis))
                .unwrap();
        }
        Loss::CounterEvicted => {
            // Every key of the namespace that is neither a value nor a due set: the counters
            // (whatever their name), as an eviction would drop them.
            let mut c = connection(redis);
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{NAMESPACE}:*}}#*"))
                .query(&mut c)
                .unwrap();
            let counters: Vec<&String> = keys.iter().filter(|k| !k.ends_with("#due")).collect();
            assert!(!counters.is_empty(), "no counter among {keys:?}");
            for k in counters {
                let _: i64 = redis::cmd("DEL").arg(k).query(&mut c).unwrap();
            }
        }
    }
}

fn no_second_retry_after(loss: Loss) {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let runtime = GateRuntime::embedded().unwrap();
    let audit = MemoryAudit::new();
    let (mut a, mut b) = (
        gate(&runtime, &redis.url(), &audit),
        gate(&runtime, &redis.url(), &audit),
    );
    // A holds round R.
    register(&mut a).unwrap();
    let r_view = match a.accept_response(&server(), &round("S1")) {
        Ok(ResponseVerdict::InputRequired(v)) => v,
        other => panic!("round R: {other:?}"),
    };
    // R is used through B, and its request completes there.
    let used = retry(&mut b, 2).unwrap_or_else(|d| panic!("B's retry of R: {d}"));
    assert_eq!(state_of(&used), "S1");
    let done = json!({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}).to_string();
    assert_eq!(
        b.accept_response(&server(), &done).unwrap(),
        ResponseVerdict::Complete
    );
    lose(&mut redis, loss);
    // A new request 1 on the same server, through B: a new binding under R's key, with as
    // many writes as R's binding had when A cached it.
    again_after_reconnect(|| register(&mut b))
        .unwrap_or_else(|d| panic!("{loss:?}: the new binding: {d}"));
    match b.accept_response(&server(), &round("S2")) {
        Ok(ResponseVerdict::InputRequired(v)) => assert_ne!(v.view_sha256, r_view.view_sha256),
        other => panic!("{loss:?}: the new binding's round: {other:?}"),
    }
    // A retries R from its cache: R never goes out a second time.
    match again_after_reconnect(|| retry(&mut a, 3)) {
        Ok(sent) => assert_eq!(
            state_of(&sent),
            "S2",
            "{loss:?}: round R was retried a second time: {sent}"
        ),
        Err(d) => eprintln!("{loss:?}: A's retry denied: {d}"),
    }
    let submitted_r = audit
        .events()
        .iter()
        .filter(|e| e["event"] == "submitted" && e["view_sha256"] == r_view.view_sha256.as_str())
        .count();
    assert_eq!(submitted_r, 1, "{loss:?}: round R submitted exactly once");
}

#[test]
fn redis_restarted_empty_never_lets_a_used_round_be_retried_again() {
    no_second_retry_after(Loss::RestartedEmpty);
}

#[test]
fn redis_flushed_never_lets_a_used_round_be_retried_again() {
    no_second_retry_after(Loss::Flushed);
}

#[test]
fn redis_that_evicted_its_version_counter_never_lets_a_used_round_be_retried_again() {
    no_second_retry_after(Loss::CounterEvicted);
}

/// A restart from a snapshot keeps the counter as it was when the snapshot was taken, not
/// the writes after it: counting on from there would hand out again the versions written
/// since. The counter remembers the run of the server that last wrote it, and a new run
/// starts a new epoch.
#[test]
fn redis_restarted_from_a_snapshot_never_hands_out_a_version_again() {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(SystemClock);
    let store = RedisStorage::connect(&redis.url(), NAMESPACE, clock).unwrap();
    let key = |id: u32| format!("mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/{id}");
    let insert = |id: u32| {
        let k = key(id);
        let write = Write {
            key: &k,
            expected: 0,
            value: Some("v"),
            ttl_ms: 60_000,
        };
        // Once more after the connection a restart dropped.
        store
            .write(&[write])
            .or_else(|_| store.write(&[write]))
            .unwrap()[0]
    };
    let before = insert(1);
    let () = redis::cmd("SAVE").query(&mut connection(&redis)).unwrap();
    let since = insert(2);
    redis.down();
    redis.up();
    let after = insert(3);
    assert_ne!(
        after, since,
        "a version handed out after the snapshot came back"
    );
    assert_ne!(
        after >> 32,
        before >> 32,
        "the restarted server counts on in the old epoch"
    );
}
