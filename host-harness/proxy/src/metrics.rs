//! What the proxy counts, for an operator's scraper: the process's one registry ([`global`]),
//! kept in atomics so the gated path pays a few relaxed increments and no lock (a refusal,
//! rarer, takes one), and rendered in the Prometheus text format ([`Metrics::render`]) by the
//! admin listener ([`crate::admin`]).
//!
//! One registry per process, as Prometheus's own clients keep a default one: every engine of a
//! pool, every refusal rendered and every service call lands in it without a handle threaded
//! through each. No label value comes from a peer: methods are the three gated ones (else
//! `other`), codes are the gate's and the proxy's own (`docs/errors.md`), so what a client or a
//! server sends cannot grow the series.

use crate::errors::Refusal;
use mrtr_gate_host::core::RequestId;
use mrtr_gate_host::core::host::{
    AppendOutcome, Audit, AuditEntry, ChainHead, Consent, ConsentDecision, ConsentPrompt,
    ConsentReceipt, DuePage, HostError, Journaled, Order, ReadKey, Storage, Versioned, Write,
    journal,
};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The process's registry.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

static GLOBAL: Metrics = Metrics::new();

/// The gated methods, by index in the series (the last, `other`, is never one a call can
/// reach upstream with: the gate refuses it).
const METHODS: [&str; 4] = ["tools/call", "prompts/get", "resources/read", "other"];

fn method_index(method: &str) -> usize {
    METHODS
        .iter()
        .take(3)
        .position(|m| *m == method)
        .unwrap_or(3)
}

/// How a gated request went upstream.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Sent {
    /// A client's first request of a call.
    Call,
    /// A client's retry of a round, built by the gate.
    Retry,
}

/// The gate's verdict on the upstream's answer to a gated request.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Verdict {
    /// A result, delivered.
    Result,
    /// A JSON-RPC error of the server's, delivered.
    Error,
    /// A round (`input_required`), delivered and filed for its retry.
    InputRequired,
    /// Refused: the client got the gate's error instead.
    Refused,
}

const VERDICTS: [&str; 4] = ["result", "error", "input_required", "refused"];

/// How a binding ended other than by its answer.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Ended {
    /// The client cancelled, left, or the proxy stopped.
    Cancelled,
    /// Its lifetime passed (the sweep).
    Expired,
    /// The server went away, or the proxy gave the call up.
    Failed,
}

const ENDINGS: [&str; 3] = ["cancelled", "expired", "failed"];

/// The time series' bucket bounds, in seconds: from half a millisecond (a gate step) to five
/// minutes (a round's default lifetime, a person's consent).
const BOUNDS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
    300.0,
];

/// A histogram: one count per bucket (not yet cumulative), the sum in nanoseconds, the count.
struct Histogram {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BOUNDS.len() + 1],
            sum_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BOUNDS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BOUNDS.len());
        if let Some(b) = self.buckets.get(bucket) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0u64;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = BOUNDS
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), |b| b.to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(
            out,
            "{name}_count{braces} {}",
            self.count.load(Ordering::Relaxed)
        );
    }
}

/// One engine's gauges, set after every message it handles; the registry sums the live ones.
#[derive(Debug, Default)]
pub struct EngineGauges {
    /// Gated requests sent upstream and not yet answered.
    pub in_flight: AtomicU64,
}

/// The registry ([`global`]).
pub struct Metrics {
    started: Mutex<Option<Instant>>,
    sent: [[AtomicU64; 2]; METHODS.len()],
    verdicts: [[AtomicU64; VERDICTS.len()]; METHODS.len()],
    ended: [AtomicU64; ENDINGS.len()],
    /// (cause, code): refusals sent to clients, or recorded for a message dropped.
    refusals: Mutex<BTreeMap<(&'static str, String), u64>>,
    gate_client: Histogram,
    gate_server: Histogram,
    upstream: [Histogram; METHODS.len()],
    engines: Mutex<Vec<Weak<EngineGauges>>>,
    /// The rounds this process delivered and nobody has used or ended: by id, so a round
    /// delivered by one engine of a pool and retried through another is closed once.
    open: Mutex<Option<HashSet<RequestId>>>,
    audit_written: AtomicU64,
    audit_head_moved: AtomicU64,
    audit_failed: AtomicU64,
    store_errors: [AtomicU64; 3],
    consent: [AtomicU64; 3],
    consent_wait: Histogram,
}

const STORE_OPS: [&str; 3] = ["read", "write", "list_due"];
const CONSENT_DECISIONS: [&str; 3] = ["granted", "refused", "failed"];

impl Metrics {
    const fn new() -> Self {
        Self {
            started: Mutex::new(None),
            sent: [const { [const { AtomicU64::new(0) }; 2] }; METHODS.len()],
            verdicts: [const { [const { AtomicU64::new(0) }; VERDICTS.len()] }; METHODS.len()],
            ended: [const { AtomicU64::new(0) }; ENDINGS.len()],
            refusals: Mutex::new(BTreeMap::new()),
            gate_client: Histogram::new(),
            gate_server: Histogram::new(),
            upstream: [const { Histogram::new() }; METHODS.len()],
            engines: Mutex::new(Vec::new()),
            open: Mutex::new(None),
            audit_written: AtomicU64::new(0),
            audit_head_moved: AtomicU64::new(0),
            audit_failed: AtomicU64::new(0),
            store_errors: [const { AtomicU64::new(0) }; 3],
            consent: [const { AtomicU64::new(0) }; 3],
            consent_wait: Histogram::new(),
        }
    }

    /// A gated request went upstream.
    pub fn sent(&self, method: &str, how: Sent) {
        let kind = match how {
            Sent::Call => 0,
            Sent::Retry => 1,
        };
        bump_at(&self.sent, method_index(method), kind);
    }

    /// The gate judged the upstream's answer to a gated request of `method`, `took` after the
    /// request went.
    pub fn answered(&self, method: &str, verdict: Verdict, took: Duration) {
        let m = method_index(method);
        bump_at(&self.verdicts, m, verdict as usize);
        if let Some(h) = self.upstream.get(m) {
            h.observe(took);
        }
    }

    /// A binding ended without an answer delivered.
    pub fn ended(&self, how: Ended) {
        if let Some(c) = self.ended.get(how as usize) {
            bump(c);
        }
    }

    /// A refusal reached a client (or was recorded for a message dropped).
    pub fn refused(&self, refusal: &Refusal) {
        let mut refusals = lock(&self.refusals);
        match refusals.get_mut(&(refusal.cause, refusal.code.clone())) {
            Some(n) => *n += 1,
            None => {
                refusals.insert((refusal.cause, refusal.code.clone()), 1);
            }
        }
    }

    /// An engine handled a client's message (`client`) or the server's in `took`.
    pub fn handled(&self, client: bool, took: Duration) {
        if client {
            self.gate_client.observe(took);
        } else {
            self.gate_server.observe(took);
        }
    }

    /// A round was delivered to a client (its binding's id).
    pub fn round_opened(&self, id: &RequestId) {
        lock(&self.open)
            .get_or_insert_with(HashSet::new)
            .insert(id.clone());
    }

    /// A round was used by a retry, ended or given up, by whichever engine; again is nothing.
    pub fn round_closed(&self, id: &RequestId) {
        if let Some(open) = lock(&self.open).as_mut() {
            open.remove(id);
        }
    }

    /// A new engine's gauges, counted while it lives.
    pub fn engine(&self) -> Arc<EngineGauges> {
        let gauges = Arc::new(EngineGauges::default());
        let mut engines = lock(&self.engines);
        engines.retain(|e| e.strong_count() > 0);
        engines.push(Arc::downgrade(&gauges));
        gauges
    }

    /// How many engines are live (gates loaded and serving).
    pub fn engines(&self) -> usize {
        lock(&self.engines)
            .iter()
            .filter(|e| e.strong_count() > 0)
            .count()
    }

    /// Mark the process started (the uptime's origin); the first call wins.
    pub fn start(&self) {
        lock(&self.started).get_or_insert_with(Instant::now);
    }

    /// Everything, in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        family(
            &mut out,
            "mrtr_gate_build_info",
            "gauge",
            "The proxy's version (always 1).",
        );
        let _ = writeln!(
            out,
            "mrtr_gate_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(started) = *lock(&self.started) {
            family(
                &mut out,
                "mrtr_gate_uptime_seconds",
                "gauge",
                "Seconds since the proxy started.",
            );
            let _ = writeln!(
                out,
                "mrtr_gate_uptime_seconds {}",
                started.elapsed().as_secs_f64()
            );
        }
        family(
            &mut out,
            "mrtr_gate_requests_total",
            "counter",
            "Gated requests sent upstream: a call's first request, or a retry the gate built.",
        );
        for (m, method) in METHODS.iter().enumerate() {
            for (k, kind) in ["call", "retry"].iter().enumerate() {
                let n = load_at(&self.sent, m, k);
                let _ = writeln!(
                    out,
                    "mrtr_gate_requests_total{{method=\"{method}\",kind=\"{kind}\"}} {n}"
                );
            }
        }
        family(
            &mut out,
            "mrtr_gate_answers_total",
            "counter",
            "The gate's verdicts on the upstream's answers to gated requests.",
        );
        for (m, method) in METHODS.iter().enumerate() {
            for (v, verdict) in VERDICTS.iter().enumerate() {
                let n = load_at(&self.verdicts, m, v);
                let _ = writeln!(
                    out,
                    "mrtr_gate_answers_total{{method=\"{method}\",verdict=\"{verdict}\"}} {n}"
                );
            }
        }
        family(
            &mut out,
            "mrtr_gate_bindings_ended_total",
            "counter",
            "Bindings ended without an answer delivered, by how.",
        );
        for (how, n) in ENDINGS.iter().zip(&self.ended) {
            let n = n.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "mrtr_gate_bindings_ended_total{{outcome=\"{how}\"}} {n}"
            );
        }
        family(
            &mut out,
            "mrtr_gate_refusals_total",
            "counter",
            "Refusals sent to clients (or recorded for a message dropped), by blame and code (docs/errors.md).",
        );
        for ((cause, code), n) in lock(&self.refusals).iter() {
            let _ = writeln!(
                out,
                "mrtr_gate_refusals_total{{cause=\"{cause}\",code=\"{}\"}} {n}",
                label_value(code)
            );
        }
        let mut in_flight = 0u64;
        let mut live = 0usize;
        for gauges in lock(&self.engines).iter().filter_map(Weak::upgrade) {
            in_flight += gauges.in_flight.load(Ordering::Relaxed);
            live += 1;
        }
        let open = lock(&self.open).as_ref().map_or(0, HashSet::len);
        family(
            &mut out,
            "mrtr_gate_engines",
            "gauge",
            "Engines (gate instances) serving.",
        );
        let _ = writeln!(out, "mrtr_gate_engines {live}");
        family(
            &mut out,
            "mrtr_gate_calls_in_flight",
            "gauge",
            "Gated requests sent upstream and not yet answered.",
        );
        let _ = writeln!(out, "mrtr_gate_calls_in_flight {in_flight}");
        family(
            &mut out,
            "mrtr_gate_open_rounds",
            "gauge",
            "Rounds delivered to clients and not yet retried, ended or expired.",
        );
        let _ = writeln!(out, "mrtr_gate_open_rounds {open}");
        family(
            &mut out,
            "mrtr_gate_gate_seconds",
            "histogram",
            "Time an engine took over one message (the gate's checks, its store and audit writes, and an inline consent's wait).",
        );
        self.gate_client
            .render(&mut out, "mrtr_gate_gate_seconds", "from=\"client\"");
        self.gate_server
            .render(&mut out, "mrtr_gate_gate_seconds", "from=\"server\"");
        family(
            &mut out,
            "mrtr_gate_upstream_seconds",
            "histogram",
            "Time from a gated request sent upstream to its answer.",
        );
        for (method, h) in METHODS.iter().zip(&self.upstream) {
            h.render(
                &mut out,
                "mrtr_gate_upstream_seconds",
                &format!("method=\"{method}\""),
            );
        }
        family(
            &mut out,
            "mrtr_gate_audit_appends_total",
            "counter",
            "Audit appends by result: written (and read back), head_moved (another writer went first), failed (the sink errored: the step was denied).",
        );
        for (result, n) in [
            ("written", &self.audit_written),
            ("head_moved", &self.audit_head_moved),
            ("failed", &self.audit_failed),
        ] {
            let _ = writeln!(
                out,
                "mrtr_gate_audit_appends_total{{result=\"{result}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        family(
            &mut out,
            "mrtr_gate_store_errors_total",
            "counter",
            "Store calls that failed, by operation (each one a denial or a retry refused).",
        );
        for (op, n) in STORE_OPS.iter().zip(&self.store_errors) {
            let _ = writeln!(
                out,
                "mrtr_gate_store_errors_total{{op=\"{op}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        family(
            &mut out,
            "mrtr_gate_consent_total",
            "counter",
            "Consent asked of the user or the hook, by decision.",
        );
        for (decision, n) in CONSENT_DECISIONS.iter().zip(&self.consent) {
            let _ = writeln!(
                out,
                "mrtr_gate_consent_total{{decision=\"{decision}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        family(
            &mut out,
            "mrtr_gate_consent_wait_seconds",
            "histogram",
            "How long each consent took to decide.",
        );
        self.consent_wait
            .render(&mut out, "mrtr_gate_consent_wait_seconds", "");
        out
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format spells it (`\\`, `\"`, `\n` escaped). Codes are the
/// project's own snake_case words; the escape is for the rule, not for them.
fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn bump_at<const N: usize>(table: &[[AtomicU64; N]], row: usize, column: usize) {
    if let Some(c) = table.get(row).and_then(|r| r.get(column)) {
        bump(c);
    }
}

fn load_at<const N: usize>(table: &[[AtomicU64; N]], row: usize, column: usize) -> u64 {
    table
        .get(row)
        .and_then(|r| r.get(column))
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An audit sink whose appends are counted ([`Metrics`]); otherwise the sink itself.
pub struct MeteredAudit<A>(pub A);

impl<A: Audit> Audit for MeteredAudit<A> {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        let outcome = self.0.append(entry);
        let counter = match &outcome {
            Ok(o) if o.written => &GLOBAL.audit_written,
            Ok(_) => &GLOBAL.audit_head_moved,
            Err(_) => &GLOBAL.audit_failed,
        };
        bump(counter);
        outcome
    }

    fn head_hint(&self, shard: &str) -> Option<ChainHead> {
        self.0.head_hint(shard)
    }

    /// The journal call made with the inner sink (so that a store can fuse with it), its
    /// append counted as [`Audit::append`] counts one.
    fn journal_through(
        &self,
        storage: &dyn Storage,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Option<Result<Journaled, HostError>> {
        let done = journal(storage, &self.0, order, entry, writes);
        let counter = match &done {
            Ok(Journaled {
                appended: Some(o), ..
            }) if o.written => Some(&GLOBAL.audit_written),
            Ok(Journaled {
                appended: Some(_), ..
            }) => Some(&GLOBAL.audit_head_moved),
            Ok(Journaled {
                failed: Some(_), ..
            }) if order == Order::WriteThenAppend => Some(&GLOBAL.audit_failed),
            Ok(_) => None,
            Err(_) if order == Order::AppendThenWrite => Some(&GLOBAL.audit_failed),
            Err(_) => None,
        };
        if let Some(c) = counter {
            bump(c);
        }
        Some(done)
    }
}

/// A store whose failed calls are counted ([`Metrics`]); otherwise the store itself.
pub struct MeteredStorage<S>(pub S);

impl<S: Storage> Storage for MeteredStorage<S> {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        counted(self.0.read(keys), 0)
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        counted(self.0.write(writes), 1)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        counted(self.0.list_due(due_by_ms, cursor, limit), 2)
    }
    /// Passed on; a failed write (the call's own error when the writes come first, its
    /// `failed` when they come second) counted as [`Storage::write`] counts one.
    fn journal(
        &self,
        audit: &dyn Audit,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<Journaled, HostError> {
        let done = self.0.journal(audit, order, entry, writes);
        let write_failed = match (&done, order) {
            (Err(_), Order::WriteThenAppend) => true,
            (Ok(j), Order::AppendThenWrite) => j.failed.is_some(),
            _ => false,
        };
        if let (true, Some(c)) = (write_failed, GLOBAL.store_errors.get(1)) {
            bump(c);
        }
        done
    }
}

fn counted<T>(result: Result<T, HostError>, op: usize) -> Result<T, HostError> {
    if let (Err(_), Some(c)) = (&result, GLOBAL.store_errors.get(op)) {
        bump(c);
    }
    result
}

/// A consent provider whose decisions and waits are counted ([`Metrics`]), each decision a
/// span ([`crate::trace`]).
pub struct MeteredConsent<K>(pub K);

impl<K: Consent> Consent for MeteredConsent<K> {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        use crate::trace::{Outcome, Step};
        // Under the span current here: the retry's (asked inline) or the call's (asked off
        // the engine's thread).
        let step = Step::current("mrtr_gate.consent");
        let started = Instant::now();
        let receipt = self.0.request_consent(prompt);
        GLOBAL.consent_wait.observe(started.elapsed());
        let decision = match &receipt {
            Ok(r) if r.decision == ConsentDecision::Granted => 0,
            Ok(_) => 1,
            Err(_) => 2,
        };
        match decision {
            0 => step.outcome(Outcome::Granted, None),
            1 => step.outcome(Outcome::Declined, None),
            _ => step.outcome(Outcome::Failed, Some("consent_unavailable")),
        }
        if let Some(c) = GLOBAL.consent.get(decision) {
            bump(c);
        }
        receipt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_cumulative_and_ends_at_inf() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(1000));
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "a=\"b\"");
        assert!(
            out.contains("x_seconds_bucket{a=\"b\",le=\"0.0005\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{a=\"b\",le=\"0.005\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{a=\"b\",le=\"300\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{a=\"b\",le=\"+Inf\"} 3\n"),
            "{out}"
        );
        assert!(out.contains("x_seconds_count{a=\"b\"} 3\n"), "{out}");
    }

    #[test]
    fn a_method_no_call_can_have_is_other() {
        assert_eq!(METHODS[method_index("tools/call")], "tools/call");
        assert_eq!(METHODS[method_index("x\"}\n")], "other");
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
