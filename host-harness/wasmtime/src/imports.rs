//! The wasmtime side of the component's imports (`mrtr:gate/{clock,storage,consent,audit,journal,digest}`):
//! the store's state, and adapters from the WIT interfaces to the core's host traits, so one
//! implementation of a service ([`HostServices`]) serves both the component and the native core
//! (every type conversion is in [`crate::convert`]).

use crate::bindings::mrtr::gate::{audit, clock, consent, digest, journal, storage};
use crate::deadline::GuestDeadline;
use mrtr_gate_core::host::{AuditEntry, ConsentPrompt, Order, ReadKey, Write};
use mrtr_gate_host::HostServices;
use wasmtime::StoreLimits;

/// What a wasmtime store holds: the services and the memory cap.
pub struct HostState {
    pub(crate) services: HostServices,
    pub(crate) limits: StoreLimits,
    /// The largest linear memory the guest was granted so far.
    pub(crate) granted: usize,
    /// The current call's deadline accounting (deadline budgets only).
    pub(crate) deadline: Option<GuestDeadline>,
    /// How many `digest` calls this store answered.
    pub(crate) digests: u64,
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
        let keys: Vec<ReadKey<'_>> = keys.iter().map(Into::into).collect();
        self.services
            .storage
            .read(&keys)
            .map(|found| found.into_iter().map(Into::into).collect())
            .map_err(Into::into)
    }

    fn write(&mut self, writes: Vec<storage::WriteOp>) -> Result<Vec<u64>, String> {
        let writes: Vec<Write<'_>> = writes.iter().map(Into::into).collect();
        self.services.storage.write(&writes).map_err(Into::into)
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
        .map(Into::into)
        .map_err(Into::into)
    }
}

impl consent::Host for HostState {
    fn request_consent(
        &mut self,
        prompt: consent::ConsentPrompt,
    ) -> Result<consent::ConsentReceipt, String> {
        let prompt = ConsentPrompt::from(prompt);
        self.off_budget(true, |s| s.consent.request_consent(&prompt))
            .map(Into::into)
            .map_err(Into::into)
    }
}

impl audit::Host for HostState {
    fn append(&mut self, entry: audit::AuditEntry) -> Result<audit::AppendOutcome, String> {
        let entry = AuditEntry::from(entry);
        match self.services.audit.append(&entry) {
            Ok(outcome) => Ok((outcome, entry).into()),
            Err(e) => Err(e.into()),
        }
    }
}

impl HostState {
    /// One journal call over the services' store and sink ([`mrtr_gate_core::host::journal`]:
    /// one step on a store that can fuse the two, the two calls in order otherwise).
    fn journal(
        &self,
        order: Order,
        entry: audit::AuditEntry,
        writes: &[storage::WriteOp],
    ) -> Result<journal::Journaled, String> {
        let entry = AuditEntry::from(entry);
        let writes: Vec<Write<'_>> = writes.iter().map(Into::into).collect();
        let services = &self.services;
        mrtr_gate_core::host::journal(&*services.storage, &*services.audit, order, &entry, &writes)
            .map(|done| (done, entry).into())
            .map_err(Into::into)
    }
}

impl journal::Host for HostState {
    fn append_then_write(
        &mut self,
        entry: audit::AuditEntry,
        writes: Vec<storage::WriteOp>,
    ) -> Result<journal::Journaled, String> {
        self.journal(Order::AppendThenWrite, entry, &writes)
    }

    fn write_then_append(
        &mut self,
        writes: Vec<storage::WriteOp>,
        entry: audit::AuditEntry,
    ) -> Result<journal::Journaled, String> {
        self.journal(Order::WriteThenAppend, entry, &writes)
    }
}

impl digest::Host for HostState {
    /// The CPU's SHA extensions where it has them (`sha2` picks them at run time).
    fn sha256(&mut self, text: String) -> Option<String> {
        self.digests += 1;
        Some(mrtr_gate_core::digest::sha256_hex(text.as_bytes()))
    }
}
