//! The `mrtr:gate` component: a thin adapter between the WIT world `gate-plugin` and
//! `mrtr-gate-core`. No policy lives here: the imports reach the host, the exports reach the
//! one instance of the core that the component holds (every type conversion is in
//! [`convert`]). Its caches survive between calls; its bindings need not: they live in the
//! host's storage.

// The generated bindings need `unsafe`; the policy core does not.
#![allow(unsafe_code)]
#![allow(missing_docs)]

mod bindings {
    wit_bindgen::generate!({
        world: "gate-plugin",
        path: "../../wit",
        // Records passed to imports borrow their strings: an audit line or a consent view
        // goes to the host without a copy made only to be dropped after the call.
        ownership: Borrowing {
            duplicate_if_necessary: false
        },
    });
}

mod convert;
mod mem;

use bindings::exports::mrtr::gate::gate as wit;
use bindings::mrtr::gate::{audit, clock, consent, digest, journal, storage};
use mrtr_gate_core as core;
use mrtr_gate_core::host::{
    AppendOutcome, Audit, AuditEntry, ConsentPrompt, ConsentReceipt, DuePage, HostError, Journaled,
    Order, ReadKey, Versioned, Write,
};
use std::cell::RefCell;

/// The host services, reached through the component's imports.
struct Imports;

impl core::host::Clock for Imports {
    fn now_ms(&self) -> u64 {
        clock::now_ms()
    }
}

impl core::host::Storage for Imports {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        let keys: Vec<storage::ReadKey<'_>> = keys.iter().map(Into::into).collect();
        storage::read(&keys)
            .map(|entries| entries.into_iter().map(Into::into).collect())
            .map_err(HostError::new)
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let writes: Vec<storage::WriteOp<'_>> = writes.iter().map(Into::into).collect();
        storage::write(&writes).map_err(HostError::new)
    }

    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        storage::list_due(due_by_ms, cursor, limit)
            .map(Into::into)
            .map_err(HostError::new)
    }

    /// The `journal` import: the host makes both steps (one at a time, or at once), and the
    /// sink is its own (`Imports` again).
    fn journal(
        &self,
        _audit: &dyn Audit,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<Journaled, HostError> {
        let writes: Vec<storage::WriteOp<'_>> = writes.iter().map(Into::into).collect();
        match order {
            Order::AppendThenWrite => journal::append_then_write(entry.into(), &writes),
            Order::WriteThenAppend => journal::write_then_append(&writes, entry.into()),
        }
        .map(Into::into)
        .map_err(HostError::new)
    }
}

impl core::host::Consent for Imports {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        consent::request_consent(prompt.into())
            .map(Into::into)
            .map_err(HostError::new)
    }
}

impl core::host::Audit for Imports {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        audit::append(entry.into())
            .map(Into::into)
            .map_err(HostError::new)
    }
}

/// The services bundle the core runs over.
type Host = core::host::Services<Imports, Imports, Imports, Imports>;

thread_local! {
    static GATE: RefCell<core::Gate<Host>> = RefCell::new({
        // The host's SHA-256 (the `digest` import); the core checks each answer's shape.
        core::digest::accelerate(digest::sha256);
        core::Gate::new(core::host::Services {
            clock: Imports,
            storage: Imports,
            consent: Imports,
            audit: Imports,
        })
    });
}

fn with_gate<T>(f: impl FnOnce(&mut core::Gate<Host>) -> T) -> T {
    GATE.with(|g| f(&mut g.borrow_mut()))
}

struct Component;

impl wit::Guest for Component {
    fn register(r: wit::Registration) -> Result<wit::Registered, wit::GateError> {
        let registration = core::Registration::try_from(r)?;
        with_gate(|g| g.register(registration))
            .map(Into::into)
            .map_err(Into::into)
    }

    fn accept_response(
        server: wit::ServerIdentity,
        response_json: String,
    ) -> Result<wit::ResponseVerdict, wit::GateError> {
        let server = core::ServerIdentity::try_from(server)?;
        with_gate(|g| g.accept_response(&server, &response_json))
            .map(Into::into)
            .map_err(Into::into)
    }

    fn build_retry(r: wit::RetryRequest) -> Result<wit::Retry, wit::GateError> {
        let request = core::RetryRequest::try_from(r)?;
        with_gate(|g| g.build_retry(request))
            .map(Into::into)
            .map_err(Into::into)
    }

    fn retry_from_client(r: wit::ClientRetry) -> Result<wit::Retry, wit::GateError> {
        let request = core::ClientRetry::try_from(r)?;
        with_gate(|g| g.retry_from_client(request))
            .map(Into::into)
            .map_err(Into::into)
    }

    fn refuse_unbound(
        server: wit::ServerIdentity,
        user: String,
        tenant: String,
        refusal: wit::UnboundRefusal,
    ) -> wit::GateError {
        let refusal = core::Unbound::from(refusal);
        match core::ServerIdentity::try_from(server) {
            Ok(server) => with_gate(|g| g.refuse_unbound(&server, &user, &tenant, &refusal)).into(),
            Err(e) => e.into(),
        }
    }

    fn finish(r: wit::FinishRequest) -> Result<wit::TerminalOutcome, wit::GateError> {
        let request = core::FinishRequest::try_from(r)?;
        with_gate(|g| g.finish(request))
            .map(Into::into)
            .map_err(Into::into)
    }

    fn expire_stale() -> Result<u32, wit::GateError> {
        with_gate(core::Gate::expire_stale).map_err(Into::into)
    }
}

bindings::export!(Component with_types_in bindings);
