//! The four host services the gate needs (and the journal, a store write with its audit line
//! in one call, made of two of them: [`journal`]). They mirror the WIT imports one to one, in the
//! WIT's own encodings (version 0 for "absent", the flat append record), so the same core
//! runs natively (tests, benches) and inside the component, whose glue only moves fields
//! (`guest/component/src/convert.rs`, `host-harness/wasmtime/src/convert.rs`).
//! Every method may fail; the gate turns every failure into a denial.

use std::sync::Arc;

/// A failure of a host service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostError {
    /// What failed. Goes to logs and the audit reason, never to the server.
    pub message: String,
}

impl HostError {
    /// A host error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "host error: {}", self.message)
    }
}

impl std::error::Error for HostError {}

/// An import's `err(message)`, as the WIT carries it.
impl From<String> for HostError {
    fn from(message: String) -> Self {
        Self { message }
    }
}

/// The `err(message)` an import returns.
impl From<HostError> for String {
    fn from(e: HostError) -> Self {
        e.message
    }
}

/// Wall-clock time, supplied by the host: the guest has no clock of its own. It decides
/// expiry, so a host must not let it run backwards.
pub trait Clock {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// A key's current value and the version its last write got; version 0 is an absent key
/// (or one past its TTL), whose value is empty and ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The text stored.
    pub value: String,
    /// 0: absent. A present key's is never 0; changes on every write of the key and is never reused for that key, not
    /// even after the key was deleted, nor after the store lost its data or its counter
    /// (restarted empty, flushed, evicted, restored from a snapshot): the record cache, the
    /// single use of a round and the uniqueness of every consent view rest on it. The
    /// reference stores put an epoch in the high 32 bits, drawn at random anew whenever the
    /// counter in the low 32 bits is lost or runs out (wit/gate.wit, `storage`).
    pub version: u64,
}

impl Versioned {
    /// An absent key.
    pub fn absent() -> Self {
        Self {
            value: String::new(),
            version: 0,
        }
    }

    /// Whether the key is present (its version is not 0).
    pub fn is_present(&self) -> bool {
        self.version != 0
    }

    /// The entry when the key is present.
    pub fn present(self) -> Option<Self> {
        self.is_present().then_some(self)
    }
}

impl From<Option<Versioned>> for Versioned {
    fn from(entry: Option<Versioned>) -> Self {
        entry.unwrap_or_else(Self::absent)
    }
}

/// One key of a read, with the version of its value the reader already holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadKey<'a> {
    /// The key.
    pub key: &'a str,
    /// The version the reader holds the value of (0: none). When the key is still at that
    /// version the store returns the version with an empty value: the value does not cross
    /// the boundary again (most reads of a round find the record the gate wrote last).
    pub have: u64,
}

impl<'a> From<&'a str> for ReadKey<'a> {
    fn from(key: &'a str) -> Self {
        Self { key, have: 0 }
    }
}

/// One compare-and-swap of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    /// The key.
    pub key: &'a str,
    /// The version the key must have; 0: the key must be absent.
    pub expected: u64,
    /// What to store; `None` deletes the key.
    pub value: Option<&'a str>,
    /// How long the value lives.
    pub ttl_ms: u64,
}

/// One page of [`Storage::list_due`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DuePage {
    /// The due keys of this page (at most the limit asked for).
    pub keys: Vec<String>,
    /// The cursor of the next page; `None`: the listing is complete.
    pub next: Option<String>,
}

/// Short-lived protected storage, possibly shared between instances and processes.
/// Calls are batched: each costs a host a boundary crossing (docs/import-contract.md).
pub trait Storage {
    /// The live entry of each key, in order (version 0: absent or past its TTL); the value
    /// is empty when the key is at the version the reader said it has.
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError>;
    /// The writes in order, each an atomic compare-and-swap, stopping at the first whose
    /// key is not at its expected version. Returns the new version of each write applied
    /// (0 for a delete): a shorter list than `writes` means the write at its length lost
    /// and none after it was tried.
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError>;
    /// One page of the live keys whose TTL deadline (write time + `ttl_ms`, by the store's
    /// clock) is at or before `due_by_ms`: at most `limit` keys, in deadline order, and the
    /// cursor of the next page (`None`: done). `cursor` is `None` for the first page, then
    /// the `next` of the page before, opaque and the store's own; a cursor the store did not
    /// make is an error. Keys written or deleted during a listing may or may not appear; a
    /// page may be shorter than `limit` without being the last. The full contract is
    /// `storage.list-due` in `wit/gate.wit`.
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError>;

    /// A write and the audit line that records it, in `order` ([`journal`]): by default
    /// [`sequential`], the two calls one after the other (`audit.append`, then this store's
    /// `write`; or the reverse). A store that can do both in one step with `audit` (the
    /// Redis store with its Redis trail: one script) does so; a wrapper that changes the
    /// writes (sealing their values) changes them and passes the call on. The gate reaches
    /// this through [`journal`], which lets a wrapped sink see the call first.
    fn journal(
        &self,
        audit: &dyn Audit,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<Journaled, HostError> {
        sequential(self, audit, order, entry, writes)
    }
}

/// Which step of a [`journal`] call comes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `append(entry)`; then, only if the entry was written and read back as sent,
    /// `write(writes)` (WIT `journal.append-then-write`).
    AppendThenWrite,
    /// `write(writes)`; then, only if the first write applied, `append(entry)` (WIT
    /// `journal.write-then-append`).
    WriteThenAppend,
}

/// What each step of a [`journal`] call did (the WIT's `journaled`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Journaled {
    /// As [`Storage::write`] returns; empty when the writes were not tried.
    pub applied: Vec<u64>,
    /// As [`Audit::append`] returns; `None` when the entry was not offered.
    pub appended: Option<AppendOutcome>,
    /// The second step's error, when the first completed and the second failed (the first
    /// step's is the call's own error).
    pub failed: Option<HostError>,
}

/// A store write and the audit line that records it, in one call where the host can
/// (WIT `journal`): `audit` sees the call first ([`Audit::journal_through`]: a wrapper that
/// counts appends), then `storage` makes it ([`Storage::journal`]).
pub fn journal(
    storage: &dyn Storage,
    audit: &dyn Audit,
    order: Order,
    entry: &AuditEntry,
    writes: &[Write<'_>],
) -> Result<Journaled, HostError> {
    match audit.journal_through(storage, order, entry, writes) {
        Some(done) => done,
        None => storage.journal(audit, order, entry, writes),
    }
}

/// The journal as the two calls it stands for, in order: what every host that cannot do
/// both in one step does, and what any host's answer must match.
pub fn sequential<S: Storage + ?Sized>(
    storage: &S,
    audit: &dyn Audit,
    order: Order,
    entry: &AuditEntry,
    writes: &[Write<'_>],
) -> Result<Journaled, HostError> {
    match order {
        Order::AppendThenWrite => {
            let appended = audit.append(entry)?;
            let confirmed = appended.written
                && appended
                    .stored
                    .as_deref()
                    .is_some_and(|line| line.as_bytes() == entry.line.as_bytes());
            let (applied, failed) = if confirmed {
                match storage.write(writes) {
                    Ok(applied) => (applied, None),
                    Err(e) => (Vec::new(), Some(e)),
                }
            } else {
                (Vec::new(), None)
            };
            Ok(Journaled {
                applied,
                appended: Some(appended),
                failed,
            })
        }
        Order::WriteThenAppend => {
            let applied = storage.write(writes)?;
            let (appended, failed) = if applied.is_empty() {
                (None, None)
            } else {
                match audit.append(entry) {
                    Ok(o) => (Some(o), None),
                    Err(e) => (None, Some(e)),
                }
            };
            Ok(Journaled {
                applied,
                appended,
                failed,
            })
        }
    }
}

/// What the user is asked to approve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsentPrompt {
    /// The consent view, canonical JSON.
    pub view_json: String,
    /// SHA-256 of `view_json`.
    pub view_sha256: String,
    /// The answers about to be sent, canonical JSON.
    pub responses_json: String,
    /// SHA-256 of `responses_json`.
    pub responses_sha256: String,
}

/// The user's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsentDecision {
    /// Approved.
    Granted,
    /// Refused.
    Refused,
}

/// How a decision was made (recorded as the `consented` event's `consent_method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsentMethod {
    /// A person decided at a screen the host rendered from the prompt's view.
    UserAtScreen,
    /// The answers and the approval were given before the round was seen (a flag, a file,
    /// a script).
    PresetAnswers,
    /// Another client's own UI collected the answers and the decision; the gate never saw the
    /// user.
    DelegatedToClient,
    /// An automatic policy hook decided; no person saw the prompt.
    PolicyHook,
}

impl ConsentMethod {
    /// The method's name in the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserAtScreen => "user_at_screen",
            Self::PresetAnswers => "preset_answers",
            Self::DelegatedToClient => "delegated_to_client",
            Self::PolicyHook => "policy_hook",
        }
    }
}

/// The host's record of a decision, bound to one view and one set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsentReceipt {
    /// Recorded in the audit trail.
    pub receipt_id: String,
    /// What the user decided.
    pub decision: ConsentDecision,
    /// Who or what made the decision.
    pub method: ConsentMethod,
    /// The view the decision was about.
    pub view_sha256: String,
    /// The answers the decision was about.
    pub responses_sha256: String,
}

impl ConsentReceipt {
    /// The receipt of a decision (`granted` or refused), made by `method`, on exactly the view
    /// and the answers of `prompt`: the one way every host names what was decided on.
    pub fn for_prompt(
        prompt: &ConsentPrompt,
        receipt_id: String,
        granted: bool,
        method: ConsentMethod,
    ) -> Self {
        Self {
            receipt_id,
            decision: if granted {
                ConsentDecision::Granted
            } else {
                ConsentDecision::Refused
            },
            method,
            view_sha256: prompt.view_sha256.clone(),
            responses_sha256: prompt.responses_sha256.clone(),
        }
    }
}

/// The user's visible decision.
pub trait Consent {
    /// Show the prompt (or look up the decision already made for it) and return the receipt.
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError>;
}

/// The last event of an audit sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHead {
    /// 0 for an empty sink.
    pub seq: u64,
    /// 64 zeros for an empty sink.
    pub event_sha256: String,
}

impl ChainHead {
    /// The head of an empty sink.
    pub fn genesis() -> Self {
        Self {
            seq: 0,
            event_sha256: "0".repeat(64),
        }
    }
}

/// One audit event as appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    /// The chain the entry extends: the sink keeps one chain per shard, and `seq`,
    /// `prev_sha256` and an outcome's head are that shard's (wit/gate.wit, `audit-entry`).
    pub shard: String,
    /// Position in the chain, from 1.
    pub seq: u64,
    /// `event_sha256` of the event before.
    pub prev_sha256: String,
    /// SHA-256 of `line`.
    pub event_sha256: String,
    /// The event, canonical JSON (carries `seq` and `prev_sha256` itself).
    pub line: String,
}

/// What a sink did with an entry (the WIT's flat `append-outcome`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    /// True: written at the entry's `seq`. False: the entry did not extend the head, and
    /// nothing was written.
    pub written: bool,
    /// When written: the line read back from the durable medium after the write (`None`:
    /// the read found nothing or failed). `None` when not written.
    pub stored: Option<String>,
    /// The sink's head after the call: its `seq` (0 when empty)...
    pub head_seq: u64,
    /// ...and its `event_sha256` (64 zeros when empty). When written, the head is the entry
    /// itself, which the caller holds: a sink may leave this empty then (as
    /// [`AppendOutcome::written`] does, sparing a copy of the digest per event), and the
    /// host's glue fills it from the entry before it crosses the WIT.
    pub head_sha256: String,
}

impl AppendOutcome {
    /// `entry` was written, and `stored` read back (the head is the entry: its digest is
    /// left to the caller, who holds it).
    pub fn written(entry: &AuditEntry, stored: Option<String>) -> Self {
        Self {
            written: true,
            stored,
            head_seq: entry.seq,
            head_sha256: String::new(),
        }
    }

    /// Nothing was written: the sink's head is `head`.
    pub fn head_moved(head: ChainHead) -> Self {
        Self {
            written: false,
            stored: None,
            head_seq: head.seq,
            head_sha256: head.event_sha256,
        }
    }

    /// The sink's head after a call that wrote nothing.
    pub fn head(&self) -> ChainHead {
        ChainHead {
            seq: self.head_seq,
            event_sha256: self.head_sha256.clone(),
        }
    }
}

/// An append-only hash-chained audit sink. One call per event: the append reads its own
/// write back.
pub trait Audit {
    /// Append if and only if `entry` extends the head, then read it back.
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError>;

    /// The head of `shard` as this sink knows it without a round trip (a line not yet
    /// durable included), for a wrapper that does costly work before each append (a keyed
    /// trail's synced link) and can spare it for an entry the head has passed. None when it
    /// cannot be known cheaply. Never asked by the gate: `append` alone is the contract.
    fn head_hint(&self, shard: &str) -> Option<ChainHead> {
        let _ = shard;
        None
    }

    /// The sink as [`std::any::Any`], for a store that can append to it in the same step as
    /// its own writes ([`Storage::journal`]) and must know it is its partner. `None` (the
    /// default): no store fuses with it. A wrapper that is happy to be passed by (it sees the
    /// call through [`Audit::journal_through`]) forwards its inner sink's.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// A [`journal`] call, seen by the sink before the store makes it: `None` (the default)
    /// lets the store make it with this sink; a wrapper returns the call made with its inner
    /// sink (`journal(storage, inner, ...)`), and does its own work around it.
    fn journal_through(
        &self,
        storage: &dyn Storage,
        order: Order,
        entry: &AuditEntry,
        writes: &[Write<'_>],
    ) -> Option<Result<Journaled, HostError>> {
        let _ = (storage, order, entry, writes);
        None
    }
}

/// A sink that can list every shard's head, for the root's anchors
/// ([`crate::audit::anchor_root`]). Host-side only (no WIT import): the gate never asks.
pub trait ShardHeads {
    /// Every shard's head, the root's ([`crate::audit::ROOT_SHARD`]) read before any other
    /// shard's (or all in one snapshot): a root line then never anchors a head older than one
    /// the root's head already anchored. Only heads the sink will not lose by its own rule for
    /// confirming an append (a Redis sink's: held by the replicas its writes wait for): a root
    /// line anchoring a line a failover then loses would read as a cut.
    fn heads(&self) -> Result<std::collections::BTreeMap<String, ChainHead>, HostError>;

    /// The root's newest line (none when the root has none): where a writer that has
    /// anchored nothing yet starts from, so that it neither anchors a head going back nor
    /// misses a loss below another writer's anchor.
    fn last_root(&self) -> Result<Option<String>, HostError>;
}

impl<T: ShardHeads + ?Sized> ShardHeads for Arc<T> {
    fn heads(&self) -> Result<std::collections::BTreeMap<String, ChainHead>, HostError> {
        (**self).heads()
    }
    fn last_root(&self) -> Result<Option<String>, HostError> {
        (**self).last_root()
    }
}

macro_rules! forward {
    ($($ptr:ident),*) => {$(
        impl<T: Clock + ?Sized> Clock for $ptr<T> {
            fn now_ms(&self) -> u64 { (**self).now_ms() }
        }
        impl<T: Storage + ?Sized> Storage for $ptr<T> {
            fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> { (**self).read(keys) }
            fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> { (**self).write(writes) }
            fn list_due(&self, due_by_ms: u64, cursor: Option<&str>, limit: u32) -> Result<DuePage, HostError> {
                (**self).list_due(due_by_ms, cursor, limit)
            }
            fn journal(&self, audit: &dyn Audit, order: Order, entry: &AuditEntry, writes: &[Write<'_>]) -> Result<Journaled, HostError> {
                (**self).journal(audit, order, entry, writes)
            }
        }
        impl<T: Consent + ?Sized> Consent for $ptr<T> {
            fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
                (**self).request_consent(prompt)
            }
        }
        impl<T: Audit + ?Sized> Audit for $ptr<T> {
            fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> { (**self).append(entry) }
            fn head_hint(&self, shard: &str) -> Option<ChainHead> { (**self).head_hint(shard) }
            fn as_any(&self) -> Option<&dyn std::any::Any> { (**self).as_any() }
            fn journal_through(&self, storage: &dyn Storage, order: Order, entry: &AuditEntry, writes: &[Write<'_>]) -> Option<Result<Journaled, HostError>> {
                (**self).journal_through(storage, order, entry, writes)
            }
        }
    )*};
}
forward!(Arc, Box);

/// The four services bundled, each behind its own type.
#[derive(Clone, Debug)]
pub struct Services<C, S, K, A> {
    /// Decides expiry and stamps every audit event.
    pub clock: C,
    /// Holds the live bindings; instances that must see each other's rounds share it.
    pub storage: S,
    /// Shows the consent view and returns the user's receipt.
    pub consent: K,
    /// Receives the hash-chained audit events and reads them back.
    pub audit: A,
}

/// Everything the gate needs from its host.
pub trait Host {
    /// The clock that decides expiry and stamps audit events.
    fn clock(&self) -> &dyn Clock;
    /// The store of live bindings.
    fn storage(&self) -> &dyn Storage;
    /// The consent provider that shows views and returns receipts.
    fn consent(&self) -> &dyn Consent;
    /// The audit sink.
    fn audit(&self) -> &dyn Audit;
}

impl<C: Clock, S: Storage, K: Consent, A: Audit> Host for Services<C, S, K, A> {
    fn clock(&self) -> &dyn Clock {
        &self.clock
    }
    fn storage(&self) -> &dyn Storage {
        &self.storage
    }
    fn consent(&self) -> &dyn Consent {
        &self.consent
    }
    fn audit(&self) -> &dyn Audit {
        &self.audit
    }
}
