//! The component over Redis (bindings and the shared trail both on a redis-server of the
//! test's own) under the faults of the host's other services and of the sandbox: consent that
//! fails, refuses, answers for another prompt or decides too late; a clock that jumps forwards,
//! backwards, to 0 or to `u64::MAX`; a guest that runs out of fuel or memory or meets deep JSON;
//! and Redis pausing its writes in the middle of a retry. Each fault denies; where the sink
//! still works the denial is on record; no round is ever retried twice; and the trail read
//! back from Redis verifies and reconciles.

#![cfg(test)]

mod support;

use mrtr_gate_host::core::audit::verify_chain;
use mrtr_gate_host::core::host::{Clock, Consent, ConsentPrompt, ConsentReceipt, HostError};
use mrtr_gate_host::core::reconcile::{Reconciliation, reconcile};
use mrtr_gate_host::core::{
    CLOCK_SKEW_TOLERANCE_MS, ErrorCause, Policy, Registration, RequestId, ResponseVerdict, Retry,
    RetryRequest, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::{ManualClock, ScriptedAnswer, ScriptedConsent, SystemClock};
use mrtr_gate_host::{GateApi, GateDenial, HostServices};
use mrtr_gate_redis::{RedisAudit, RedisStorage};
use mrtr_gate_wasmtime::runtime::{CallBudget, SandboxLimits};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::OwnRedis;

const T0: u64 = 1_700_000_000_000;

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://gate-faults.example.com/mcp").unwrap()
}

/// A gate over its own Redis, and a second connection to read the trail back.
struct Rig {
    gate: ComponentGate,
    trail: RedisAudit,
    _redis: OwnRedis,
}

impl Rig {
    fn new(
        clock: Arc<dyn Clock + Send + Sync>,
        consent: Arc<dyn Consent + Send + Sync>,
        runtime: &GateRuntime,
    ) -> Option<Self> {
        let redis = OwnRedis::start()?;
        let url = redis.url();
        let services = HostServices {
            clock: clock.clone(),
            storage: Arc::new(RedisStorage::connect(&url, "gf", clock).unwrap()),
            consent,
            audit: Arc::new(RedisAudit::connect(&url, "gf", "trail").unwrap()),
        };
        Some(Self {
            gate: ComponentGate::new(runtime, services),
            trail: RedisAudit::connect(&url, "gf", "trail").unwrap(),
            _redis: redis,
        })
    }

    fn register(&mut self, id: i64, lifetime_ms: u64) -> Result<(), GateDenial> {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
        self.gate
            .register(Registration {
                request_id: RequestId::Number(id),
                server: server(),
                user: "alice".into(),
                tenant: "acme".into(),
                method: "tools/call".into(),
                params_json: json!({"name": "book", "arguments": {}, "_meta": meta}).to_string(),
                policy: Policy {
                    round_trip_lifetime_ms: lifetime_ms,
                    ..Policy::default()
                },
            })
            .map(|_| ())
    }

    fn respond(&mut self, text: &str) -> Result<ResponseVerdict, GateDenial> {
        self.gate.accept_response(&server(), text)
    }

    fn retry(&mut self, id: i64, retry_id: i64) -> Result<Retry, GateDenial> {
        self.gate.build_retry(RetryRequest {
            request_id: RequestId::Number(id),
            retry_id: RequestId::Number(retry_id),
            server: server(),
            user: "alice".into(),
            tenant: "acme".into(),
            responses_json: json!({"seat": {"action": "accept", "content": {"seat": "12A"}}})
                .to_string(),
        })
    }

    /// The trail as Redis holds it: an intact chain, reconciled.
    fn reconciled(&self) -> (Vec<String>, Reconciliation) {
        let lines = self.trail.lines().unwrap();
        verify_chain(lines.iter().map(String::as_str)).unwrap();
        let report = reconcile(lines.iter().map(String::as_str));
        assert!(report.chain_break.is_none(), "{report:?}");
        assert!(
            report.double_use.is_empty(),
            "a round used twice: {report:?}"
        );
        (lines, report)
    }
}

fn form_round(id: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
        "inputRequests": {"seat": {"method": "elicitation/create", "params": {
            "message": "Pick a seat", "requestedSchema": {"type": "object",
            "properties": {"seat": {"type": "string", "maxLength": 4}}, "required": ["seat"]}}}},
        "requestState": "opaque-state"}})
    .to_string()
}

fn complete(id: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "booked"}]}})
        .to_string()
}

fn denied<T: std::fmt::Debug>(r: Result<T, GateDenial>, code: &str) -> GateDenial {
    let d = r.unwrap_err();
    assert_eq!(d.code, code, "{d}");
    d
}

fn events(lines: &[String], kind: &str) -> Vec<serde_json::Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == kind)
        .collect()
}

#[test]
fn consent_that_fails_refuses_or_answers_for_another_prompt_denies_on_record_and_the_round_goes_out_once()
 {
    let consent = Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant));
    let rt = GateRuntime::embedded().unwrap();
    let Some(mut rig) = Rig::new(Arc::new(SystemClock), consent.clone(), &rt) else {
        return;
    };
    rig.register(1, 60_000).unwrap();
    assert!(matches!(
        rig.respond(&form_round(1)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    for (answer, code) in [
        (ScriptedAnswer::Fail, "consent_unavailable"),
        (ScriptedAnswer::GrantOtherView, "consent_mismatch"),
        (ScriptedAnswer::GrantOtherAnswers, "consent_mismatch"),
        (ScriptedAnswer::Refuse, "consent_refused"),
    ] {
        consent.push(answer);
        let d = denied(rig.retry(1, 2), code);
        assert!(
            d.audited,
            "the sink works, so the refusal is on record: {d}"
        );
    }
    let retry = rig.retry(1, 2).unwrap();
    assert!(
        retry
            .request_json
            .contains("\"requestState\":\"opaque-state\"")
    );
    denied(rig.retry(1, 3), "inactive_mrtr_round");
    assert!(matches!(
        rig.respond(&complete(2)),
        Ok(ResponseVerdict::Complete)
    ));
    let (lines, report) = rig.reconciled();
    assert!(report.open.is_empty(), "{report:?}");
    assert_eq!(events(&lines, "submitted").len(), 1, "one retry");
    for code in ["consent_unavailable", "consent_mismatch", "consent_refused"] {
        assert!(report.refused.contains_key(code), "{code}: {report:?}");
    }
}

/// A user who takes longer than the binding's lifetime to decide.
struct SlowUser(ScriptedConsent, Duration);

impl Consent for SlowUser {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        std::thread::sleep(self.1);
        self.0.request_consent(prompt)
    }
}

#[test]
fn consent_that_comes_after_the_lifetime_sends_no_retry_and_the_trail_says_expired() {
    let consent = Arc::new(SlowUser(
        ScriptedConsent::new(ScriptedAnswer::Grant),
        Duration::from_millis(700),
    ));
    let rt = GateRuntime::embedded().unwrap();
    let Some(mut rig) = Rig::new(Arc::new(SystemClock), consent, &rt) else {
        return;
    };
    rig.register(1, 400).unwrap();
    assert!(matches!(
        rig.respond(&form_round(1)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    denied(rig.retry(1, 2), "inactive_mrtr_round");
    denied(rig.retry(1, 3), "inactive_mrtr_round");
    let (lines, _) = rig.reconciled();
    assert!(events(&lines, "submitted").is_empty(), "no retry went out");
    let terminal = events(&lines, "terminal");
    assert_eq!(terminal.len(), 1, "{lines:?}");
    assert_eq!(terminal[0]["outcome"], "expired");
}

#[test]
fn a_clock_at_u64_max_at_0_set_back_or_jumping_past_the_lifetime_denies_and_never_retries_twice() {
    let clock = Arc::new(ManualClock::new(T0));
    let consent = Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant));
    let rt = GateRuntime::embedded().unwrap();
    let Some(mut rig) = Rig::new(clock.clone(), consent, &rt) else {
        return;
    };
    // A clock a binding wrapped from -1: every operation denies, unaudited, and changes nothing.
    clock.set(u64::MAX);
    let d = denied(rig.register(1, 60_000), "clock_out_of_range");
    assert!(!d.audited);
    clock.set(T0);
    rig.register(1, 60_000).unwrap();
    assert!(matches!(
        rig.respond(&form_round(1)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let before = rig.trail.lines().unwrap().len();
    clock.set(u64::MAX);
    assert!(!denied(rig.retry(1, 2), "clock_out_of_range").audited);
    assert_eq!(rig.trail.lines().unwrap().len(), before, "nothing written");
    // Back to 0, or an hour back: the binding's lifetime cannot be judged on that clock.
    for back in [0, T0 - 3_600_000, T0 - CLOCK_SKEW_TOLERANCE_MS - 1] {
        clock.set(back);
        let d = denied(rig.retry(1, 2), "clock_behind_binding");
        assert_eq!(d.cause, ErrorCause::Host);
        assert!(d.audited, "{d}");
    }
    // Forwards past the lifetime: expired, on record, the round gone for good.
    clock.set(T0 + 60_000);
    denied(rig.retry(1, 2), "inactive_mrtr_round");
    clock.set(T0 + 1);
    denied(rig.retry(1, 3), "inactive_mrtr_round");
    let (lines, report) = rig.reconciled();
    assert!(events(&lines, "submitted").is_empty());
    assert_eq!(report.expired.len(), 1, "{report:?}");
    let behind = events(&lines, "rejected")
        .into_iter()
        .filter(|e| e["reason"] == "clock_behind_binding")
        .count();
    assert_eq!(behind, 3);
}

#[test]
fn a_guest_out_of_fuel_or_memory_or_fed_deep_json_denies_and_a_fresh_instance_carries_on_from_redis()
 {
    let consent = Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant));
    let fuel = SandboxLimits {
        budget: CallBudget::Fuel(2_000_000_000),
        max_memory_bytes: 8 << 20,
        ..SandboxLimits::default()
    };
    let rt = GateRuntime::load_embedded(None, fuel).unwrap();
    let Some(mut rig) = Rig::new(Arc::new(SystemClock), consent, &rt) else {
        return;
    };
    rig.register(1, 60_000).unwrap();
    rig.gate.set_budget(CallBudget::Fuel(1_000)).unwrap();
    let d = denied(rig.respond(&form_round(1)), "guest_out_of_fuel");
    assert_eq!(d.cause, ErrorCause::Host);
    rig.gate.set_budget(fuel.budget).unwrap();
    // 7 MiB of state: inside the 64 MiB message bound, over the instance's 8 MiB memory.
    let huge = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "requestState": "x".repeat(7 << 20)}})
    .to_string();
    let d = rig.respond(&huge).unwrap_err();
    assert!(
        ["guest_trapped", "limit_exceeded"].contains(&d.code.as_str()),
        "{d}"
    );
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"resultType\":\"input_required\",\"requestState\":\"s\",\"_meta\":{}{}}}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    denied(rig.respond(&deep), "limit_exceeded");
    // The binding lives in Redis: the next instance judges the round as if nothing happened.
    assert!(matches!(
        rig.respond(&form_round(1)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    rig.retry(1, 2).unwrap();
    denied(rig.retry(1, 3), "inactive_mrtr_round");
    let (lines, _) = rig.reconciled();
    assert_eq!(events(&lines, "submitted").len(), 1);
    assert!(rig.gate.traps() >= 1);
}

#[test]
fn redis_pausing_its_writes_mid_retry_denies_and_the_round_never_goes_out_twice() {
    let consent = Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant));
    let rt = GateRuntime::embedded().unwrap();
    let Some(mut rig) = Rig::new(Arc::new(SystemClock), consent, &rt) else {
        return;
    };
    rig.register(1, 60_000).unwrap();
    assert!(matches!(
        rig.respond(&form_round(1)),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    let url = rig._redis.url();
    let mut admin = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    // Reads still pass, every write waits: the consent event, the consuming swap.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1_500)
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    let d = rig.retry(1, 2).unwrap_err();
    assert_eq!(d.cause, ErrorCause::Host, "{d}");
    assert!(
        ["storage_failed", "audit_write_failed"].contains(&d.code.as_str()),
        "{d}"
    );
    std::thread::sleep(Duration::from_millis(1_700));
    // Whatever Redis did with the writes it held, the round yields at most one retry.
    let retries = [rig.retry(1, 3), rig.retry(1, 4)]
        .into_iter()
        .filter(Result::is_ok)
        .count();
    assert!(retries <= 1);
    let (lines, _) = rig.reconciled();
    assert_eq!(events(&lines, "submitted").len(), retries, "{lines:?}");
}
