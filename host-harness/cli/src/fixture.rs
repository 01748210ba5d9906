//! The hosts a scenario, a benchmark or a test runs over: a test clock, in-memory storage,
//! scripted consent and an in-memory audit sink, kept so the caller can inject faults and
//! read the trail.

use mrtr_gate_host::HostServices;
use mrtr_gate_host::reference_hosts::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use std::sync::Arc;

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
        }
    }

    /// The services to build a gate over.
    pub fn services(&self) -> HostServices {
        HostServices {
            clock: self.clock.clone(),
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
