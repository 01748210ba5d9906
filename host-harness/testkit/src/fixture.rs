//! The hosts a scenario, a benchmark or a test runs over: a test clock, in-memory storage,
//! scripted consent and an in-memory audit sink, kept so the caller can inject faults and
//! read the trail.

use mrtr_gate_host::HostServices;
use mrtr_gate_host::core::host::Clock;
use mrtr_gate_host::reference_hosts::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a host whose binding wrapped `-1` into a `u64` hands the gate (the clock fault).
pub const WRAPPED_NEGATIVE_MS: u64 = u64::MAX;

/// The clock the gate sees: the test clock, or, while the fault is on, a clock that returns
/// [`WRAPPED_NEGATIVE_MS`] (the store keeps the test clock, as a real store keeps its own).
struct GateClock {
    clock: Arc<ManualClock>,
    wrapped: Arc<AtomicBool>,
}

impl Clock for GateClock {
    fn now_ms(&self) -> u64 {
        if self.wrapped.load(Ordering::SeqCst) {
            WRAPPED_NEGATIVE_MS
        } else {
            self.clock.now_ms()
        }
    }
}

/// The hosts a scenario runs over, kept so the runner can inject faults and read the trail.
#[derive(Clone)]
pub struct ScenarioHosts {
    /// The test clock: starts at 1 700 000 000 000 ms and moves only when advanced.
    pub clock: Arc<ManualClock>,
    /// The in-memory store the bindings live in (its TTLs follow `clock`); it can be told
    /// to fail or to lose compare-and-swaps.
    pub storage: MemoryStorage,
    /// The consent script: grants unless answers are pushed onto it.
    pub consent: ScriptedConsent,
    /// The in-memory audit sink, whose trail the caller reads; it can be given faults.
    pub audit: MemoryAudit,
    /// While true, the gate's clock returns [`WRAPPED_NEGATIVE_MS`].
    clock_wrapped: Arc<AtomicBool>,
}

impl ScenarioHosts {
    /// Fresh hosts.
    pub fn new() -> Self {
        Self::with_audit(MemoryAudit::new())
    }

    /// Fresh hosts whose audit sink keeps only its newest 1,024 lines (benchmarks: a sink
    /// that keeps millions of lines measures the host's allocator, not the gate).
    pub fn for_bench() -> Self {
        Self::with_audit(MemoryAudit::windowed(1024))
    }

    fn with_audit(audit: MemoryAudit) -> Self {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        Self {
            storage: MemoryStorage::new(clock.clone()),
            clock,
            consent: ScriptedConsent::new(ScriptedAnswer::Grant),
            audit,
            clock_wrapped: Arc::default(),
        }
    }

    /// Make the gate's clock return [`WRAPPED_NEGATIVE_MS`] (or the test clock again).
    pub fn set_clock_wrapped(&self, on: bool) {
        self.clock_wrapped.store(on, Ordering::SeqCst);
    }

    /// The services to build a gate over.
    pub fn services(&self) -> HostServices {
        HostServices {
            clock: Arc::new(GateClock {
                clock: self.clock.clone(),
                wrapped: self.clock_wrapped.clone(),
            }),
            storage: Arc::new(self.storage.clone()),
            consent: Arc::new(self.consent.clone()),
            audit: Arc::new(self.audit.clone()),
        }
    }
}

impl Default for ScenarioHosts {
    fn default() -> Self {
        Self::new()
    }
}
