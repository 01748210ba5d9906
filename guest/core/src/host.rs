//! The four host services the gate needs. They mirror the WIT imports one to one, so the
//! same core runs natively (tests, benches) and inside the component (through the glue).
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

/// Wall-clock time, supplied by the host: the guest has no clock of its own. It decides
/// expiry, so a host must not let it run backwards.
pub trait Clock {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// A key's current value and the version its last write got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The text stored.
    pub value: String,
    /// Never 0; changes on every write of the key and is never reused for that key, not
    /// even after the key was deleted, nor after the store lost its data or its counter
    /// (restarted empty, flushed, evicted, restored from a snapshot): the record cache, the
    /// single use of a round and the uniqueness of every consent view rest on it. The
    /// reference stores put an epoch in the high 32 bits, drawn at random anew whenever the
    /// counter in the low 32 bits is lost or runs out (wit/gate.wit, `storage`).
    pub version: u64,
}

/// One key of a read, with the version of its value the reader already holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadKey<'a> {
    /// The key.
    pub key: &'a str,
    /// The version the reader holds the value of (`None`: none). When the key is still at that
    /// version the store returns the version with an empty value: the value does not cross
    /// the boundary again (most reads of a round find the record the gate wrote last).
    pub have: Option<u64>,
}

impl<'a> From<&'a str> for ReadKey<'a> {
    fn from(key: &'a str) -> Self {
        Self { key, have: None }
    }
}

/// One compare-and-swap of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    /// The key.
    pub key: &'a str,
    /// The version the key must have; `None`: the key must be absent.
    pub expected: Option<u64>,
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
    /// The live entry of each key, in order (`None`: absent or past its TTL); the value is
    /// empty when the key is at the version the reader said it has.
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Option<Versioned>>, HostError>;
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
    /// Position in the chain, from 1.
    pub seq: u64,
    /// `event_sha256` of the event before.
    pub prev_sha256: String,
    /// SHA-256 of `line`.
    pub event_sha256: String,
    /// The event, canonical JSON (carries `seq` and `prev_sha256` itself).
    pub line: String,
}

/// What a sink did with an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Written at the entry's `seq`; then read back from the durable medium: the line found
    /// there (`None`: the read found nothing or failed).
    Written {
        /// The line read back.
        stored: Option<String>,
    },
    /// The entry did not extend the head; nothing written.
    HeadMoved(ChainHead),
}

/// An append-only hash-chained audit sink. One call per event: the append reads its own
/// write back.
pub trait Audit {
    /// Append if and only if `entry` extends the head, then read it back.
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError>;
}

macro_rules! forward {
    ($($ptr:ident),*) => {$(
        impl<T: Clock + ?Sized> Clock for $ptr<T> {
            fn now_ms(&self) -> u64 { (**self).now_ms() }
        }
        impl<T: Storage + ?Sized> Storage for $ptr<T> {
            fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Option<Versioned>>, HostError> { (**self).read(keys) }
            fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> { (**self).write(writes) }
            fn list_due(&self, due_by_ms: u64, cursor: Option<&str>, limit: u32) -> Result<DuePage, HostError> {
                (**self).list_due(due_by_ms, cursor, limit)
            }
        }
        impl<T: Consent + ?Sized> Consent for $ptr<T> {
            fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
                (**self).request_consent(prompt)
            }
        }
        impl<T: Audit + ?Sized> Audit for $ptr<T> {
            fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> { (**self).append(entry) }
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
