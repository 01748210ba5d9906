//! In-memory reference hosts: a controllable clock, storage with TTL and atomic
//! compare-and-swap, a scripted consent provider and an audit sink with fault injection.
//! Used by the native tests, the property tests and the wasmtime harness.

use crate::host::{
    AppendOutcome, Audit, AuditEntry, ChainHead, Clock, Consent, ConsentDecision, ConsentMethod,
    ConsentPrompt, ConsentReceipt, DuePage, HostError, ReadKey, Storage, Versioned, Write,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked mid-update of plain data; the
    // data itself is still a consistent map (every update is a single insert/remove).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A clock the test moves by hand.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock at `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        Self {
            now: AtomicU64::new(start_ms),
        }
    }
    /// Move time forward.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
    /// Set the time.
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

#[derive(Debug)]
struct Slot {
    value: String,
    version: u64,
    expires_at_ms: u64,
}

/// The keys and their time index, kept together under one lock.
#[derive(Debug, Default)]
struct Slots {
    map: BTreeMap<String, Slot>,
    /// Every key in `map` by its deadline (`expires_at_ms`), for `list_due`: updated on every
    /// write and delete, so a listing visits only what is due.
    due: BTreeSet<(u64, String)>,
}

impl Slots {
    fn get(&self, key: &str) -> Option<&Slot> {
        self.map.get(key)
    }
    fn remove(&mut self, key: &str) {
        if let Some(old) = self.map.remove(key) {
            self.due.remove(&(old.expires_at_ms, key.to_owned()));
        }
    }
    fn insert(&mut self, key: &str, slot: Slot) {
        self.remove(key);
        self.due.insert((slot.expires_at_ms, key.to_owned()));
        self.map.insert(key.to_owned(), slot);
    }
    /// Drop every key whose TTL ran out by `now`: the front of the index, nothing else.
    fn prune(&mut self, now: u64) {
        while let Some(first) = self.due.first() {
            if first.0 > now {
                break;
            }
            if let Some((_, key)) = self.due.pop_first() {
                self.map.remove(&key);
            }
        }
    }
}

/// The low bits of a version: the counter of the store's life (its epoch is the high bits).
const COUNTER_MASK: u64 = 0xffff_ffff;

/// The first version of a new life of a store: a random epoch (non-zero) in the high 32 bits
/// over a counter at 1. A store that loses its counter (or everything), or runs it out,
/// starts a new life, so it never hands out again a version some reader may still hold
/// (`Storage`'s contract).
pub fn first_version() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // Each call a new draw: the standard library seeds `RandomState` from the system's
    // randomness once per thread and varies it per instance; the count tells calls apart.
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(DRAWS.fetch_add(1, Ordering::SeqCst));
    let epoch = h.finish() >> 32;
    (epoch.max(1) << 32) | 1
}

/// A `list_due` cursor: the last (deadline, key) listed, as `<deadline>:<key>`.
fn encode_cursor(deadline: u64, key: &str) -> String {
    format!("{deadline}:{key}")
}

fn decode_cursor(cursor: &str) -> Result<(u64, String), HostError> {
    cursor
        .split_once(':')
        .and_then(|(d, k)| Some((d.parse().ok()?, k.to_owned())))
        .ok_or_else(|| HostError::new("list-due cursor not made by this store"))
}

/// Storage in one process's memory, with TTL and atomic compare-and-swap. Cloning shares it.
#[derive(Clone)]
pub struct MemoryStorage {
    clock: Arc<dyn Clock + Send + Sync>,
    slots: Arc<Mutex<Slots>>,
    next_version: Arc<AtomicU64>,
    fail: Arc<AtomicBool>,
    lose_cas: Arc<AtomicBool>,
    fail_deletes: Arc<AtomicBool>,
    /// Compare-and-swaps that would apply still to let through before one loses (0: none).
    lose_cas_after: Arc<AtomicU64>,
}

impl std::fmt::Debug for MemoryStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStorage")
            .field("keys", &lock(&self.slots).map.len())
            .finish()
    }
}

impl MemoryStorage {
    /// Empty storage whose TTLs follow `clock`.
    pub fn new(clock: Arc<dyn Clock + Send + Sync>) -> Self {
        Self {
            clock,
            slots: Arc::default(),
            // The first life's epoch is 0: nothing outlives the store (its readers' caches
            // live in the same process), so its versions, and the consent views that name
            // them, stay the same from run to run (the corpus's trails pin them).
            next_version: Arc::new(AtomicU64::new(1)),
            fail: Arc::default(),
            lose_cas: Arc::default(),
            fail_deletes: Arc::default(),
            lose_cas_after: Arc::default(),
        }
    }
    /// Make every call fail (fault injection).
    pub fn set_failing(&self, on: bool) {
        self.fail.store(on, Ordering::SeqCst);
    }
    /// Make every compare-and-swap that would apply report a conflict instead, as if
    /// another instance had written first (fault injection).
    pub fn set_losing_cas(&self, on: bool) {
        self.lose_cas.store(on, Ordering::SeqCst);
    }
    /// Make every delete fail while writes and reads work (fault injection: a store that
    /// fails half-way through ending a binding).
    pub fn set_failing_deletes(&self, on: bool) {
        self.fail_deletes.store(on, Ordering::SeqCst);
    }
    /// Let `applied` more compare-and-swaps apply, then make the next one that would apply
    /// report a conflict, once, as if another instance had written first (fault injection:
    /// the Nth step of an operation loses its race). `applied = 0` lets the very next one
    /// lose.
    pub fn lose_cas_after(&self, applied: u64) {
        self.lose_cas_after
            .store(applied.saturating_add(1), Ordering::SeqCst);
    }
    /// Lose every key and the version counter, as a store restarted empty or flushed does
    /// (fault injection): the store starts a new life under a new random epoch.
    pub fn lose_everything(&self) {
        let mut slots = lock(&self.slots);
        *slots = Slots::default();
        self.next_version.store(first_version(), Ordering::SeqCst);
    }
    /// Lose the version counter and keep the keys, as a store that evicted its counter does
    /// (fault injection): the store starts a new life under a new random epoch.
    pub fn lose_counter(&self) {
        let _slots = lock(&self.slots);
        self.next_version.store(first_version(), Ordering::SeqCst);
    }
    /// Keys held, expired or not (for memory-flatness checks).
    pub fn len(&self) -> usize {
        lock(&self.slots).map.len()
    }
    /// The live keys starting with `prefix`, in key order (for tests that look inside the
    /// store; the gate itself only ever lists what is due, `Storage::list_due`).
    pub fn live_keys(&self, prefix: &str) -> Vec<String> {
        let now = self.clock.now_ms();
        lock(&self.slots)
            .map
            .iter()
            .filter(|(k, s)| k.starts_with(prefix) && s.expires_at_ms > now)
            .map(|(k, _)| k.clone())
            .collect()
    }
    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Drop expired keys now (a real store does this on its own).
    pub fn purge_expired(&self) {
        let now = self.clock.now_ms();
        lock(&self.slots).prune(now);
    }
    fn check(&self) -> Result<(), HostError> {
        if self.fail.load(Ordering::SeqCst) {
            Err(HostError::new("storage unavailable (injected)"))
        } else {
            Ok(())
        }
    }
}

impl MemoryStorage {
    /// One compare-and-swap under the lock: `Ok(Some(version))` applied, `Ok(None)` lost.
    fn apply(&self, slots: &mut Slots, now: u64, w: &Write<'_>) -> Result<Option<u64>, HostError> {
        let current = slots
            .get(w.key)
            .filter(|s| s.expires_at_ms > now)
            .map_or(0, |s| s.version);
        if current != w.expected || self.lose_cas.load(Ordering::SeqCst) {
            return Ok(None);
        }
        // Counting down to the one compare-and-swap that loses (1: this one).
        let countdown = self.lose_cas_after.load(Ordering::SeqCst);
        if countdown > 0 {
            self.lose_cas_after
                .store(countdown.saturating_sub(1), Ordering::SeqCst);
            if countdown == 1 {
                return Ok(None);
            }
        }
        match w.value {
            None if self.fail_deletes.load(Ordering::SeqCst) => {
                Err(HostError::new("storage delete failed (injected)"))
            }
            None => {
                slots.remove(w.key);
                Ok(Some(0))
            }
            Some(text) => {
                // Under the lock: no other write takes a version in between.
                let mut version = self.next_version.fetch_add(1, Ordering::SeqCst);
                if version & COUNTER_MASK == 0 {
                    // The counter ran out: a new life, so no version comes round again.
                    version = first_version();
                    self.next_version
                        .store(version.saturating_add(1), Ordering::SeqCst);
                }
                slots.insert(
                    w.key,
                    Slot {
                        value: text.to_owned(),
                        version,
                        expires_at_ms: now.saturating_add(w.ttl_ms),
                    },
                );
                Ok(Some(version))
            }
        }
    }
}

impl Storage for MemoryStorage {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        self.check()?;
        let now = self.clock.now_ms();
        let slots = lock(&self.slots);
        Ok(keys
            .iter()
            .map(|k| {
                slots
                    .get(k.key)
                    .filter(|s| s.expires_at_ms > now)
                    .map(|s| Versioned {
                        // The reader holds this version already: the value stays here.
                        value: if k.have == s.version {
                            String::new()
                        } else {
                            s.value.clone()
                        },
                        version: s.version,
                    })
                    .into()
            })
            .collect())
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        self.check()?;
        let now = self.clock.now_ms();
        let mut slots = lock(&self.slots);
        let mut applied = Vec::with_capacity(writes.len());
        for w in writes {
            match self.apply(&mut slots, now, w)? {
                Some(version) => applied.push(version),
                None => break,
            }
        }
        Ok(applied)
    }

    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        self.check()?;
        let now = self.clock.now_ms();
        if limit == 0 {
            return Err(HostError::new("list-due limit is 0"));
        }
        let after = cursor.map(decode_cursor).transpose()?;
        let mut slots = lock(&self.slots);
        slots.prune(now);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut keys = Vec::new();
        let mut last = None;
        let range = match &after {
            Some(c) => slots.due.range((
                std::ops::Bound::Excluded(c.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => slots.due.range(..),
        };
        let mut more = false;
        for (deadline, key) in range {
            if *deadline > due_by_ms {
                break;
            }
            if keys.len() == limit {
                more = true;
                break;
            }
            keys.push(key.clone());
            last = Some((*deadline, key));
        }
        let next = match last {
            Some((d, k)) if more => Some(encode_cursor(d, k)),
            _ => None,
        };
        Ok(DuePage { keys, next })
    }
}

/// What a scripted consent provider answers next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptedAnswer {
    /// Grant, for exactly the prompt's view and answers.
    Grant,
    /// Refuse.
    Refuse,
    /// Grant, but name another view (a buggy or hostile consent UI).
    GrantOtherView,
    /// Grant, but name other answers.
    GrantOtherAnswers,
    /// Fail (the consent UI is unavailable).
    Fail,
}

/// A consent provider that answers from a script (then with its default), and keeps every prompt.
#[derive(Clone, Debug)]
pub struct ScriptedConsent {
    script: Arc<Mutex<VecDeque<ScriptedAnswer>>>,
    default: Arc<Mutex<ScriptedAnswer>>,
    prompts: Arc<Mutex<std::collections::VecDeque<ConsentPrompt>>>,
    counter: Arc<AtomicU64>,
    method: Arc<Mutex<ConsentMethod>>,
}

impl ScriptedConsent {
    /// Answers `default` whenever the script is empty.
    pub fn new(default: ScriptedAnswer) -> Self {
        Self {
            script: Arc::default(),
            default: Arc::new(Mutex::new(default)),
            prompts: Arc::default(),
            counter: Arc::new(AtomicU64::new(1)),
            // A script decides before the round is seen: never a person at a screen.
            method: Arc::new(Mutex::new(ConsentMethod::PresetAnswers)),
        }
    }
    /// Name another method in the receipts from now on (a host test standing in for a
    /// person, a proxy or a policy hook).
    pub fn set_method(&self, method: ConsentMethod) {
        *lock(&self.method) = method;
    }
    /// Queue the next answers.
    pub fn push(&self, answer: ScriptedAnswer) {
        lock(&self.script).push_back(answer);
    }
    /// Change the default answer.
    pub fn set_default(&self, answer: ScriptedAnswer) {
        *lock(&self.default) = answer;
    }
    /// The last prompts shown (at most [`PROMPT_LOG`]).
    pub fn prompts(&self) -> Vec<ConsentPrompt> {
        lock(&self.prompts).iter().cloned().collect()
    }
}

/// How many prompts a scripted consent provider keeps (so long runs stay flat in memory).
pub const PROMPT_LOG: usize = 64;

impl Consent for ScriptedConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        {
            let mut log = lock(&self.prompts);
            if log.len() >= PROMPT_LOG {
                log.pop_front();
            }
            log.push_back(prompt.clone());
        }
        let answer = lock(&self.script)
            .pop_front()
            .unwrap_or_else(|| lock(&self.default).clone());
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let mut receipt =
            ConsentReceipt::for_prompt(prompt, format!("consent-{n}"), true, *lock(&self.method));
        match answer {
            ScriptedAnswer::Grant => {}
            ScriptedAnswer::Refuse => receipt.decision = ConsentDecision::Refused,
            ScriptedAnswer::GrantOtherView => receipt.view_sha256 = "0".repeat(64),
            ScriptedAnswer::GrantOtherAnswers => receipt.responses_sha256 = "0".repeat(64),
            ScriptedAnswer::Fail => {
                return Err(HostError::new("consent ui unavailable (injected)"));
            }
        }
        Ok(receipt)
    }
}

/// Faults the memory audit sink can inject.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuditFault {
    /// Behave.
    #[default]
    None,
    /// Every append fails.
    FailAppend,
    /// Appends succeed, the read-back returns a different line.
    CorruptReadback,
    /// Appends succeed, the read-back finds nothing.
    LoseWrites,
    /// Appends succeed, the read-back fails (reported as nothing found).
    FailReadback,
}

/// An audit sink in memory that checks each shard's chain on append. Cloning shares it.
#[derive(Clone, Debug)]
pub struct MemoryAudit {
    entries: Arc<Mutex<Held>>,
    fault: Arc<Mutex<AuditFault>>,
    /// How many of the newest entries are kept (the rest count as shipped elsewhere).
    window: usize,
}

/// The entries in the order written (every shard), and each shard's head.
#[derive(Debug, Default)]
struct Held {
    entries: std::collections::VecDeque<AuditEntry>,
    heads: BTreeMap<String, ChainHead>,
}

impl Held {
    fn head(&self, shard: &str) -> ChainHead {
        self.heads
            .get(shard)
            .cloned()
            .unwrap_or_else(ChainHead::genesis)
    }
}

impl Default for MemoryAudit {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryAudit {
    /// An empty sink that keeps every entry.
    pub fn new() -> Self {
        Self::windowed(usize::MAX)
    }
    /// An empty sink that keeps only the newest `window` entries (at least one: the head),
    /// as a sink that ships older lines elsewhere would: benchmarks run millions of rounds.
    pub fn windowed(window: usize) -> Self {
        Self {
            entries: Arc::default(),
            fault: Arc::default(),
            window: window.max(1),
        }
    }
    /// Inject a fault from now on.
    pub fn set_fault(&self, fault: AuditFault) {
        *lock(&self.fault) = fault;
    }
    /// Lose the newest line, after its write was confirmed (a store restarted without it, a
    /// truncated file): the head goes back to the line before.
    /// (Its shard's head goes back to the shard's line before it among those kept.)
    pub fn lose_newest(&self) -> Option<AuditEntry> {
        let mut held = lock(&self.entries);
        let lost = held.entries.pop_back()?;
        let before = held
            .entries
            .iter()
            .rev()
            .find(|e| e.shard == lost.shard)
            .map(|e| ChainHead {
                seq: e.seq,
                event_sha256: e.event_sha256.clone(),
            });
        match before {
            Some(head) => held.heads.insert(lost.shard.clone(), head),
            None => held.heads.remove(&lost.shard),
        };
        Some(lost)
    }
    /// Every entry written, in the order written.
    pub fn entries(&self) -> Vec<AuditEntry> {
        lock(&self.entries).entries.iter().cloned().collect()
    }
    /// Every shard's head.
    pub fn heads(&self) -> BTreeMap<String, ChainHead> {
        lock(&self.entries).heads.clone()
    }
    /// Every line written, parsed.
    pub fn events(&self) -> Vec<serde_json::Value> {
        lock(&self.entries)
            .entries
            .iter()
            .filter_map(|e| serde_json::from_str(&e.line).ok())
            .collect()
    }
}

impl crate::host::ShardHeads for MemoryAudit {
    fn heads(&self) -> Result<BTreeMap<String, ChainHead>, HostError> {
        Ok(MemoryAudit::heads(self))
    }
    fn last_root(&self) -> Result<Option<String>, HostError> {
        Ok(lock(&self.entries)
            .entries
            .iter()
            .rev()
            .find(|e| e.shard == crate::audit::ROOT_SHARD)
            .map(|e| e.line.clone()))
    }
}

impl Audit for MemoryAudit {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        let fault = *lock(&self.fault);
        if fault == AuditFault::FailAppend {
            return Err(HostError::new("audit sink unavailable (injected)"));
        }
        let mut held = lock(&self.entries);
        // Compared in place: the head is copied out only when it moved.
        let extends = match held.heads.get(&entry.shard) {
            Some(last) => {
                last.seq.checked_add(1) == Some(entry.seq) && last.event_sha256 == entry.prev_sha256
            }
            None => entry.seq == 1 && entry.prev_sha256 == ChainHead::genesis().event_sha256,
        };
        if !extends {
            return Ok(AppendOutcome::head_moved(held.head(&entry.shard)));
        }
        let head = ChainHead {
            seq: entry.seq,
            event_sha256: entry.event_sha256.clone(),
        };
        match held.heads.get_mut(&entry.shard) {
            Some(h) => *h = head,
            None => {
                held.heads.insert(entry.shard.clone(), head);
            }
        }
        let entries = &mut held.entries;
        entries.push_back(entry.clone());
        if entries.len() > self.window {
            entries.pop_front();
        }
        // The read-back, from what is held (the injected faults change what it finds).
        let stored = match fault {
            AuditFault::FailReadback | AuditFault::LoseWrites => None,
            AuditFault::CorruptReadback => Some(entry.line.replacen("\"event\"", "\"evnt\"", 1)),
            AuditFault::None | AuditFault::FailAppend => entries.back().map(|e| e.line.clone()),
        };
        Ok(AppendOutcome::written(entry, stored))
    }
}
