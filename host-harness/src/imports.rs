//! The wasmtime side of the component's four imports (`mrtr:gate/{clock,storage,consent,audit}`):
//! the store's state, and adapters from the WIT interfaces to the core's host traits, so one
//! implementation of a service ([`HostServices`]) serves both the component and the native core.

use crate::bindings::mrtr::gate::{audit, clock, consent, storage};
use crate::deadline::GuestDeadline;
use crate::services::HostServices;
use mrtr_gate_core::host::{
    AppendOutcome, AuditEntry, ConsentDecision, ConsentMethod, ConsentPrompt, ReadKey, Write,
};
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

impl HostState {
    /// The largest linear memory granted to the guest, in bytes.
    pub fn limits_granted(&self) -> usize {
        self.granted
    }

    /// Run host work off the guest's CPU budget (and, with `person`, off the wall backstop:
    /// it waits on a user). Only the imports that can take long on this thread go through
    /// here; why not the others: [`GuestDeadline`].
    fn off_budget<R>(&mut self, person: bool, f: impl FnOnce(&HostServices) -> R) -> R {
        match self.deadline.as_mut() {
            Some(deadline) => deadline.off_budget(person, || f(&self.services)),
            None => f(&self.services),
        }
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
    fn read(&mut self, keys: Vec<storage::ReadKey>) -> Result<Vec<storage::Entry>, String> {
        let keys: Vec<ReadKey<'_>> = keys
            .iter()
            .map(|k| ReadKey {
                key: &k.key,
                have: (k.have != 0).then_some(k.have),
            })
            .collect();
        self.services
            .storage
            .read(&keys)
            .map(|found| {
                found
                    .into_iter()
                    .map(|e| match e {
                        Some(v) => storage::Entry {
                            version: v.version,
                            value: v.value,
                        },
                        None => storage::Entry {
                            version: 0,
                            value: String::new(),
                        },
                    })
                    .collect()
            })
            .map_err(|e| e.message)
    }

    fn write(&mut self, writes: Vec<storage::WriteOp>) -> Result<Vec<u64>, String> {
        let writes: Vec<Write<'_>> = writes
            .iter()
            .map(|w| Write {
                key: &w.key,
                expected: (w.expected != 0).then_some(w.expected),
                value: w.value.as_deref(),
                ttl_ms: w.ttl_ms,
            })
            .collect();
        self.services.storage.write(&writes).map_err(|e| e.message)
    }

    fn list_due(
        &mut self,
        due_by_ms: u64,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<storage::DuePage, String> {
        self.off_budget(false, |s| {
            s.storage.list_due(due_by_ms, cursor.as_deref(), limit)
        })
        .map(|p| storage::DuePage {
            keys: p.keys,
            next: p.next,
        })
        .map_err(|e| e.message)
    }
}

impl consent::Host for HostState {
    fn request_consent(
        &mut self,
        prompt: consent::ConsentPrompt,
    ) -> Result<consent::ConsentReceipt, String> {
        let prompt = ConsentPrompt {
            view_json: prompt.view_json,
            view_sha256: prompt.view_sha256,
            responses_json: prompt.responses_json,
            responses_sha256: prompt.responses_sha256,
        };
        self.off_budget(true, |s| s.consent.request_consent(&prompt))
            .map(|r| consent::ConsentReceipt {
                receipt_id: r.receipt_id,
                decision: match r.decision {
                    ConsentDecision::Granted => consent::ConsentDecision::Granted,
                    ConsentDecision::Refused => consent::ConsentDecision::Refused,
                },
                method: match r.method {
                    ConsentMethod::UserAtScreen => consent::ConsentMethod::UserAtScreen,
                    ConsentMethod::PresetAnswers => consent::ConsentMethod::PresetAnswers,
                    ConsentMethod::DelegatedToClient => consent::ConsentMethod::DelegatedToClient,
                    ConsentMethod::PolicyHook => consent::ConsentMethod::PolicyHook,
                },
                view_sha256: r.view_sha256,
                responses_sha256: r.responses_sha256,
            })
            .map_err(|e| e.message)
    }
}

impl audit::Host for HostState {
    fn append(&mut self, entry: audit::AuditEntry) -> Result<audit::AppendOutcome, String> {
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
                AppendOutcome::Written { stored } => audit::AppendOutcome {
                    written: true,
                    stored,
                    head_seq: entry.seq,
                    head_sha256: entry.event_sha256,
                },
                AppendOutcome::HeadMoved(h) => audit::AppendOutcome {
                    written: false,
                    stored: None,
                    head_seq: h.seq,
                    head_sha256: h.event_sha256,
                },
            })
            .map_err(|e| e.message)
    }
}
