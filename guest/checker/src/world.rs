//! The hosts every gate of a run shares, as one world: the store, the audit sink, the clock
//! and the consent provider, with the faults a run may inject into them and the log of every
//! host call made. The store and the sink may each run as a master with an asynchronous
//! replica ([`crate::replica`]). Nothing here yields to the scheduler: the per-gate wrappers
//! ([`crate::gate_host`]) do, before each call, so every call is one atomic step.

use crate::replica::{Confirm, Held, Replica, Replication, Service};
use crate::trail::{self, Violation};
use mrtr_gate_core::host::{
    AppendOutcome, Audit, AuditEntry, ConsentDecision, ConsentMethod, ConsentPrompt,
    ConsentReceipt, DuePage, HostError, ReadKey, Versioned, Write,
};
use mrtr_gate_core::memory::{AuditFault, MemoryAudit};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The time every run starts at.
pub const T0: u64 = 1_700_000_000_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The checker runs one thread at a time (shuttle), and every update is a single step:
    // a lock poisoned by a failing run still holds consistent data for its report.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the store's versions do when it loses its data or its counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionsAfterLoss {
    /// The storage contract since commit 9b4e630 (wit/gate.wit, `storage`): a new life,
    /// its own epoch in the high 32 bits, so no version comes round again.
    NewEpoch,
    /// The counter starts again at 1, as the Redis store did before that commit (its counter
    /// was an ordinary key, lost with the rest): versions a gate may still hold come round.
    RestartAtOne,
}

/// One key of the store.
#[derive(Clone, Debug)]
struct Slot {
    value: String,
    version: u64,
    expires_at_ms: u64,
}

/// The shared store's state: keys, the counter of the current life and its epoch.
#[derive(Clone, Debug)]
struct StoreState {
    slots: BTreeMap<String, Slot>,
    epoch: u64,
    counter: u64,
}

impl StoreState {
    fn new() -> Self {
        Self {
            slots: BTreeMap::new(),
            epoch: 0,
            counter: 0,
        }
    }

    fn live(&self, key: &str, now: u64) -> Option<&Slot> {
        self.slots.get(key).filter(|s| s.expires_at_ms > now)
    }

    fn next_version(&mut self) -> u64 {
        self.counter = self.counter.saturating_add(1);
        (self.epoch << 32) | self.counter
    }

    /// The counter is lost: a new life, as `mode` says.
    fn lose_counter(&mut self, mode: VersionsAfterLoss) {
        match mode {
            // Deterministic (a schedule replays exactly), and never an epoch used before.
            VersionsAfterLoss::NewEpoch => self.epoch = self.epoch.saturating_add(1),
            VersionsAfterLoss::RestartAtOne => {}
        }
        self.counter = 0;
    }
}

/// A fault the checker may place anywhere in a run (the fault thread applies them in order,
/// each at a point the scheduler picks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The store restarts empty (or is flushed): every key and the counter lost.
    StoreRestart,
    /// The store loses its version counter and keeps its keys.
    LoseCounter,
    /// The store evicts the key of this request id (its record or retry pointer).
    Evict(i64),
    /// The process of this gate dies: its next host call fails and does nothing, and a
    /// fresh gate (no cache) takes its place before its next operation.
    Kill(usize),
    /// The clock jumps forward by this much.
    ClockForward(u64),
    /// The clock is set back by this much.
    ClockBack(u64),
    /// The audit sink refuses the next append.
    SinkRefuse,
    /// The audit sink writes the next append but its read-back finds nothing (a write lost
    /// on the way to the durable medium).
    SinkReadbackLost,
    /// The audit sink loses its newest line, whose write it had confirmed (a store that
    /// restarts without it, a file truncated): the head goes back to the line before.
    SinkLoseNewest,
    /// The next consent asked is refused.
    ConsentRefuse,
    /// The next consent asked is granted for another view.
    ConsentOtherView,
    /// The store's master dies and its replica is promoted: every write the replica did not
    /// hold yet is lost, and versions go on in a new life (the promoted replica is another
    /// server run, wit/gate.wit `storage`). Nothing when the store is not replicated.
    PromoteStore,
    /// The sink's master dies and its replica is promoted: every line the replica did not
    /// hold yet is lost (the head goes back). Nothing when the sink is not replicated.
    PromoteSink,
    /// The next WAIT that finds its write not yet on the replica times out: the call is a host
    /// error, its write applied on the master (the replica may take it later, or a promotion
    /// lose it).
    WaitTimesOut,
    /// Not a fault: one step of the service's replication, placed anywhere like one. Its
    /// replica takes the oldest write it does not hold yet (nothing when it holds them all).
    /// Every write no step took lags, however long, until a WAIT that ends in time.
    Replicate(Service),
}

/// The consent faults armed, each for the next prompt.
#[derive(Debug, Default)]
struct ConsentState {
    refuse_next: bool,
    other_view_next: bool,
    issued: u64,
    /// Every receipt issued, by id: (decision, view digest, answers digest).
    receipts: BTreeMap<String, (ConsentDecision, String, String)>,
}

/// Everything the gates of one run share.
pub struct World {
    mode: VersionsAfterLoss,
    replication: Replication,
    /// The store's master.
    store: Mutex<StoreState>,
    /// The store's replica, when replicated.
    store_replica: Option<Mutex<Replica<StoreState, StoreState>>>,
    /// The sink's master (replaced by its replica's lines on a promotion).
    sink: Mutex<MemoryAudit>,
    /// The sink's replica, when replicated.
    sink_replica: Option<Mutex<Replica<Vec<AuditEntry>, AuditEntry>>>,
    /// Whether the replicas lag yet: not before the run starts, whose state they hold
    /// already ([`World::settle`]).
    replicating: Mutex<bool>,
    wait_times_out: Mutex<bool>,
    /// Every line an append confirmed to its gate, in order.
    confirmed: Mutex<Vec<String>>,
    /// Whether a fault that loses a confirmed line by design (`SinkLoseNewest`) was injected.
    sink_loses_confirmed: Mutex<bool>,
    /// Every line the sink ever wrote, in the order written, whatever it lost since: the
    /// invariants are held over this (a line lost cannot hide a round used twice).
    ledger: Mutex<Vec<String>>,
    sink_refuse_next: Mutex<bool>,
    sink_lose_next: Mutex<bool>,
    clock: Mutex<u64>,
    consent: Mutex<ConsentState>,
    killed: Mutex<BTreeSet<usize>>,
    /// Whether any process was killed in the run.
    a_process_died: Mutex<bool>,
    faults_in_sink: Mutex<bool>,
    /// Lines written whose WAIT failed ([`World::doubt_line`]).
    doubtful: Mutex<Vec<String>>,
    faults_in_store: Mutex<bool>,
    /// Every host call made, in the order made.
    log: Mutex<Vec<String>>,
    /// The first invariant broken, with the log up to it.
    violation: Mutex<Option<Violation>>,
    /// The retry ids of the retries the gates returned.
    built: Mutex<Vec<serde_json::Value>>,
    /// Per gate, the keys its current operation put, with the versions they got.
    op_puts: Mutex<BTreeMap<usize, Vec<(String, u64)>>>,
}

impl World {
    /// A world whose store follows `mode` after a loss, its services replicated as
    /// `replication` says.
    pub fn new(mode: VersionsAfterLoss, replication: Replication) -> Self {
        Self {
            mode,
            replication,
            store: Mutex::new(StoreState::new()),
            store_replica: replication
                .store
                .then(|| Mutex::new(Replica::new(StoreState::new()))),
            sink: Mutex::new(MemoryAudit::new()),
            sink_replica: replication
                .sink
                .then(|| Mutex::new(Replica::new(Vec::new()))),
            replicating: Mutex::new(false),
            wait_times_out: Mutex::new(false),
            confirmed: Mutex::new(Vec::new()),
            sink_loses_confirmed: Mutex::new(false),
            ledger: Mutex::new(Vec::new()),
            sink_refuse_next: Mutex::new(false),
            sink_lose_next: Mutex::new(false),
            clock: Mutex::new(T0),
            consent: Mutex::new(ConsentState::default()),
            killed: Mutex::new(BTreeSet::new()),
            a_process_died: Mutex::new(false),
            faults_in_sink: Mutex::new(false),
            doubtful: Mutex::new(Vec::new()),
            faults_in_store: Mutex::new(false),
            log: Mutex::new(Vec::new()),
            violation: Mutex::new(None),
            built: Mutex::new(Vec::new()),
            op_puts: Mutex::new(BTreeMap::new()),
        }
    }

    /// Note a step in the log.
    pub fn note(&self, line: String) {
        lock(&self.log).push(line);
    }

    /// The log so far.
    pub fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// Keep the first violation seen.
    pub fn violated(&self, what: String) {
        let mut v = lock(&self.violation);
        if v.is_none() {
            self.note(format!("VIOLATION {what}"));
            *v = Some(Violation {
                what,
                log: self.log(),
            });
        }
    }

    /// The first violation seen, if any.
    pub fn violation(&self) -> Option<Violation> {
        lock(&self.violation).clone()
    }

    /// Whether a fault was injected in the sink.
    pub fn sink_faulted(&self) -> bool {
        *lock(&self.faults_in_sink)
    }

    /// Note a line the sink wrote whose WAIT failed: its writer was told the append failed
    /// and denied as if it were unwritten (a `received` whose round is then never stored,
    /// nor refused), yet the line stays unless a promotion loses it.
    pub fn doubt_line(&self, line: &str) {
        lock(&self.doubtful).push(line.to_owned());
    }

    /// The lines [`Self::doubt_line`] noted.
    pub fn doubtful_lines(&self) -> Vec<String> {
        lock(&self.doubtful).clone()
    }

    /// Whether a process was killed: one killed between its `received` event and its store
    /// of that round leaves a `received` nothing follows, which `reconcile` reports (it cannot
    /// tell a process that died from one that stored the round and lost it).
    pub fn a_process_died(&self) -> bool {
        *lock(&self.a_process_died)
    }

    /// Whether the store lost records (a restart, an eviction, a promotion that lost
    /// writes), not only its counter: the trail may then hold a binding nothing ended, and the
    /// id's next binding received again on top of it.
    pub fn store_lost_records(&self) -> bool {
        *lock(&self.faults_in_store)
    }

    /// Every line the sink holds (its master).
    pub fn lines(&self) -> Vec<String> {
        self.sink().entries().into_iter().map(|e| e.line).collect()
    }

    /// The sink's master (a handle on it: a promotion replaces it).
    fn sink(&self) -> MemoryAudit {
        lock(&self.sink).clone()
    }

    /// Every line an append confirmed to its gate, in order.
    pub fn confirmed(&self) -> Vec<String> {
        lock(&self.confirmed).clone()
    }

    /// Whether the sink lost a confirmed line by design (`SinkLoseNewest`): then only the
    /// ledger's invariants hold, not that every confirmed line stays.
    pub fn sink_loses_confirmed(&self) -> bool {
        *lock(&self.sink_loses_confirmed)
    }

    /// The run starts: the replicas hold what the masters hold (the state the configuration
    /// starts from has long been copied), and from now on lag.
    pub fn settle(&self) {
        if let Some(r) = &self.store_replica {
            lock(r).settle(lock(&self.store).clone());
        }
        if let Some(r) = &self.sink_replica {
            lock(r).settle(self.sink().entries());
        }
        *lock(&self.replicating) = true;
    }

    /// One step of `service`'s replication: its replica takes the oldest write it lacks.
    fn replicate_one(&self, service: Service) {
        let taken = match service {
            Service::Store => self
                .store_replica
                .as_ref()
                .and_then(|r| lock(r).take_one(replace)),
            Service::Sink => self
                .sink_replica
                .as_ref()
                .and_then(|r| lock(r).take_one(push)),
        };
        match taken {
            Some(n) => self.note(format!("  the replica holds write {n}")),
            None => self.note("  nothing to take".into()),
        }
    }

    /// Whether a write call to `service` waits for the replica (and a WAIT is a step).
    pub fn waits(&self, service: Service) -> bool {
        self.replication.confirm == Confirm::WaitForReplica
            && match service {
                Service::Store => self.replication.store,
                Service::Sink => self.replication.sink,
            }
    }

    /// The WAIT on write `number` of `service`, once the scheduler let anything else happen
    /// after the master applied it: confirmed once the replica holds it (taking every write up
    /// to it now, if it had not yet: the replica acknowledged in time), else the host's error
    /// (host-harness/redis, `Options::confirmed`), the write applied on the master all the same.
    pub fn wait(&self, service: Service, number: u64) -> Result<(), HostError> {
        let held = match service {
            Service::Store => self.store_replica.as_ref().map(|r| lock(r).held(number)),
            Service::Sink => self.sink_replica.as_ref().map(|r| lock(r).held(number)),
        };
        let what = match service {
            Service::Store => "storage",
            Service::Sink => "audit",
        };
        match held {
            None | Some(Held::Held) => Ok(()),
            Some(Held::Lost) => Err(HostError::new(format!(
                "{what} write lost: the master failed over before a replica held it"
            ))),
            Some(Held::Pending) => {
                if std::mem::take(&mut *lock(&self.wait_times_out)) {
                    return Err(HostError::new(format!(
                        "{what} write held by 0 of the 1 replicas it waits for"
                    )));
                }
                match service {
                    Service::Store => {
                        if let Some(r) = &self.store_replica {
                            lock(r).take_through(number, replace);
                        }
                    }
                    Service::Sink => {
                        if let Some(r) = &self.sink_replica {
                            lock(r).take_through(number, push);
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// An append was confirmed to its gate.
    pub fn confirm_line(&self, line: &str) {
        lock(&self.confirmed).push(line.to_owned());
    }

    /// Every line confirmed to a gate is still in the sink (unless a fault loses confirmed
    /// lines by design): the promise a confirmation makes, which a promotion must not break.
    pub fn check_confirmed(&self) -> Result<(), String> {
        if self.sink_loses_confirmed() {
            return Ok(());
        }
        let held = self.lines();
        match self.confirmed().into_iter().find(|l| !held.contains(l)) {
            None => Ok(()),
            Some(line) => {
                let event: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                Err(format!(
                    "a line confirmed to its gate is not in the trail: seq {} {}",
                    event.get("seq").unwrap_or(&serde_json::Value::Null),
                    event.get("event").unwrap_or(&serde_json::Value::Null),
                ))
            }
        }
    }

    /// Every line the sink ever wrote, in order, those it lost since among them.
    pub fn ledger(&self) -> Vec<String> {
        lock(&self.ledger).clone()
    }

    /// A retry a gate returned (by its retry id).
    pub fn record_built(&self, retry_id: serde_json::Value) {
        lock(&self.built).push(retry_id);
    }

    /// The retry ids of every retry returned.
    pub fn built(&self) -> Vec<serde_json::Value> {
        lock(&self.built).clone()
    }

    /// The receipt issued under `id`: (decision, view digest, answers digest).
    pub fn receipt(&self, id: &str) -> Option<(ConsentDecision, String, String)> {
        lock(&self.consent).receipts.get(id).cloned()
    }

    /// Whether `gate`'s process is dead (killed, not replaced yet).
    pub fn is_dead(&self, gate: usize) -> bool {
        lock(&self.killed).contains(&gate)
    }

    /// Replace `gate`'s process if it died: true when it had.
    pub fn revive(&self, gate: usize) -> bool {
        lock(&self.killed).remove(&gate)
    }

    /// Apply `fault` now.
    pub fn inject(&self, fault: Fault) {
        self.note(format!("FAULT {fault:?}"));
        match fault {
            Fault::StoreRestart => {
                let mode = self.mode;
                self.every_store_copy(|s| {
                    s.slots.clear();
                    s.lose_counter(mode);
                });
                *lock(&self.faults_in_store) = true;
            }
            Fault::LoseCounter => {
                let mode = self.mode;
                self.every_store_copy(|s| s.lose_counter(mode));
            }
            Fault::Evict(id) => {
                let suffix = format!("/{id}");
                self.every_store_copy(|s| s.slots.retain(|k, _| !k.ends_with(&suffix)));
                *lock(&self.faults_in_store) = true;
            }
            Fault::Kill(gate) => {
                lock(&self.killed).insert(gate);
                *lock(&self.a_process_died) = true;
            }
            Fault::ClockForward(ms) => {
                let mut c = lock(&self.clock);
                *c = c.saturating_add(ms);
            }
            Fault::ClockBack(ms) => {
                let mut c = lock(&self.clock);
                *c = c.saturating_sub(ms);
            }
            Fault::SinkRefuse => {
                *lock(&self.sink_refuse_next) = true;
                *lock(&self.faults_in_sink) = true;
            }
            Fault::SinkReadbackLost => {
                *lock(&self.sink_lose_next) = true;
                *lock(&self.faults_in_sink) = true;
            }
            Fault::SinkLoseNewest => {
                if let Some(lost) = self.sink().lose_newest() {
                    self.note(format!("  lost seq {}", lost.seq));
                    // Lost from every copy: the replica had it, or it was still on its way.
                    if let Some(r) = &self.sink_replica {
                        let mut r = lock(r);
                        if !r.drop_newest_pending() {
                            r.held_mut().pop();
                        }
                    }
                }
                *lock(&self.faults_in_sink) = true;
                *lock(&self.sink_loses_confirmed) = true;
            }
            Fault::ConsentRefuse => lock(&self.consent).refuse_next = true,
            Fault::ConsentOtherView => lock(&self.consent).other_view_next = true,
            Fault::PromoteStore => {
                if let Some(r) = &self.store_replica {
                    let mut r = lock(r);
                    let (mut master, lost) = r.promote();
                    master.lose_counter(self.mode);
                    r.settle(master.clone());
                    *lock(&self.store) = master;
                    self.note(format!("  {lost} writes lost"));
                    if lost > 0 {
                        *lock(&self.faults_in_store) = true;
                    }
                }
            }
            Fault::PromoteSink => {
                if let Some(r) = &self.sink_replica {
                    let mut r = lock(r);
                    let (entries, lost) = r.promote();
                    let promoted = MemoryAudit::new();
                    for entry in &entries {
                        // The replica's lines are a prefix of the master's chain: each extends
                        // the one before, so each is written.
                        if !promoted.append(entry).is_ok_and(|o| o.written) {
                            self.violated(format!(
                                "the checker itself failed: the replica's line seq {} does not \
                                 extend the one before",
                                entry.seq
                            ));
                        }
                    }
                    r.settle(entries);
                    *lock(&self.sink) = promoted;
                    self.note(format!("  {lost} lines lost"));
                    if lost > 0 {
                        *lock(&self.faults_in_sink) = true;
                    }
                }
                if let Err(what) = self.check_confirmed() {
                    self.violated(what);
                }
            }
            Fault::WaitTimesOut => *lock(&self.wait_times_out) = true,
            Fault::Replicate(service) => self.replicate_one(service),
        }
    }

    /// A fault that changes the store's data (a restart, a counter lost, an eviction) changes
    /// every copy alike: replication plays no part in it.
    fn every_store_copy(&self, change: impl Fn(&mut StoreState)) {
        change(&mut lock(&self.store));
        if let Some(r) = &self.store_replica {
            let mut r = lock(r);
            change(r.held_mut());
            r.pending_mut().for_each(&change);
        }
    }

    /// The clock.
    pub fn now_ms(&self) -> u64 {
        *lock(&self.clock)
    }

    /// `Storage::read`, keys live by the world's clock.
    pub fn read(&self, keys: &[ReadKey<'_>]) -> Vec<Versioned> {
        let now = self.now_ms();
        let s = lock(&self.store);
        keys.iter()
            .map(|k| match s.live(k.key, now) {
                Some(slot) => Versioned {
                    value: if have_of(k) == slot.version {
                        String::new()
                    } else {
                        slot.value.clone()
                    },
                    version: slot.version,
                },
                None => Versioned::absent(),
            })
            .collect()
    }

    /// `Storage::write`: compare-and-swaps in order, stopping at the first that loses. On a
    /// replicated store, the number of the write for a WAIT when it changed anything.
    pub fn write(&self, writes: &[Write<'_>]) -> (Vec<u64>, Option<u64>) {
        let now = self.now_ms();
        let mut s = lock(&self.store);
        let mut applied = Vec::with_capacity(writes.len());
        for w in writes {
            let current = s.live(w.key, now).map_or(0, |slot| slot.version);
            if current != w.expected {
                break;
            }
            match w.value {
                None => {
                    s.slots.remove(w.key);
                    applied.push(0);
                }
                Some(text) => {
                    let version = s.next_version();
                    s.slots.insert(
                        w.key.to_owned(),
                        Slot {
                            value: text.to_owned(),
                            version,
                            expires_at_ms: now.saturating_add(w.ttl_ms),
                        },
                    );
                    applied.push(version);
                }
            }
        }
        let number = match &self.store_replica {
            Some(r) if !applied.is_empty() && *lock(&self.replicating) => {
                Some(lock(r).applied(s.clone()))
            }
            _ => None,
        };
        (applied, number)
    }

    /// The clock moves forward by `ms` (a late message's delay).
    pub fn advance_clock(&self, ms: u64) {
        self.note(format!("CLOCK +{ms} ms"));
        let mut c = lock(&self.clock);
        *c = c.saturating_add(ms);
    }

    /// Gate `gate` begins an operation: what it puts from now on is its own.
    pub fn begin_op(&self, gate: usize) {
        lock(&self.op_puts).remove(&gate);
    }

    /// The puts of `writes` that applied, as gate `gate`'s.
    pub fn record_puts(&self, gate: usize, writes: &[Write<'_>], applied: &[u64]) {
        let mut puts = lock(&self.op_puts);
        let mine = puts.entry(gate).or_default();
        for (w, v) in writes.iter().zip(applied) {
            if w.value.is_some() {
                mine.push((w.key.to_owned(), *v));
            }
        }
    }

    /// A denied operation of gate `gate` changed nothing it should not have: of what it
    /// put, what still stands is at most a round spent and a retry never handed out (a
    /// record with no open round, not marked sent: its clean-up failed), or a retry id's
    /// pointer (it makes the id answerable only through a record whose live id it is, sent).
    /// Never a binding registered, a round opened or a retry handed out.
    pub fn check_denied(&self, gate: usize) -> Result<(), String> {
        let puts = lock(&self.op_puts).remove(&gate).unwrap_or_default();
        let now = self.now_ms();
        let s = lock(&self.store);
        for (key, version) in puts {
            let Some(slot) = s.live(&key, now).filter(|slot| slot.version == version) else {
                continue;
            };
            if !slot.value.starts_with('{') {
                continue;
            }
            let record: serde_json::Value =
                serde_json::from_str(&slot.value).unwrap_or(serde_json::Value::Null);
            let spent = record.get("open").is_some_and(serde_json::Value::is_null)
                && record.get("sent") == Some(&serde_json::Value::Bool(false));
            if !spent {
                return Err(format!(
                    "a denied call left a record it wrote in force: key {key} at v{version:#x}"
                ));
            }
        }
        Ok(())
    }

    /// `Storage::list_due`: deadline order, the cursor the last (deadline, key) listed.
    pub fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        if limit == 0 {
            return Err(HostError::new("list-due limit is 0"));
        }
        let after = match cursor {
            None => None,
            Some(c) => Some(
                c.split_once(':')
                    .and_then(|(d, k)| Some((d.parse::<u64>().ok()?, k.to_owned())))
                    .ok_or_else(|| HostError::new("list-due cursor not made by this store"))?,
            ),
        };
        let now = self.now_ms();
        let s = lock(&self.store);
        let mut due: Vec<(u64, String)> = s
            .slots
            .iter()
            .filter(|(_, slot)| slot.expires_at_ms > now && slot.expires_at_ms <= due_by_ms)
            .map(|(k, slot)| (slot.expires_at_ms, k.clone()))
            .filter(|entry| after.as_ref().is_none_or(|a| entry > a))
            .collect();
        due.sort();
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let more = due.len() > limit;
        due.truncate(limit);
        let next = match due.last() {
            Some((d, k)) if more => Some(format!("{d}:{k}")),
            _ => None,
        };
        Ok(DuePage {
            keys: due.into_iter().map(|(_, k)| k).collect(),
            next,
        })
    }

    /// `Consent::request_consent`: granted for exactly the prompt unless a fault is armed.
    pub fn consent(&self, prompt: &ConsentPrompt) -> ConsentReceipt {
        let mut c = lock(&self.consent);
        c.issued = c.issued.saturating_add(1);
        let mut receipt = ConsentReceipt {
            receipt_id: format!("receipt-{}", c.issued),
            decision: ConsentDecision::Granted,
            method: ConsentMethod::PresetAnswers,
            view_sha256: prompt.view_sha256.clone(),
            responses_sha256: prompt.responses_sha256.clone(),
        };
        if std::mem::take(&mut c.refuse_next) {
            receipt.decision = ConsentDecision::Refused;
        } else if std::mem::take(&mut c.other_view_next) {
            receipt.view_sha256 = "0".repeat(64);
        }
        c.receipts.insert(
            receipt.receipt_id.clone(),
            (
                receipt.decision,
                receipt.view_sha256.clone(),
                receipt.responses_sha256.clone(),
            ),
        );
        receipt
    }

    /// `Audit::append` on the sink's master. On a replicated sink, the number of the write for
    /// a WAIT when the line was written.
    pub fn append(&self, entry: &AuditEntry) -> (Result<AppendOutcome, HostError>, Option<u64>) {
        if std::mem::take(&mut *lock(&self.sink_refuse_next)) {
            return (
                Err(HostError::new("audit sink refused the write (injected)")),
                None,
            );
        }
        let sink = self.sink();
        let lose = std::mem::take(&mut *lock(&self.sink_lose_next));
        if lose {
            sink.set_fault(AuditFault::LoseWrites);
        }
        let outcome = sink.append(entry);
        if lose {
            sink.set_fault(AuditFault::None);
        }
        let mut number = None;
        if outcome.as_ref().is_ok_and(|o| o.written) {
            lock(&self.ledger).push(entry.line.clone());
            if let Some(r) = &self.sink_replica
                && *lock(&self.replicating)
            {
                number = Some(lock(r).applied(entry.clone()));
            }
        }
        (outcome, number)
    }

    /// The trail's invariants over every line the sink wrote (after each line written).
    pub fn check_trail(&self) {
        if let Err(what) = trail::check(&self.ledger(), self) {
            self.violated(what);
        }
    }
}

/// A replica of the store takes a write: the master's state after it.
fn replace(held: &mut StoreState, after: StoreState) {
    *held = after;
}

/// A replica of the sink takes a line.
fn push(held: &mut Vec<AuditEntry>, entry: AuditEntry) {
    held.push(entry);
}

/// The version a reader holds of a key (0: none).
fn have_of(k: &ReadKey<'_>) -> u64 {
    k.have
}
