//! G002: audit events, hash-chained, written and read back before anything depends on them.
//!
//! An event holds digests and codes only: never the `requestState`, never an answer, never a
//! token, never a URL's query. Each event names the one before it (`prev_sha256`), so a sink
//! that drops, reorders or rewrites events breaks the chain where any host can see it.

use crate::canonical;
use crate::digest;
use crate::error::{GateError, HostFault};
use crate::host::{AppendOutcome, Audit, AuditEntry, ChainHead, HostError, ShardHeads};
use serde_json::Value;
use std::rc::Rc;

/// The version of the event format.
pub const AUDIT_SCHEMA: &str = "mrtr-gate/audit/v4";

/// How many times in all one event is offered to the sink. Every `written: false` answer
/// that moves the head past the one tried means another writer's event went in first: the
/// event is rebuilt on that head and offered again, so contention among processes costs
/// round trips, not a denial. The bound is far above what any number of honest writers can
/// cost one append (each loss is another writer's success), yet stops a sink that invents
/// an ever-moving head in a fraction of a second.
const MAX_APPEND_ATTEMPTS: usize = 1024;

/// How many `written: false` answers that do not move the head past the one tried (a sink
/// refusing an entry that extends the head it names, or going back) one append takes before
/// it is denied: such a sink is refusing, not contended, so it is denied at once, not after
/// [`MAX_APPEND_ATTEMPTS`]. More than one, so a writer's first guess (genesis, before it
/// learned the head) is not taken for a refusal. (A head going back before a line the
/// writer confirmed is no refusal but a loss: [`ChainWriter`] denies it at once.)
const MAX_REFUSALS: usize = 3;

/// How many shards' heads one writer keeps. A gate instance serves a few servers; past this
/// bound it forgets one shard's head (the next append there learns it again, one refused call)
/// and with it what it confirmed there (a loss in that shard is then found by the shard's
/// anchors, not by this writer).
const MAX_SHARDS_HELD: usize = 64;

/// The denial's message once the sink lost lines this writer had confirmed.
const LOST_LINES: &str = "the audit sink lost lines it had confirmed (its head went back before \
                          this process's last write); nothing more is written until the gate \
                          process starts again";

/// The kinds of event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// An `input_required` round was accepted.
    Received,
    /// The user's consent receipt was obtained and matched.
    Consented,
    /// A retry was built (the round is used).
    Submitted,
    /// Something was denied.
    Rejected,
    /// A binding ended.
    Terminal,
}

impl EventKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Consented => "consented",
            Self::Submitted => "submitted",
            Self::Rejected => "rejected",
            Self::Terminal => "terminal",
        }
    }
}

/// An event being built: a kind plus fields. Fields not set are written as `null`, so every
/// event has the same shape.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    /// The chain the event goes to: its server's key part ([`crate::ids::ServerIdentity::key_part`]).
    /// Every binding's events go to one shard, so a binding never crosses chains.
    shard: Rc<str>,
    /// One slot per entry of [`FIELDS`], in that order.
    slots: [Slot; FIELDS.len()],
}

/// One field's value.
#[derive(Clone, Debug, Default)]
enum Slot {
    #[default]
    Null,
    Value(Value),
    /// A string known when the crate was built (an event kind, an outcome, a code): written
    /// at line time, never allocated.
    Str(&'static str),
    /// Canonical JSON text, rendered once by the crate and shared: a binding's fixed fields
    /// repeat in every event it writes.
    Raw(Rc<str>),
}

/// Declares the event fields once: the enum (whose value is the field's slot) and the names
/// in the same order, so the two can never disagree.
macro_rules! event_fields {
    ($($variant:ident => $name:literal,)*) => {
        /// The fields every event carries (null when they do not apply), in canonical order.
        /// The writer adds `prev_sha256`, `schema`, `seq` and `shard` (see [`LINE_KEYS`]).
        pub const FIELDS: [&str; 23] = [$($name),*];

        /// The fields of an event, in [`FIELDS`] order (the enum's value is the field's slot).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Field {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }
    };
}

event_fields! {
    AtMs => "at_ms",
    Binding => "binding",
    Cause => "cause",
    ConsentMethod => "consent_method",
    ConsentReceiptId => "consent_receipt_id",
    Event => "event",
    InputKinds => "input_kinds",
    LiveId => "live_id",
    Method => "method",
    Name => "name",
    Outcome => "outcome",
    ParamsSha256 => "params_sha256",
    PolicyVersion => "policy_version",
    Reason => "reason",
    RequestId => "request_id",
    RetryId => "retry_id",
    Round => "round",
    SchemaSha256 => "schema_sha256",
    Server => "server",
    StateSha256 => "state_sha256",
    TenantSha256 => "tenant_sha256",
    UserSha256 => "user_sha256",
    ViewSha256 => "view_sha256",
}

#[cfg(test)]
impl Field {
    /// The field's name in the line.
    pub fn name(self) -> &'static str {
        FIELDS.get(self as usize).copied().unwrap_or("")
    }
}

/// Every key of an audit line, in canonical (JCS) order.
pub const LINE_KEYS: [&str; 27] = [
    "at_ms",
    "binding",
    "cause",
    "consent_method",
    "consent_receipt_id",
    "event",
    "input_kinds",
    "live_id",
    "method",
    "name",
    "outcome",
    "params_sha256",
    "policy_version",
    "prev_sha256",
    "reason",
    "request_id",
    "retry_id",
    "round",
    "schema",
    "schema_sha256",
    "seq",
    "server",
    "shard",
    "state_sha256",
    "tenant_sha256",
    "user_sha256",
    "view_sha256",
];

/// What fills each key of [`LINE_KEYS`], in the same order: an event's slot or one of the
/// writer's own three keys. Decided here once, so writing a line compares no names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Slot(Field),
    PrevSha256,
    Schema,
    Seq,
    Shard,
}

// Sized by `LINE_KEYS`: a key added there without its part here does not compile.
const LINE_PARTS: [Part; LINE_KEYS.len()] = [
    Part::Slot(Field::AtMs),
    Part::Slot(Field::Binding),
    Part::Slot(Field::Cause),
    Part::Slot(Field::ConsentMethod),
    Part::Slot(Field::ConsentReceiptId),
    Part::Slot(Field::Event),
    Part::Slot(Field::InputKinds),
    Part::Slot(Field::LiveId),
    Part::Slot(Field::Method),
    Part::Slot(Field::Name),
    Part::Slot(Field::Outcome),
    Part::Slot(Field::ParamsSha256),
    Part::Slot(Field::PolicyVersion),
    Part::PrevSha256,
    Part::Slot(Field::Reason),
    Part::Slot(Field::RequestId),
    Part::Slot(Field::RetryId),
    Part::Slot(Field::Round),
    Part::Schema,
    Part::Slot(Field::SchemaSha256),
    Part::Seq,
    Part::Slot(Field::Server),
    Part::Shard,
    Part::Slot(Field::StateSha256),
    Part::Slot(Field::TenantSha256),
    Part::Slot(Field::UserSha256),
    Part::Slot(Field::ViewSha256),
];

impl Event {
    /// A new event of `kind`, for the chain of `shard` (its server's key part).
    pub fn new(kind: EventKind, shard: Rc<str>) -> Self {
        let mut e = Self {
            shard,
            slots: Default::default(),
        };
        e.put(Field::Event, Slot::Str(kind.as_str()));
        e
    }

    fn put(&mut self, field: Field, value: Slot) {
        if let Some(slot) = self.slots.get_mut(field as usize) {
            *slot = value;
        }
    }

    /// Set a field.
    pub fn set(mut self, field: Field, value: impl Into<Value>) -> Self {
        self.put(field, Slot::Value(value.into()));
        self
    }

    /// Set a field to a string the crate itself holds.
    pub fn set_str(mut self, field: Field, value: &'static str) -> Self {
        self.put(field, Slot::Str(value));
        self
    }

    /// Set a field to canonical JSON text rendered earlier (by [`canonical`]'s writers: the
    /// line is hashed as written, so only canonical text may go here).
    pub(crate) fn set_raw(mut self, field: Field, canonical_json: Rc<str>) -> Self {
        self.put(field, Slot::Raw(canonical_json));
        self
    }

    /// Record a denial's code and cause.
    pub fn denied(self, error: &GateError) -> Self {
        self.set_str(Field::Outcome, "denied")
            .set_str(Field::Reason, error.code())
            .set_str(Field::Cause, error.cause().as_str())
    }

    /// The canonical line of this event at `seq`, after `prev_sha256`. Written key by key
    /// in [`LINE_KEYS`] order: the same text `canonical::to_canonical` would give for the
    /// object, without building one.
    fn line(&self, now_ms: u64, seq: u64, prev_sha256: &str) -> String {
        let mut out = String::with_capacity(1024);
        out.push('{');
        for (i, (key, part)) in LINE_KEYS.iter().zip(LINE_PARTS).enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(key); // keys are plain ASCII names: nothing to escape
            out.push_str("\":");
            match part {
                Part::PrevSha256 => canonical::write_string(&mut out, prev_sha256),
                Part::Schema => canonical::write_string(&mut out, AUDIT_SCHEMA),
                Part::Seq => canonical::write_u64(&mut out, seq),
                Part::Shard => canonical::write_string(&mut out, &self.shard),
                Part::Slot(Field::AtMs) => canonical::write_u64(&mut out, now_ms),
                Part::Slot(field) => match self.slots.get(field as usize) {
                    Some(Slot::Value(value)) => canonical::write_value(&mut out, value),
                    Some(Slot::Str(text)) => canonical::write_string(&mut out, text),
                    Some(Slot::Raw(text)) => out.push_str(text),
                    Some(Slot::Null) | None => out.push_str("null"),
                },
            }
        }
        out.push('}');
        out
    }
}

/// Appends events to the host's sink, extending each event's shard's chain; each append
/// reads its write back.
#[derive(Debug, Default)]
pub(crate) struct ChainWriter {
    /// What this writer knows of each shard it wrote to (at most [`MAX_SHARDS_HELD`]).
    shards: std::collections::BTreeMap<Rc<str>, ShardChain>,
    /// Set once a loss was seen in any shard: the sink's word is worth nothing after it, so
    /// this writer writes no more (every later append denies) until the process starts again.
    lost: bool,
}

/// One shard's chain as a writer knows it.
#[derive(Debug, Default)]
struct ShardChain {
    /// The head after this writer's last append. Unknown at first: the first append is
    /// tried on the genesis head and learns the real one from the sink (one call on an
    /// empty shard, two otherwise; there is no separate `head` call to pay for).
    head: Option<ChainHead>,
    /// The last line this writer had confirmed (read back from the sink). A chain only
    /// grows, so a sink naming a head before it, or another line at its `seq`, has lost
    /// lines it confirmed (a store restarted without them, a truncated file, a failover to
    /// a replica that never had them).
    confirmed: Option<ChainHead>,
}

impl ChainWriter {
    /// Write `event` at time `now_ms`; Ok only once the sink returned exactly what was written.
    pub fn write(&mut self, sink: &dyn Audit, event: Event, now_ms: u64) -> Result<u64, GateError> {
        self.write_while(sink, event, now_ms, || Ok(()))
    }

    /// [`Self::write`], with `still` asked again before every offer after a refusal: the
    /// event is written only while it holds. An event about a step already taken elsewhere
    /// (a round consumed in storage) must not land after another writer's event that undid
    /// it (the binding ended): that writer's step comes before its own append, so a refusal
    /// naming a head that `still` then finds intact can only be followed by such an event
    /// at a head this writer has not seen, and that append is refused in turn.
    pub fn write_while(
        &mut self,
        sink: &dyn Audit,
        event: Event,
        now_ms: u64,
        still: impl FnMut() -> Result<(), GateError>,
    ) -> Result<u64, GateError> {
        let offered = self.offer_while(event, now_ms, still, |entry| {
            let outcome = sink.append(entry).map_err(|e| append_failed(e.message))?;
            Ok(Some((outcome, ())))
        })?;
        match offered {
            Some((seq, ())) => Ok(seq),
            None => Err(append_failed("the sink took no entry".into())),
        }
    }

    /// [`Self::write_while`], each entry offered by `offer`, which returns the sink's outcome
    /// and what else it did (the store writes of a [`crate::host::journal`] call), or `None`
    /// when it offered nothing (a journal whose writes came first and did not apply): then
    /// `None` comes back and nothing is written. What `offer` returns with the entry that is
    /// written comes back with its `seq`.
    pub fn offer_while<T>(
        &mut self,
        event: Event,
        now_ms: u64,
        mut still: impl FnMut() -> Result<(), GateError>,
        mut offer: impl FnMut(&AuditEntry) -> Result<Option<(AppendOutcome, T)>, GateError>,
    ) -> Result<Option<(u64, T)>, GateError> {
        let fail = append_failed;
        let lost = || fail(LOST_LINES.into());
        if self.lost {
            return Err(lost());
        }
        if !self.shards.contains_key(&event.shard) && self.shards.len() >= MAX_SHARDS_HELD {
            self.shards.pop_first();
        }
        let chain = self.shards.entry(Rc::clone(&event.shard)).or_default();
        let mut head = chain.head.take().unwrap_or_else(ChainHead::genesis);
        // The first answer may name any head (ours is a guess: genesis or our own last
        // append); after that, only a head beyond the one tried is another writer's progress.
        let mut learned = false;
        let mut refusals = 0;
        for _ in 0..MAX_APPEND_ATTEMPTS {
            let seq = head
                .seq
                .checked_add(1)
                .ok_or_else(|| fail("the chain is full".into()))?;
            let line = event.line(now_ms, seq, &head.event_sha256);
            let entry = AuditEntry {
                shard: event.shard.to_string(),
                seq,
                prev_sha256: head.event_sha256.clone(),
                event_sha256: digest::text_sha256_hex(&line),
                line,
            };
            let Some((outcome, done)) = offer(&entry)? else {
                // Nothing offered: the head guessed still stands.
                chain.head = Some(head);
                return Ok(None);
            };
            let stored = match outcome {
                AppendOutcome {
                    written: false,
                    head_seq,
                    head_sha256,
                    ..
                } => {
                    let moved = ChainHead {
                        seq: head_seq,
                        event_sha256: head_sha256,
                    };
                    if let Some(confirmed) = &chain.confirmed
                        && (moved.seq < confirmed.seq
                            || (moved.seq == confirmed.seq && moved != *confirmed))
                    {
                        self.lost = true;
                        return Err(lost());
                    }
                    let progress = if learned {
                        moved.seq > head.seq
                    } else {
                        moved != head
                    };
                    learned = true;
                    if !progress {
                        refusals += 1;
                        if refusals >= MAX_REFUSALS {
                            break;
                        }
                    }
                    head = moved;
                    still()?;
                    continue;
                }
                AppendOutcome {
                    written: true,
                    stored,
                    ..
                } => stored,
            };
            let same = stored
                .as_deref()
                .is_some_and(|b| digest::bytes_equal(b.as_bytes(), entry.line.as_bytes()));
            if !same {
                return Err(GateError::Host(HostFault::AuditReadbackMismatch));
            }
            let written = ChainHead {
                seq,
                event_sha256: entry.event_sha256,
            };
            chain.confirmed = Some(written.clone());
            chain.head = Some(written);
            return Ok(Some((seq, done)));
        }
        Err(GateError::Host(HostFault::AuditContention))
    }
}

/// The denial of an append the sink failed.
pub(crate) fn append_failed(why: String) -> GateError {
    GateError::Host(HostFault::AuditWriteFailed(why))
}

/// Problems a chain check finds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainBreak {
    /// The line at this position does not parse, or lacks `seq`/`prev_sha256`.
    Malformed(usize),
    /// `seq` does not follow the one before.
    Gap(usize),
    /// `prev_sha256` is not the digest of the line before.
    Broken(usize),
    /// The root line at this position anchors a shard's head the shard's chain never reaches:
    /// the shard's newest lines were cut away (or the whole shard).
    Cut(usize),
    /// The root line at this position anchors a line the shard holds with another digest: the
    /// shard was rewritten from there, and its chain rebuilt.
    Rewritten(usize),
}

impl core::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Positions are 0-based in the API and 1-based for a person reading a file.
        match self {
            Self::Malformed(i) => write!(
                f,
                "audit line {} is not a chained audit entry",
                i.saturating_add(1)
            ),
            Self::Gap(i) => write!(
                f,
                "audit line {} does not follow the line before it (seq)",
                i.saturating_add(1)
            ),
            Self::Broken(i) => write!(
                f,
                "audit line {} does not link to the line before it (prev_sha256)",
                i.saturating_add(1)
            ),
            Self::Cut(i) => write!(
                f,
                "root line {} anchors a shard head its shard no longer reaches (lines cut away)",
                i.saturating_add(1)
            ),
            Self::Rewritten(i) => write!(
                f,
                "root line {} anchors a line its shard holds with another digest (rewritten)",
                i.saturating_add(1)
            ),
        }
    }
}

impl std::error::Error for ChainBreak {}

/// The shard of the root: the chain whose `anchor` lines record every other shard's head
/// (written by the host, on a schedule and at shutdown; never a server's key part, which is hex).
pub const ROOT_SHARD: &str = "root";

/// The root's next entry, after `prev` on the root's chain: an `anchor` event recording each
/// shard's head in `heads` (the shards whose heads moved since the last anchor, or all).
pub fn root_entry(
    prev: &ChainHead,
    heads: &std::collections::BTreeMap<String, ChainHead>,
    now_ms: u64,
) -> AuditEntry {
    let seq = prev.seq.saturating_add(1);
    let anchored: serde_json::Map<String, Value> = heads
        .iter()
        .map(|(shard, h)| {
            (
                shard.clone(),
                serde_json::json!({"seq": h.seq, "sha256": h.event_sha256}),
            )
        })
        .collect();
    let line = canonical::to_canonical(&serde_json::json!({
        "at_ms": now_ms,
        "event": "anchor",
        "heads": anchored,
        "prev_sha256": prev.event_sha256,
        "schema": AUDIT_SCHEMA,
        "seq": seq,
        "shard": ROOT_SHARD,
    }));
    AuditEntry {
        shard: ROOT_SHARD.to_owned(),
        seq,
        prev_sha256: prev.event_sha256.clone(),
        event_sha256: digest::text_sha256_hex(&line),
        line,
    }
}

/// How many times [`anchor_root`] offers a root line: each refusal is another writer's root
/// line (another process anchoring), after which the heads are read again.
const MAX_ROOT_ATTEMPTS: usize = 16;

/// Append to `sink`'s root a line anchoring every shard whose head moved since `last` (the
/// heads this writer anchored before; updated), at `now_ms`. `Ok(None)` when no head moved.
/// The heads are read again after every refusal, root first ([`ShardHeads::heads`]), so a root
/// line never anchors a head older than another writer's line before it did. Denied like any
/// append: an error, or a line the sink did not read back as written.
pub fn anchor_root<S: Audit + ShardHeads + ?Sized>(
    sink: &S,
    last: &mut std::collections::BTreeMap<String, ChainHead>,
    now_ms: u64,
) -> Result<Option<u64>, HostError> {
    if last.is_empty()
        && let Some(line) = sink.last_root()?
    {
        *last = anchored_heads(&line)
            .ok_or_else(|| HostError::new("the audit root's newest line is not an anchor line"))?;
    }
    for _ in 0..MAX_ROOT_ATTEMPTS {
        let mut heads = sink.heads()?;
        let root = heads.remove(ROOT_SHARD).unwrap_or_else(ChainHead::genesis);
        // Lines from before shards have no place in a root (their chain is closed).
        heads.remove("");
        let moved: std::collections::BTreeMap<String, ChainHead> = heads
            .into_iter()
            .filter(|(shard, head)| last.get(shard) != Some(head))
            .collect();
        // `moved` holds no head equal to its anchor: one at or below it is a loss (at the
        // same `seq`, another line in its place).
        if let Some((shard, head)) = moved
            .iter()
            .find(|(shard, head)| last.get(*shard).is_some_and(|l| head.seq <= l.seq))
        {
            return Err(HostError::new(format!(
                "the audit sink lost lines the root anchored: shard {shard} is at seq {}, \
                 anchored at {}",
                head.seq,
                last.get(shard).map_or(0, |l| l.seq)
            )));
        }
        if moved.is_empty() {
            return Ok(None);
        }
        let entry = root_entry(&root, &moved, now_ms);
        let outcome = sink.append(&entry)?;
        if !outcome.written {
            continue;
        }
        if outcome.stored.as_deref() != Some(entry.line.as_str()) {
            return Err(HostError::new(
                "the audit sink did not read the root line back as written",
            ));
        }
        last.extend(moved);
        return Ok(Some(entry.seq));
    }
    Err(HostError::new(
        "the audit root is contended: other writers' root lines kept moving its head",
    ))
}

/// The heads a root line anchors, by shard (none: not a root line).
fn anchored_heads(line: &str) -> Option<std::collections::BTreeMap<String, ChainHead>> {
    let v: Value = serde_json::from_str(line).ok()?;
    v.get("heads")?
        .as_object()?
        .iter()
        .map(|(shard, h)| {
            Some((
                shard.clone(),
                ChainHead {
                    seq: h.get("seq")?.as_u64()?,
                    event_sha256: h.get("sha256")?.as_str()?.to_owned(),
                },
            ))
        })
        .collect()
}

/// Whether a sink may take `entry` on its shard: the shard is a name a sink can key on (1 to
/// 64 lowercase letters and digits: a server's key part, or [`ROOT_SHARD`]), and the line's own
/// top-level `shard` is that name, read as a verifier reads it ([`verify_trail`]; nested keys
/// such as a form input named `shard` are another object's). A sink that filed a line under
/// another shard than the line names would hold a trail that no longer verifies. One parse of
/// the line per append: durable sinks pay it, beside the digest they check.
pub fn shard_ok(entry: &AuditEntry) -> bool {
    let name = &entry.shard;
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        && serde_json::from_str::<Value>(&entry.line)
            .ok()
            .is_some_and(|v| v.get("shard").and_then(Value::as_str) == Some(name.as_str()))
}

/// What [`verify_trail`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// How many lines.
    pub lines: u64,
    /// Each shard's head (lines before the sharded format under `""`).
    pub heads: std::collections::BTreeMap<String, ChainHead>,
    /// The position of the root's newest line, if the trail has one.
    pub last_root: Option<usize>,
}

/// [`verify_trail`], counting the lines.
pub fn verify_chain<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<u64, ChainBreak> {
    verify_trail(lines).map(|v| v.lines)
}

/// Verify a whole trail (oldest first) from the start of the sink: the lines of each shard
/// form one chain from genesis, in the order they come (the shards' lines may interleave in
/// any way); lines before the sharded format (`v2`, `v3`: no `shard`) form one chain of their
/// own; and every head a root line anchors ([`ROOT_SHARD`]) is in its shard's chain, with the
/// digest anchored, wherever the root line stands among the others. Returns how many lines
/// were verified and each shard's head. A shard's newest lines cut away are found once a root
/// line anchored them (`Cut`); lines cut after the last anchor leave a shorter chain that
/// still verifies.
pub fn verify_trail<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Verified, ChainBreak> {
    use std::collections::BTreeMap;
    // Each shard's line digests by seq (index seq - 1): the anchors are checked at the end.
    let mut shards: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // (root line position, shard, seq, digest), and each shard's last anchored seq.
    let mut anchors: Vec<(usize, String, u64, String)> = Vec::new();
    let mut anchored: BTreeMap<String, u64> = BTreeMap::new();
    let mut count = 0_u64;
    let mut last_root = None;
    for (i, line) in lines.into_iter().enumerate() {
        let v: Value = serde_json::from_str(line).map_err(|_| ChainBreak::Malformed(i))?;
        let seq = v
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or(ChainBreak::Malformed(i))?;
        let back = v
            .get("prev_sha256")
            .and_then(Value::as_str)
            .ok_or(ChainBreak::Malformed(i))?;
        let shard = match v.get("shard") {
            None => "",
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            Some(_) => return Err(ChainBreak::Malformed(i)),
        };
        let chain = shards.entry(shard.to_owned()).or_default();
        let prev = chain
            .last()
            .map_or(ChainHead::genesis().event_sha256, Clone::clone);
        if usize::try_from(seq).ok() != chain.len().checked_add(1) {
            return Err(ChainBreak::Gap(i));
        }
        if back != prev {
            return Err(ChainBreak::Broken(i));
        }
        chain.push(digest::text_sha256_hex(line));
        if shard == ROOT_SHARD {
            last_root = Some(i);
            let heads = v
                .get("heads")
                .and_then(Value::as_object)
                .ok_or(ChainBreak::Malformed(i))?;
            for (s, head) in heads {
                let at = head.get("seq").and_then(Value::as_u64);
                let sha = head.get("sha256").and_then(Value::as_str);
                let (Some(at), Some(sha)) = (at, sha) else {
                    return Err(ChainBreak::Malformed(i));
                };
                // An anchor never goes back: a root that does was not written by one host's
                // schedule from one sink's heads.
                let last = anchored.entry(s.clone()).or_insert(0);
                if at < *last || s == ROOT_SHARD || at == 0 {
                    return Err(ChainBreak::Malformed(i));
                }
                *last = at;
                anchors.push((i, s.clone(), at, sha.to_owned()));
            }
        }
        count = count.saturating_add(1);
    }
    for (i, shard, seq, sha) in anchors {
        let held = shards
            .get(&shard)
            .and_then(|c| c.get(usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX)));
        match held {
            None => return Err(ChainBreak::Cut(i)),
            Some(d) if *d != sha => return Err(ChainBreak::Rewritten(i)),
            Some(_) => {}
        }
    }
    let heads = shards
        .into_iter()
        .filter_map(|(shard, chain)| {
            let seq = u64::try_from(chain.len()).ok()?;
            chain.last().map(|d| {
                (
                    shard,
                    ChainHead {
                        seq,
                        event_sha256: d.clone(),
                    },
                )
            })
        })
        .collect();
    Ok(Verified {
        lines: count,
        heads,
        last_root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn line_keys_are_the_fields_plus_the_writers_in_canonical_order() {
        let mut expected: Vec<&str> = FIELDS.to_vec();
        expected.extend(["prev_sha256", "schema", "seq", "shard"]);
        expected.sort_unstable();
        assert_eq!(expected, LINE_KEYS.to_vec());
    }

    #[test]
    fn each_line_key_is_filled_by_its_own_part() {
        for (key, part) in LINE_KEYS.iter().zip(LINE_PARTS) {
            let name = match part {
                Part::Slot(field) => field.name(),
                Part::PrevSha256 => "prev_sha256",
                Part::Schema => "schema",
                Part::Seq => "seq",
                Part::Shard => "shard",
            };
            assert_eq!(*key, name);
        }
    }

    #[test]
    fn the_line_is_the_canonical_json_of_the_event() {
        let e = Event::new(EventKind::Received, Rc::from("0123abcd"))
            .set(Field::Round, 3)
            .set(Field::Name, "t\"o\nol")
            .set(Field::InputKinds, json!({"b": "url", "a": "form"}))
            .set_str(Field::Outcome, "de\"ni\\ed");
        let line = e.line(17, 5, "ab");
        let parsed: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        assert_eq!(canonical::to_canonical(&parsed), line);
        assert_eq!(parsed["seq"], json!(5));
        assert_eq!(parsed["shard"], json!("0123abcd"));
        assert_eq!(parsed["schema"], json!(AUDIT_SCHEMA));
        assert_eq!(parsed.as_object().map(|m| m.len()), Some(LINE_KEYS.len()));
    }

    /// A line of `shard` after `head` (genesis: `None`), built as the writer builds one.
    fn next(shard: &str, head: Option<&AuditEntry>, n: u64) -> AuditEntry {
        let prev = head.map_or_else(ChainHead::genesis, |h| ChainHead {
            seq: h.seq,
            event_sha256: h.event_sha256.clone(),
        });
        let line = Event::new(EventKind::Rejected, Rc::from(shard))
            .set(Field::Round, n)
            .line(n, prev.seq + 1, &prev.event_sha256);
        AuditEntry {
            shard: shard.to_owned(),
            seq: prev.seq + 1,
            prev_sha256: prev.event_sha256,
            event_sha256: digest::text_sha256_hex(&line),
            line,
        }
    }

    fn head_of(e: &AuditEntry) -> ChainHead {
        ChainHead {
            seq: e.seq,
            event_sha256: e.event_sha256.clone(),
        }
    }

    /// Two shards interleaved (a1 b1 a2 b2 a3) and a root anchoring both heads.
    fn two_shards() -> Vec<AuditEntry> {
        let a1 = next("aa", None, 1);
        let b1 = next("bb", None, 2);
        let a2 = next("aa", Some(&a1), 3);
        let b2 = next("bb", Some(&b1), 4);
        let a3 = next("aa", Some(&a2), 5);
        let heads = [
            ("aa".to_owned(), head_of(&a3)),
            ("bb".to_owned(), head_of(&b2)),
        ]
        .into_iter()
        .collect();
        let root = root_entry(&ChainHead::genesis(), &heads, 6);
        vec![a1, b1, a2, b2, a3, root]
    }

    fn verify(entries: &[AuditEntry]) -> Result<u64, ChainBreak> {
        verify_chain(entries.iter().map(|e| e.line.as_str()))
    }

    #[test]
    fn each_shard_is_its_own_chain_and_the_root_anchors_their_heads() {
        let trail = two_shards();
        assert_eq!(verify(&trail), Ok(6));
        // Shards may come one after the other (a sharded store read shard by shard).
        let mut by_shard = trail.clone();
        by_shard.sort_by(|a, b| a.shard.cmp(&b.shard));
        assert_eq!(verify(&by_shard), Ok(6));
        let root: Value = serde_json::from_str(&trail[5].line).unwrap_or(Value::Null);
        assert_eq!(canonical::to_canonical(&root), trail[5].line);
        assert_eq!(root["heads"]["aa"]["seq"], json!(3));
    }

    #[test]
    fn a_shard_cut_below_its_anchor_is_found() {
        let mut trail = two_shards();
        trail.remove(4); // a3, the head of `aa` the root anchors
        assert_eq!(verify(&trail), Err(ChainBreak::Cut(4)));
        // The whole shard gone.
        let trail: Vec<_> = two_shards()
            .into_iter()
            .filter(|e| e.shard != "bb")
            .collect();
        assert_eq!(verify(&trail), Err(ChainBreak::Cut(3)));
    }

    #[test]
    fn a_shard_rewritten_and_rechained_is_found() {
        let mut trail = two_shards();
        // `aa`'s last line replaced by another that links properly.
        trail[4] = next("aa", Some(&trail[2].clone()), 99);
        assert_eq!(verify(&trail), Err(ChainBreak::Rewritten(5)));
    }

    #[test]
    fn a_shard_reordered_or_a_line_moved_to_another_shard_breaks_its_chain() {
        let mut trail = two_shards();
        trail.swap(0, 2); // a2 before a1
        assert_eq!(verify(&trail), Err(ChainBreak::Gap(0)));
        let mut trail = two_shards();
        let mut moved: Value = serde_json::from_str(&trail[3].line).unwrap_or(Value::Null);
        moved["shard"] = json!("aa");
        trail[3].line = canonical::to_canonical(&moved);
        assert_eq!(verify(&trail), Err(ChainBreak::Gap(3)));
    }

    #[test]
    fn a_root_that_goes_back_or_anchors_nothing_real_is_malformed() {
        let trail = two_shards();
        let back = [("aa".to_owned(), head_of(&trail[2]))]
            .into_iter()
            .collect();
        let root2 = root_entry(&head_of(&trail[5]), &back, 7);
        let mut t = trail.clone();
        t.push(root2);
        assert_eq!(verify(&t), Err(ChainBreak::Malformed(6)));
        let zero = [("aa".to_owned(), ChainHead::genesis())]
            .into_iter()
            .collect();
        let mut t = trail[..5].to_vec();
        t.push(root_entry(&ChainHead::genesis(), &zero, 7));
        assert_eq!(verify(&t), Err(ChainBreak::Malformed(5)));
    }

    #[test]
    fn lines_before_the_sharded_format_are_one_chain_of_their_own() {
        let mut old = Vec::new();
        let mut prev = ChainHead::genesis();
        for n in 1..=2_u64 {
            let line = json!({"event": "received", "prev_sha256": prev.event_sha256,
                "schema": "mrtr-gate/audit/v3", "seq": n})
            .to_string();
            prev = ChainHead {
                seq: n,
                event_sha256: digest::text_sha256_hex(&line),
            };
            old.push(line);
        }
        let trail = two_shards();
        let lines: Vec<&str> = old
            .iter()
            .map(String::as_str)
            .chain(trail.iter().map(|e| e.line.as_str()))
            .collect();
        assert_eq!(verify_chain(lines), Ok(8));
    }

    #[test]
    fn a_sink_takes_only_a_shard_it_can_key_on_and_the_line_names() {
        let e = next("0123abcd", None, 1);
        assert!(shard_ok(&e));
        for bad in ["", "AB", "a}b", "a:b", &"a".repeat(65), "0123abc"] {
            let mut other = e.clone();
            other.shard = bad.to_owned();
            assert!(!shard_ok(&other), "{bad:?}");
        }
        // A nested key of that name (a form input called `shard`) is not the line's shard.
        let mut e = next("aa", None, 1);
        e.shard = "form".into();
        e.line = e.line.replace(
            "\"input_kinds\":null",
            "\"input_kinds\":{\"shard\":\"form\"}",
        );
        assert!(e.line.contains("{\"shard\":\"form\"}"), "{}", e.line);
        assert!(!shard_ok(&e));
        // The name inside another field's string does not count.
        let mut e = next("aa", None, 1);
        e.shard = "bb".into();
        e.line = e
            .line
            .replace("\"reason\":null", "\"reason\":\"\\\"shard\\\":\\\"bb\\\"\"");
        assert!(e.line.contains("shard\\\":\\\"bb"), "{}", e.line);
        assert!(!shard_ok(&e));
    }
}
