//! G002: audit events, hash-chained, written and read back before anything depends on them.
//!
//! An event holds digests and codes only: never the `requestState`, never an answer, never a
//! token, never a URL's query. Each event names the one before it (`prev_sha256`), so a sink
//! that drops, reorders or rewrites events breaks the chain where any host can see it.

use crate::canonical;
use crate::digest;
use crate::error::{GateError, HostFault};
use crate::host::{AppendOutcome, Audit, AuditEntry, ChainHead};
use serde_json::Value;

/// The version of the event format.
pub const AUDIT_SCHEMA: &str = "mrtr-gate/audit/v3";

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
    Raw(std::rc::Rc<str>),
}

/// Declares the event fields once: the enum (whose value is the field's slot) and the names
/// in the same order, so the two can never disagree.
macro_rules! event_fields {
    ($($variant:ident => $name:literal,)*) => {
        /// The fields every event carries (null when they do not apply), in canonical order.
        /// The writer adds `prev_sha256`, `schema` and `seq` (see [`LINE_KEYS`]).
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
pub const LINE_KEYS: [&str; 26] = [
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
    Part::Slot(Field::StateSha256),
    Part::Slot(Field::TenantSha256),
    Part::Slot(Field::UserSha256),
    Part::Slot(Field::ViewSha256),
];

impl Event {
    /// A new event of `kind`.
    pub fn new(kind: EventKind) -> Self {
        let mut e = Self {
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
    pub(crate) fn set_raw(mut self, field: Field, canonical_json: std::rc::Rc<str>) -> Self {
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

/// Appends events to the host's sink, extending the chain; each append reads its write back.
#[derive(Debug, Default)]
pub(crate) struct ChainWriter {
    /// The head after this writer's last append. Unknown at first: the first append is
    /// tried on the genesis head and learns the real one from the sink (one call on an
    /// empty sink, two otherwise; there is no separate `head` call to pay for).
    head: Option<ChainHead>,
    /// The last line this writer had confirmed (read back from the sink). A chain only
    /// grows, so a sink naming a head before it, or another line at its `seq`, has lost
    /// lines it confirmed (a store restarted without them, a truncated file, a failover to
    /// a replica that never had them).
    confirmed: Option<ChainHead>,
    /// Set once such a loss was seen: the sink's word is worth nothing after it, so this
    /// writer writes no more (every later append denies) until the process starts again.
    lost: bool,
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
        mut still: impl FnMut() -> Result<(), GateError>,
    ) -> Result<u64, GateError> {
        let fail = |why: String| GateError::Host(HostFault::AuditWriteFailed(why));
        let lost = || fail(LOST_LINES.into());
        if self.lost {
            return Err(lost());
        }
        let mut head = self.head.take().unwrap_or_else(ChainHead::genesis);
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
                seq,
                prev_sha256: head.event_sha256.clone(),
                event_sha256: digest::sha256_hex(line.as_bytes()),
                line,
            };
            let outcome = sink.append(&entry).map_err(|e| fail(e.message))?;
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
                    if let Some(confirmed) = &self.confirmed
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
            self.confirmed = Some(written.clone());
            self.head = Some(written);
            return Ok(seq);
        }
        Err(GateError::Host(HostFault::AuditContention))
    }
}

/// Problems a chain check finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainBreak {
    /// The line at this position does not parse, or lacks `seq`/`prev_sha256`.
    Malformed(usize),
    /// `seq` does not follow the one before.
    Gap(usize),
    /// `prev_sha256` is not the digest of the line before.
    Broken(usize),
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
        }
    }
}

impl std::error::Error for ChainBreak {}

/// Verify a whole chain of lines (oldest first) from the start of the sink.
pub fn verify_chain<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<u64, ChainBreak> {
    let mut prev = ChainHead::genesis();
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
        if Some(seq) != prev.seq.checked_add(1) {
            return Err(ChainBreak::Gap(i));
        }
        if back != prev.event_sha256 {
            return Err(ChainBreak::Broken(i));
        }
        prev = ChainHead {
            seq,
            event_sha256: digest::sha256_hex(line.as_bytes()),
        };
    }
    Ok(prev.seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn line_keys_are_the_fields_plus_the_writers_in_canonical_order() {
        let mut expected: Vec<&str> = FIELDS.to_vec();
        expected.extend(["prev_sha256", "schema", "seq"]);
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
            };
            assert_eq!(*key, name);
        }
    }

    #[test]
    fn the_line_is_the_canonical_json_of_the_event() {
        let e = Event::new(EventKind::Received)
            .set(Field::Round, 3)
            .set(Field::Name, "t\"o\nol")
            .set(Field::InputKinds, json!({"b": "url", "a": "form"}))
            .set_str(Field::Outcome, "de\"ni\\ed");
        let line = e.line(17, 5, "ab");
        let parsed: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        assert_eq!(canonical::to_canonical(&parsed), line);
        assert_eq!(parsed["seq"], json!(5));
        assert_eq!(parsed["schema"], json!(AUDIT_SCHEMA));
        assert_eq!(parsed.as_object().map(|m| m.len()), Some(LINE_KEYS.len()));
    }
}
