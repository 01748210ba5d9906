//! Redis failing under the gate: stopped, blocked (`DEBUG SLEEP`) and restarted empty, each on
//! a redis-server of the test's own (spawned here, so stopping it disturbs no other test).
//! Every fault is a denial blamed on the host (`storage_failed`), never a verdict, and once
//! Redis is back the gate works again; a restart that lost the store loses the bindings with
//! it, which then deny (`no_live_request`), never pass.

#![cfg(test)]

use mrtr_gate_host::core::{
    ErrorCause, Policy, Registration, RequestId, ResponseVerdict, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::{MemoryAudit, ScriptedAnswer, ScriptedConsent, SystemClock};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
mod support;

use mrtr_gate_redis::RedisStorage;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::OwnRedis;

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://faults.example.com/mcp").unwrap()
}

fn gate(url: &str) -> ComponentGate {
    let clock = Arc::new(SystemClock);
    let storage = RedisStorage::connect(url, "faults", clock.clone()).unwrap();
    let services = HostServices {
        clock,
        storage: Arc::new(storage),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
        audit: Arc::new(MemoryAudit::new()),
    };
    ComponentGate::new(&GateRuntime::embedded().unwrap(), services)
}

fn register(g: &mut ComponentGate, id: i64) -> Result<(), String> {
    let meta = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    g.register(Registration {
        request_id: RequestId::Number(id),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: serde_json::json!({"name": "t", "_meta": meta}).to_string(),
        policy: Policy::default(),
    })
    .map(|_| ())
    .map_err(|d| d.code.to_string())
}

fn state_round(id: i64) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required", "requestState": "s"}}).to_string()
}

#[test]
fn a_stopped_redis_denies_and_a_restarted_empty_one_loses_the_binding_not_the_check() {
    let Some(mut redis) = OwnRedis::start() else {
        return;
    };
    let mut g = gate(&redis.url());
    register(&mut g, 1).unwrap();
    redis.down();
    let denied = g.accept_response(&server(), &state_round(1)).unwrap_err();
    assert_eq!(
        (denied.code.as_str(), denied.cause),
        ("storage_failed", ErrorCause::Host),
        "{denied}"
    );
    assert_eq!(register(&mut g, 2), Err("storage_failed".into()));
    // Back, but empty (no persistence): the binding is gone, so its round is refused.
    redis.up();
    let denied = g.accept_response(&server(), &state_round(1)).unwrap_err();
    assert_eq!(denied.code, "no_live_request", "{denied}");
    // And the gate works again on the fresh store.
    register(&mut g, 3).unwrap();
    assert!(matches!(
        g.accept_response(&server(), &state_round(3)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
}

#[test]
fn a_blocked_redis_times_out_into_a_denial_and_the_next_call_reconnects() {
    let Some(redis) = OwnRedis::start() else {
        return;
    };
    let mut g = gate(&redis.url());
    register(&mut g, 1).unwrap();
    let url = redis.url();
    let blocker = std::thread::spawn(move || {
        let mut c = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: redis::RedisResult<()> = redis::cmd("DEBUG").arg("SLEEP").arg(3).query(&mut c);
    });
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let denied = g.accept_response(&server(), &state_round(1)).unwrap_err();
    assert_eq!(
        (denied.code.as_str(), denied.cause),
        ("storage_failed", ErrorCause::Host),
        "{denied}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the store's timeout bounds the wait"
    );
    blocker.join().unwrap();
    // The round arrived while the store was unreachable; once it is back the same round is
    // judged normally (the binding was never touched).
    assert!(matches!(
        g.accept_response(&server(), &state_round(1)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
}
