//! `mrtr-gate-testkit bench-expire`: one `expire-stale` sweep (the component, wasmtime) over a
//! store holding N live bindings that are not due plus a fixed number that are, with the
//! in-memory store and with Redis: the sweep's time and the storage calls it made, by kind. The
//! non-due keys are written straight through the storage API (a real gate would have written
//! them one round at a time), so a million take seconds to set up.

use mrtr_gate_host::core::host::{DuePage, HostError, ReadKey, Storage, Versioned, Write};
use mrtr_gate_host::core::{ID_PREFIX, Policy, Registration, RequestId, ServerIdentity};
use mrtr_gate_host::reference_hosts::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_redis::RedisStorage;
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The bindings that are due in every row.
pub const DUE: u64 = 100;

/// A store that counts the calls made to it, and the keys those calls carried.
pub struct Counting<S> {
    inner: S,
    reads: AtomicU64,
    keys_read: AtomicU64,
    writes: AtomicU64,
    lists: AtomicU64,
}

impl<S> Counting<S> {
    /// `inner`, counted.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            reads: AtomicU64::new(0),
            keys_read: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            lists: AtomicU64::new(0),
        }
    }
    fn reset(&self) {
        for c in [&self.reads, &self.keys_read, &self.writes, &self.lists] {
            c.store(0, Ordering::SeqCst);
        }
    }
}

impl<S: Storage> Storage for Counting<S> {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.keys_read
            .fetch_add(keys.len() as u64, Ordering::SeqCst);
        self.inner.read(keys)
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}

/// The table's head.
pub const HEAD: &str = "| store | live, not due | due | sweep | list calls | read calls | keys read | write calls | Redis round trips |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// One row: `live` non-due keys and [`DUE`] due bindings in `storage` (Redis when `redis` is
/// given, for its round-trip count), one sweep timed.
pub fn row(
    runtime: &GateRuntime,
    label: &str,
    live: u64,
    clock: &Arc<ManualClock>,
    storage: Arc<dyn Storage + Send + Sync>,
    redis: Option<&RedisStorage>,
) -> Result<String, String> {
    let counting = Arc::new(Counting::new(storage.clone()));
    let mut g = ComponentGate::new(
        runtime,
        HostServices {
            clock: clock.clone(),
            storage: counting.clone(),
            consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
            audit: Arc::new(MemoryAudit::windowed(1024)),
        },
    );
    let server =
        ServerIdentity::origin("https://bench.example.com/mcp").map_err(|e| e.to_string())?;
    let policy = Policy::default();
    for id in 0..DUE {
        g.register(Registration {
            request_id: RequestId::Number(id as i64),
            server: server.clone(),
            user: "alice@example.com".into(),
            tenant: "acme".into(),
            method: "tools/call".into(),
            params_json: json!({"name": "book_flight", "arguments": {"from": "OSL"}}).to_string(),
            policy: policy.clone(),
        })
        .map_err(|d| d.to_string())?;
    }
    // The keys that are not due: an hour to live, spread over 16 servers' key parts.
    let ttl = 3_600_000;
    let mut i = 0u64;
    while i < live {
        let n = (live - i).min(1000);
        let keys: Vec<String> = (i..i + n)
            .map(|k| format!("{ID_PREFIX}{:032x}/n{k}", k % 16))
            .collect();
        let writes: Vec<Write<'_>> = keys
            .iter()
            .map(|k| Write {
                key: k,
                expected: 0,
                value: Some("x"),
                ttl_ms: ttl,
            })
            .collect();
        let applied = storage.write(&writes).map_err(|e| e.message)?;
        if applied.len() != writes.len() {
            return Err("a filler write did not apply".into());
        }
        i += n;
    }
    clock.advance(policy.round_trip_lifetime_ms + 1);
    counting.reset();
    let trips = redis.map_or(0, RedisStorage::round_trips);
    let started = Instant::now();
    let swept = g.expire_stale();
    let took = started.elapsed();
    let trips = redis.map_or(0, RedisStorage::round_trips) - trips;
    let took = match swept {
        Ok(ended) if u64::from(ended) == DUE => format!("{:.2} ms", took.as_secs_f64() * 1e3),
        Ok(ended) => {
            return Err(format!(
                "{label} {live}: the sweep ended {ended}, not {DUE}"
            ));
        }
        // Shown in the table: a store too large for one sweep within the gate's deadline.
        Err(d) => format!(
            "denied `{}` after {:.0} ms",
            d.code,
            took.as_secs_f64() * 1e3
        ),
    };
    let c = |a: &AtomicU64| a.load(Ordering::SeqCst);
    Ok(format!(
        "| {label} | {live} | {DUE} | {took} | {} | {} | {} | {} | {} |\n",
        c(&counting.lists),
        c(&counting.reads),
        c(&counting.keys_read),
        c(&counting.writes),
        if redis.is_some() {
            trips.to_string()
        } else {
            "–".into()
        }
    ))
}

/// Every row: each size with the in-memory store, then with Redis when `redis` is given
/// (each size in a namespace of its own).
pub fn run(runtime: &GateRuntime, sizes: &[u64], redis: Option<&str>) -> Result<String, String> {
    let mut out = String::from(HEAD);
    let start = 1_800_000_000_000;
    for &live in sizes {
        let clock = Arc::new(ManualClock::new(start));
        let storage = Arc::new(MemoryStorage::new(clock.clone()));
        out.push_str(&row(runtime, "memory", live, &clock, storage, None)?);
    }
    if let Some(url) = redis {
        for &live in sizes {
            let clock = Arc::new(ManualClock::new(start));
            let ns = format!("bench-expire-{}-{live}", std::process::id());
            let r =
                Arc::new(RedisStorage::connect(url, &ns, clock.clone()).map_err(|e| e.message)?);
            out.push_str(&row(runtime, "redis", live, &clock, r.clone(), Some(&r))?);
        }
    }
    Ok(out)
}
