//! What a form round costs a host in boundary crossings, counted from outside the component:
//! every import call of the benchmarks' form round (register, the `input_required` response,
//! the retry, the complete response) through counting services. `docs/import-contract.md` states the figure; this test
//! holds the page to it, so a change to the gate's calls changes the page in the same commit.

use crate::support;

use mrtr_gate_host::HostServices;
use mrtr_gate_host::core::host::{
    AppendOutcome, Audit, AuditEntry, Clock, Consent, ConsentPrompt, ConsentReceipt, DuePage,
    HostError, Journaled, Order, ReadKey, Storage, Versioned, Write,
};
use mrtr_gate_testkit::bench::{self, RoundKind};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::ComponentGate;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Import calls, per import.
#[derive(Default)]
struct Calls {
    clock: AtomicU32,
    read: AtomicU32,
    write: AtomicU32,
    list_due: AtomicU32,
    consent: AtomicU32,
    append: AtomicU32,
    journal: AtomicU32,
}

impl Calls {
    fn tally(&self) -> [u32; 7] {
        [
            &self.clock,
            &self.read,
            &self.write,
            &self.list_due,
            &self.consent,
            &self.append,
            &self.journal,
        ]
        .map(|c| c.load(Ordering::SeqCst))
    }
}

/// The scenario's services, each call counted on its way through.
struct Counting {
    inner: HostServices,
    calls: Arc<Calls>,
}

fn bump(c: &AtomicU32) {
    c.fetch_add(1, Ordering::SeqCst);
}

impl Clock for Counting {
    fn now_ms(&self) -> u64 {
        bump(&self.calls.clock);
        self.inner.clock.now_ms()
    }
}

impl Storage for Counting {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        bump(&self.calls.read);
        self.inner.storage.read(keys)
    }
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        bump(&self.calls.write);
        self.inner.storage.write(writes)
    }
    fn list_due(&self, due: u64, cursor: Option<&str>, limit: u32) -> Result<DuePage, HostError> {
        bump(&self.calls.list_due);
        self.inner.storage.list_due(due, cursor, limit)
    }
    /// One `journal` import call (its two steps are the inner services', not counted again).
    fn journal(
        &self,
        _audit: &dyn Audit,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<Journaled, HostError> {
        bump(&self.calls.journal);
        self.inner
            .storage
            .journal(&*self.inner.audit, order, entry, writes)
    }
}

impl Consent for Counting {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        bump(&self.calls.consent);
        self.inner.consent.request_consent(prompt)
    }
}

impl Audit for Counting {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        bump(&self.calls.append);
        self.inner.audit.append(entry)
    }
}

/// The import calls of one form round (the benchmarks' own, `bench::round`), from a gate that
/// already ran one (its caches warm, as in a client's steady state).
fn form_round_calls() -> ([u32; 7], u64) {
    let hosts = ScenarioHosts::new();
    let calls = Arc::new(Calls::default());
    let counting = Arc::new(Counting {
        inner: hosts.services(),
        calls: calls.clone(),
    });
    let services = HostServices {
        clock: counting.clone(),
        storage: counting.clone(),
        consent: counting.clone(),
        audit: counting,
    };
    let mut gate = ComponentGate::new(support::runtime(), services);
    let server = bench::server().unwrap();
    let form = RoundKind::Form {
        distinct_schema: false,
    };
    let round = |gate: &mut ComponentGate, n| {
        bench::round(gate, &server, bench::round_input(&server, n, form)).unwrap()
    };
    round(&mut gate, 1);
    let (before, digests_before) = (calls.tally(), gate.digests_answered());
    round(&mut gate, 2);
    let (after, digests_after) = (calls.tally(), gate.digests_answered());
    (
        std::array::from_fn(|i| after[i] - before[i]),
        digests_after - digests_before,
    )
}

#[test]
fn docs_state_the_import_calls_of_a_form_round() {
    let ([clock, read, write, list_due, consent, append, journal], digests) = form_round_calls();
    assert_eq!(list_due, 0, "a round never lists due keys");
    let total = clock + read + write + consent + append + journal;
    let s = |n: u32| if n == 1 { "" } else { "s" };
    let sentence = format!(
        "A form round makes {total} import calls: {clock} clock, {read} storage read{}, \
         {write} storage write{}, {journal} journal call{}, {append} audit append{} and \
         {consent} consent; and {digests} digest calls",
        s(read),
        s(write),
        s(journal),
        s(append),
    );
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/import-contract.md"),
    )
    .unwrap();
    // The page wraps its lines; compare with every run of whitespace as one space.
    let flat = page.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&sentence),
        "docs/import-contract.md must say: {sentence}"
    );
}
