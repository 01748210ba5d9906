//! The wasmtime side of the component's four imports (`mrtr:gate/{clock,storage,consent,audit}`):
//! the store's state, and adapters from the WIT interfaces to the core's host traits, so one
//! implementation of a service ([`HostServices`]) serves both the component and the native core.

use crate::bindings::mrtr::gate::{audit, clock, consent, storage};
use crate::services::HostServices;
use mrtr_gate_core::host::{AppendOutcome, AuditEntry, CasOutcome, ConsentDecision, ConsentPrompt};
use std::time::{Duration, Instant};
use wasmtime::StoreLimits;

/// What a wasmtime store holds: the services and the memory cap.
pub struct HostState {
    pub(crate) services: HostServices,
    pub(crate) limits: StoreLimits,
    /// The largest linear memory the guest was granted so far.
    pub(crate) granted: usize,
    /// The current call's deadline accounting (deadline budgets only).
    pub(crate) deadline: Option<GuestDeadline>,
}

/// A deadline on the guest's time in one call. The time a user takes over the consent
/// prompt does not count: a minute of thought is not the guest running away. Storage, audit
/// and clock imports do count: they are expected to be quick, and timing each of them would
/// put two clock reads on every import call (see docs/performance.md; hosts with a slow remote
/// store can raise the budget).
#[derive(Clone, Copy, Debug)]
pub(crate) struct GuestDeadline {
    budget: Duration,
    started: Instant,
    in_host: Duration,
}

impl GuestDeadline {
    /// A call starts now with `budget` of guest time.
    pub(crate) fn start(budget: Duration) -> Self {
        Self {
            budget,
            started: Instant::now(),
            in_host: Duration::ZERO,
        }
    }

    /// Guest time left, or `None` once it is used up.
    pub(crate) fn left(&self) -> Option<Duration> {
        let guest = self.started.elapsed().saturating_sub(self.in_host);
        self.budget.checked_sub(guest).filter(|d| !d.is_zero())
    }
}

impl HostState {
    /// The largest linear memory granted to the guest, in bytes.
    pub fn limits_granted(&self) -> usize {
        self.granted
    }

    /// Run a host service that may wait on a person, keeping its time off the guest's deadline.
    fn waiting<R>(&mut self, f: impl FnOnce(&HostServices) -> R) -> R {
        let Some(deadline) = self.deadline.as_mut() else {
            return f(&self.services);
        };
        let started = Instant::now();
        let out = f(&self.services);
        deadline.in_host = deadline.in_host.saturating_add(started.elapsed());
        out
    }
}

impl wasmtime::ResourceLimiter for HostState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = self.limits.memory_growing(current, desired, maximum)?;
        if ok {
            self.granted = self.granted.max(desired);
        }
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }
    fn tables(&self) -> usize {
        self.limits.tables()
    }
    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl clock::Host for HostState {
    fn now_ms(&mut self) -> u64 {
        self.services.clock.now_ms()
    }
}

impl storage::Host for HostState {
    fn get(&mut self, key: String) -> Result<Option<storage::Versioned>, storage::HostError> {
        self.services
            .storage
            .get(&key)
            .map(|found| {
                found.map(|v| storage::Versioned {
                    value: v.value,
                    version: v.version,
                })
            })
            .map_err(|e| storage::HostError { message: e.message })
    }

    fn compare_and_swap(
        &mut self,
        key: String,
        expected: Option<u64>,
        value: Option<Vec<u8>>,
        ttl_ms: u64,
    ) -> Result<storage::CasOutcome, storage::HostError> {
        self.services
            .storage
            .compare_and_swap(&key, expected, value.as_deref(), ttl_ms)
            .map(|o| match o {
                CasOutcome::Applied(v) => storage::CasOutcome::Applied(v),
                CasOutcome::Conflict => storage::CasOutcome::Conflict,
            })
            .map_err(|e| storage::HostError { message: e.message })
    }

    fn list_keys(&mut self, prefix: String) -> Result<Vec<String>, storage::HostError> {
        self.services
            .storage
            .list_keys(&prefix)
            .map_err(|e| storage::HostError { message: e.message })
    }
}

impl consent::Host for HostState {
    fn request_consent(
        &mut self,
        prompt: consent::ConsentPrompt,
    ) -> Result<consent::ConsentReceipt, consent::HostError> {
        let prompt = ConsentPrompt {
            view_json: prompt.view_json,
            view_sha256: prompt.view_sha256,
            responses_json: prompt.responses_json,
            responses_sha256: prompt.responses_sha256,
        };
        self.waiting(|s| s.consent.request_consent(&prompt))
            .map(|r| consent::ConsentReceipt {
                receipt_id: r.receipt_id,
                decision: match r.decision {
                    ConsentDecision::Granted => consent::ConsentDecision::Granted,
                    ConsentDecision::Refused => consent::ConsentDecision::Refused,
                },
                view_sha256: r.view_sha256,
                responses_sha256: r.responses_sha256,
            })
            .map_err(|e| consent::HostError { message: e.message })
    }
}

impl audit::Host for HostState {
    fn head(&mut self) -> Result<audit::ChainHead, audit::HostError> {
        self.services
            .audit
            .head()
            .map(|h| audit::ChainHead {
                seq: h.seq,
                event_sha256: h.event_sha256,
            })
            .map_err(|e| audit::HostError { message: e.message })
    }

    fn append(
        &mut self,
        entry: audit::AuditEntry,
    ) -> Result<audit::AppendOutcome, audit::HostError> {
        let entry = AuditEntry {
            seq: entry.seq,
            prev_sha256: entry.prev_sha256,
            event_sha256: entry.event_sha256,
            line: entry.line,
        };
        self.services
            .audit
            .append(&entry)
            .map(|o| match o {
                AppendOutcome::Appended => audit::AppendOutcome::Appended,
                AppendOutcome::HeadMoved(h) => audit::AppendOutcome::HeadMoved(audit::ChainHead {
                    seq: h.seq,
                    event_sha256: h.event_sha256,
                }),
            })
            .map_err(|e| audit::HostError { message: e.message })
    }

    fn read_back(&mut self, seq: u64) -> Result<Option<String>, audit::HostError> {
        self.services
            .audit
            .read_back(seq)
            .map_err(|e| audit::HostError { message: e.message })
    }
}
