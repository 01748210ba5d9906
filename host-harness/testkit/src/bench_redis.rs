//! `mrtr-gate-testkit bench-redis`: form rounds from several processes at once against one
//! Redis (each process its own component instance and connection), against the in-memory store
//! for comparison: aggregate rounds per second, p50 and p99 per round, and Redis calls per
//! round; then with the audit trail on Redis too (one trail, every process appending to it:
//! one chain per server, so `servers` chain heads). Each process runs `mrtr-gate-testkit bench-redis --worker`, and the
//! parent adds them up. Each process spreads its rounds over `servers` servers (one hash tag,
//! so one Cluster slot, each).

use mrtr_gate_host::core::host::Audit;
use mrtr_gate_host::core::host::Storage;
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::{
    MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent, SystemClock,
};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_redis::{RedisAudit, RedisStorage};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

/// One form round, whole: register, the `input_required` round, the retry, the result.
fn round(g: &mut ComponentGate, server: &ServerIdentity, id: i64) -> Result<(), String> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
    g.register(Registration {
        request_id: RequestId::Number(id),
        server: server.clone(),
        user: "alice@example.com".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json:
            json!({"name": "book_flight", "arguments": {"from": "OSL", "to": "SFO"}, "_meta": meta})
                .to_string(),
        policy: Policy::default(),
    })
    .map_err(|d| d.to_string())?;
    let asked = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
        "inputRequests": {"passenger": {"method": "elicitation/create", "params": {"mode": "form", "message": "Who is flying?",
            "requestedSchema": {"type": "object", "properties": {
                "full_name": {"type": "string", "minLength": 1, "maxLength": 100},
                "seat": {"type": "string", "enum": ["aisle", "window"]}}, "required": ["full_name", "seat"]}}}},
        "requestState": "eyJmcm9tIjoiT1NMIn0"}});
    match g
        .accept_response(server, &asked.to_string())
        .map_err(|d| d.to_string())?
    {
        ResponseVerdict::InputRequired(_) => {}
        other => return Err(format!("round {id}: {other:?}")),
    }
    let retry_id = id + 500_000;
    g.build_retry(RetryRequest {
        server: server.clone(),
        request_id: RequestId::Number(id),
        retry_id: RequestId::Number(retry_id),
        user: "alice@example.com".into(),
        tenant: "acme".into(),
        responses_json: json!({"passenger": {"action": "accept", "content": {"full_name": "Ada", "seat": "aisle"}}}).to_string(),
    })
    .map_err(|d| d.to_string())?;
    let done = json!({"jsonrpc": "2.0", "id": retry_id, "result": {"resultType": "complete", "content": []}});
    match g
        .accept_response(server, &done.to_string())
        .map_err(|d| d.to_string())?
    {
        ResponseVerdict::Complete => Ok(()),
        other => Err(format!("round {id}: {other:?}")),
    }
}

/// Where a worker keeps its rounds and its trail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keeping {
    /// Store and trail in memory (one per process, not shared).
    Memory,
    /// The store on Redis (shared), the trail in memory.
    RedisStore,
    /// Store and trail on Redis (shared: one trail for every process).
    RedisStoreAndTrail,
}

/// One process's share: `rounds` form rounds (ids from `first`, spread over `servers` servers)
/// kept as `keeping` says, on Redis at `redis` (URL and namespace). Returns
/// `{rounds, seconds, latencies_us, calls}`.
pub fn worker(
    runtime: &GateRuntime,
    keeping: Keeping,
    (url, ns): (&str, &str),
    servers: usize,
    first: i64,
    rounds: i64,
) -> Result<Value, String> {
    let redis = (keeping != Keeping::Memory).then_some((url, ns));
    let clock = Arc::new(SystemClock);
    let (storage, redis_store): (Arc<dyn Storage + Send + Sync>, Option<Arc<RedisStorage>>) =
        match redis {
            Some((url, ns)) => {
                let r = Arc::new(
                    RedisStorage::connect(url, ns, clock.clone()).map_err(|e| e.to_string())?,
                );
                (r.clone(), Some(r))
            }
            None => (Arc::new(MemoryStorage::new(clock.clone())), None),
        };
    let redis_trail = match keeping {
        Keeping::RedisStoreAndTrail => Some(Arc::new(
            RedisAudit::connect(url, ns, "bench").map_err(|e| e.to_string())?,
        )),
        _ => None,
    };
    let audit: Arc<dyn Audit + Send + Sync> = match &redis_trail {
        Some(t) => t.clone(),
        None => Arc::new(MemoryAudit::windowed(1024)),
    };
    let mut g = ComponentGate::new(
        runtime,
        HostServices {
            clock,
            storage,
            consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
            audit,
        },
    );
    let servers = (0..servers.max(1))
        .map(|i| ServerIdentity::origin(&format!("https://bench-{i}.example.com/mcp")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e:?}"))?;
    let server_of = |id: i64| {
        let n = i64::try_from(servers.len()).unwrap_or(1);
        usize::try_from(id.rem_euclid(n))
            .ok()
            .and_then(|i| servers.get(i))
            .ok_or_else(|| "no server".to_owned())
    };
    for i in 0..20 {
        let id = first - 1_000 + i;
        round(&mut g, server_of(id)?, id)?;
    }
    let calls_so_far = || {
        redis_store.as_ref().map_or(0, |r| r.round_trips())
            + redis_trail.as_ref().map_or(0, |t| t.round_trips())
    };
    let before = calls_so_far();
    let mut latencies = Vec::with_capacity(usize::try_from(rounds).unwrap_or(0));
    let started = Instant::now();
    for id in first..first + rounds {
        let t = Instant::now();
        round(&mut g, server_of(id)?, id)?;
        latencies.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let seconds = started.elapsed().as_secs_f64();
    let calls = calls_so_far() - before;
    Ok(json!({"rounds": rounds, "seconds": seconds, "latencies_us": latencies, "calls": calls}))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

/// Sum the workers' reports into one table row.
pub fn row(label: &str, reports: &[Value]) -> String {
    let mut all: Vec<f64> = reports
        .iter()
        .flat_map(|r| r["latencies_us"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_f64())
        .collect();
    all.sort_by(f64::total_cmp);
    let rounds: i64 = reports.iter().filter_map(|r| r["rounds"].as_i64()).sum();
    let longest = reports
        .iter()
        .filter_map(|r| r["seconds"].as_f64())
        .fold(0.0, f64::max);
    let calls: u64 = reports.iter().filter_map(|r| r["calls"].as_u64()).sum();
    let per_round = if calls == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}", calls as f64 / rounds as f64)
    };
    format!(
        "| {label} | {} | {:.0} | {:.0} us | {:.0} us | {per_round} |\n",
        reports.len(),
        rounds as f64 / longest,
        percentile(&all, 0.5),
        percentile(&all, 0.99),
    )
}

/// The table's head.
pub const HEAD: &str = "| store | processes | form rounds/s (all together) | p50 per round | p99 per round | Redis calls per round |\n|---|---|---|---|---|---|\n";
