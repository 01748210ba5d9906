//! Many processes, one store: the rounds of a race (`mrtr-gate-testkit race-worker`, run by
//! `host-harness/testkit/tests/race.rs`). One process opens rounds in a shared Redis namespace
//! ([`open_rounds`]); then several worker processes, each with its own component instance, its
//! own connection and its own audit file, attack every round at once ([`attack`]): a genuine
//! retry each (exactly one may win), a replay after a win, a retry id that collides with the
//! original id, and a submission as another user or under another tenant.

use mrtr_gate_host::core::host::{Consent, ConsentPrompt, ConsentReceipt, HostError};
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::{FileAudit, ScriptedAnswer, ScriptedConsent, SystemClock};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_redis::RedisStorage;
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// The server every raced round belongs to.
pub const SERVER: &str = "https://race.example.com/mcp";
/// The binding's user and tenant.
pub const USER: &str = "alice@example.com";
/// The tenant.
pub const TENANT: &str = "acme";

/// How a worker holds still so that the test can kill it at a chosen point.
#[derive(Clone, Copy, Debug, Default)]
pub struct Holds {
    /// Inside the consent prompt, before it answers: the round is not consumed yet.
    pub consent_ms: u64,
    /// After a retry was built (the round consumed), before the next step.
    pub after_win_ms: u64,
}

/// Grants, after printing `{"holding":"consent"}` and waiting (a user thinking it over).
struct HoldingConsent {
    hold: std::time::Duration,
    inner: ScriptedConsent,
}

impl Consent for HoldingConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        if !self.hold.is_zero() {
            say(&json!({"holding": "consent"}));
            std::thread::sleep(self.hold);
        }
        self.inner.request_consent(prompt)
    }
}

/// One line on stdout, flushed (the test reads it while the worker runs).
pub fn say(line: &Value) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn gate(
    runtime: &GateRuntime,
    redis: &str,
    namespace: &str,
    audit: &Path,
    consent_ms: u64,
) -> Result<ComponentGate, String> {
    let clock = Arc::new(SystemClock);
    let storage =
        RedisStorage::connect(redis, namespace, clock.clone()).map_err(|e| e.to_string())?;
    // `redis:<trail>` names one trail in Redis shared by every process; anything else is this
    // process's own file.
    let audit: Arc<dyn mrtr_gate_host::core::host::Audit + Send + Sync> =
        match audit.to_str().and_then(|a| a.strip_prefix("redis:")) {
            Some(trail) => Arc::new(
                mrtr_gate_redis::RedisAudit::connect(redis, namespace, trail)
                    .map_err(|e| e.to_string())?,
            ),
            None => Arc::new(FileAudit::open(audit).map_err(|e| crate::error_chain(&e))?),
        };
    Ok(ComponentGate::new(
        runtime,
        HostServices {
            clock,
            storage: Arc::new(storage),
            consent: Arc::new(HoldingConsent {
                hold: std::time::Duration::from_millis(consent_ms),
                inner: ScriptedConsent::new(ScriptedAnswer::Grant),
            }),
            audit,
        },
    ))
}

fn server() -> Result<ServerIdentity, String> {
    ServerIdentity::origin(SERVER).map_err(|e| e.to_string())
}

/// The answers every genuine retry sends.
pub fn answers() -> Value {
    json!({"who": {"action": "accept", "content": {"name": "Ada"}}})
}

/// Register rounds `1..=rounds` (lifetime `lifetime_ms`) and accept an `input_required`
/// round for each: afterwards each is open in the store, waiting for its retry.
pub fn open_rounds(
    runtime: &GateRuntime,
    redis: &str,
    namespace: &str,
    audit: &Path,
    first: i64,
    rounds: i64,
    lifetime_ms: u64,
) -> Result<(), String> {
    let mut g = gate(runtime, redis, namespace, audit, 0)?;
    let server = server()?;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    for id in first..first + rounds {
        g.register(Registration {
            request_id: RequestId::Number(id),
            server: server.clone(),
            user: USER.into(),
            tenant: TENANT.into(),
            method: "tools/call".into(),
            params_json: json!({"name": "book", "arguments": {"n": id}, "_meta": meta}).to_string(),
            policy: Policy {
                round_trip_lifetime_ms: lifetime_ms,
                ..Policy::default()
            },
        })
        .map_err(|d| d.to_string())?;
        let round = json!({"jsonrpc": "2.0", "id": id, "result": {
            "resultType": "input_required",
            "inputRequests": {"who": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "Who?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}},
            "requestState": format!("state-{id}")}});
        match g
            .accept_response(&server, &round.to_string())
            .map_err(|d| d.to_string())?
        {
            ResponseVerdict::InputRequired(_) => {}
            other => return Err(format!("round {id}: {other:?}")),
        }
    }
    Ok(())
}

/// Attack rounds `first..first + rounds` as worker `worker`, starting at `start_at_ms` (Unix
/// ms; every worker gets the same, so they meet on each round); one JSON line per attempt,
/// `{"round", "worker", "kind", "ok", "code"}`, printed as it happens.
#[allow(clippy::too_many_arguments)]
pub fn attack(
    runtime: &GateRuntime,
    redis: &str,
    namespace: &str,
    audit: &Path,
    first: i64,
    rounds: i64,
    worker: i64,
    start_at_ms: u64,
    holds: Holds,
) -> Result<(), String> {
    let mut g = gate(runtime, redis, namespace, audit, holds.consent_ms)?;
    let server = server()?;
    // The instance and the connection are ready: wait for the common start.
    g.instantiate_now().map_err(|d| d.to_string())?;
    let now = mrtr_gate_host::core::host::Clock::now_ms(&SystemClock);
    std::thread::sleep(std::time::Duration::from_millis(
        start_at_ms.saturating_sub(now),
    ));
    let attempt = |g: &mut ComponentGate, round: i64, kind: &str, retry_id: i64, user: &str| {
        // The one attempt under another tenant is the rightful user's name there.
        let tenant = if kind == "cross_tenant" {
            "evil-corp"
        } else {
            TENANT
        };
        let r = g.build_retry(RetryRequest {
            server: server.clone(),
            request_id: RequestId::Number(round),
            retry_id: RequestId::Number(retry_id),
            user: user.into(),
            tenant: tenant.into(),
            responses_json: answers().to_string(),
        });
        let ok = r.is_ok();
        say(
            &json!({"round": round, "worker": worker, "kind": kind, "ok": ok,
            "code": r.err().map(|d| d.code.as_str())}),
        );
        ok
    };
    for round in first..first + rounds {
        // Retry ids are unique per worker and round: 1,000,000 + round * 100 + worker.
        let own = 1_000_000 + round * 100 + worker;
        if worker % 2 == 1 {
            attempt(&mut g, round, "cross_user", own + 50, "mallory@example.com");
        } else {
            attempt(&mut g, round, "cross_tenant", own + 40, USER);
        }
        attempt(&mut g, round, "id_collision", round, USER);
        if attempt(&mut g, round, "genuine", own, USER) {
            if holds.after_win_ms > 0 {
                say(&json!({"holding": "after_win"}));
                std::thread::sleep(std::time::Duration::from_millis(holds.after_win_ms));
            }
            attempt(&mut g, round, "replay", own + 60, USER);
        }
    }
    Ok(())
}
