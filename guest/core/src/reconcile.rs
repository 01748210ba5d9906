//! Reconciliation (G002): read a trail back and report what it proves and what it does not.
//! The rules are docs/audit.md, "Reconciliation": events are walked in `seq` order and
//! grouped by binding (server, original id and `binding`, the record version the binding was
//! registered at: an id may be registered again once its record is gone, and a late event of
//! the ended binding stays in its own group), and each group's life is checked as a state
//! machine: `received` (round 1) -> [`consented`] -> `submitted` -> (`received` (next round)
//! -> [`consented`] -> `submitted`)* -> `terminal`, nothing of the binding after `terminal`.

use crate::audit::{ChainBreak, verify_chain};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// What is wrong with an event's place in its binding's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Finding {
    /// A `consented`, `submitted` or `terminal` event for a round the binding never
    /// `received` (or a `terminal` naming a round no binding of that id opened).
    NotReceived,
    /// An event of a binding after its `terminal` event that no new binding can explain.
    AfterTerminal,
    /// An event out of its place: a round received before the one before it was submitted, a
    /// round submitted that is not the open one, a `terminal` naming another round.
    OutOfOrder,
    /// A `consented` or `submitted` event whose `view_sha256` is not the view of the round
    /// the binding received.
    OtherView,
    /// The same event twice: a `consented` event repeated (round, retry id, view and
    /// receipt), or a round `received` again with no refused store to explain it.
    Duplicate,
}

impl Finding {
    /// The finding's name in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotReceived => "not_received",
            Self::AfterTerminal => "after_terminal",
            Self::OutOfOrder => "out_of_order",
            Self::OtherView => "other_view",
            Self::Duplicate => "duplicate",
        }
    }
}

/// One event out of its binding's life.
#[derive(Clone, Debug, PartialEq)]
pub struct LifecycleFinding {
    /// What is wrong.
    pub finding: Finding,
    /// The event's kind (`received`, `consented`, `submitted`, `terminal`).
    pub event: String,
    /// The binding's server, as the trail names it.
    pub server: Value,
    /// The binding's original id.
    pub request_id: Value,
    /// Which binding of the id (`binding` in the trail: its record's version at registration).
    pub binding: Value,
    /// The round the event names.
    pub round: u64,
    /// The event's `seq`.
    pub seq: Value,
}

impl LifecycleFinding {
    /// The finding as JSON.
    pub fn to_json(&self) -> Value {
        json!({"finding": self.finding.as_str(), "event": self.event, "server": self.server,
            "request_id": self.request_id, "binding": self.binding, "round": self.round,
            "seq": self.seq})
    }
}

/// What a trail shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reconciliation {
    /// Lines read.
    pub events: u64,
    /// Where the hash chain breaks, if it does (nothing after the break is trusted).
    pub chain_break: Option<ChainBreak>,
    /// Bindings that received a round.
    pub bindings: u64,
    /// Bindings with a `received` event and no `terminal` event yet: live, or lost by one of
    /// the causes docs/audit.md lists. `{server, request_id, binding, rounds, submitted}`.
    pub open: Vec<Value>,
    /// Bindings that ended `expired` (`{server, request_id, binding}`).
    pub expired: Vec<Value>,
    /// Rounds with more than one `submitted` event: a round used twice. Must be empty.
    pub double_use: Vec<Value>,
    /// `submitted` events that carry a receipt with no matching `consented` event before
    /// them (same binding, round, retry id, view and receipt). Must be empty.
    pub unconsented: Vec<Value>,
    /// `submitted` events without a receipt for a round that asked for input. Must be empty.
    pub consent_missing: Vec<Value>,
    /// Events out of their binding's life (the state machine above). Must be empty.
    pub lifecycle: Vec<LifecycleFinding>,
    /// Refused attempts by what they were (`late_or_replayed`: `inactive_mrtr_round`,
    /// `no_live_request`; `cross_principal`: `mrtr_identity_or_argument_mismatch`;
    /// `id_collision`: `retry_requires_new_jsonrpc_id`; `lost_race`: `state_already_used`;
    /// every other code under its own name), each `{reason, request_id, retry_id, seq}`.
    pub refused: BTreeMap<String, Vec<Value>>,
}

impl Reconciliation {
    /// True when nothing the trail shows is a violation (open bindings and refusals are not):
    /// what gates write at any moment, a trail still being written included.
    pub fn consistent(&self) -> bool {
        self.chain_break.is_none()
            && self.double_use.is_empty()
            && self.unconsented.is_empty()
            && self.consent_missing.is_empty()
            && self.lifecycle.is_empty()
    }

    /// True when the trail is [`Self::consistent`] and every binding in it has ended: what hosts
    /// that stopped cleanly leave. A binding still `open` is live, or was left by a host that
    /// crashed or was killed (or lost its `terminal` line: docs/audit.md).
    pub fn clean(&self) -> bool {
        self.consistent() && self.open.is_empty()
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "events": self.events,
            "chain": match &self.chain_break { None => json!("intact"), Some(b) => json!(format!("{b:?}")) },
            "bindings": self.bindings,
            "open": self.open,
            "expired": self.expired,
            "double_use": self.double_use,
            "unconsented": self.unconsented,
            "consent_missing": self.consent_missing,
            "lifecycle": self.lifecycle.iter().map(LifecycleFinding::to_json).collect::<Vec<_>>(),
            "refused": self.refused,
            "consistent": self.consistent(),
            "clean": self.clean(),
        })
    }
}

/// One binding's life so far.
#[derive(Default)]
struct Group {
    /// The highest round received (0: none yet).
    received: u64,
    /// The views each received round was shown with (a round received twice, after a
    /// refused store, may have been judged from two responses).
    views: BTreeMap<u64, BTreeSet<String>>,
    /// `received` events per round, and `rejected` events per round (a `received` whose
    /// round could not be stored is followed or preceded by a `rejected` one).
    tries: BTreeMap<u64, (u64, u64)>,
    /// The first extra `received` of each round (reported if nothing refused explains it).
    extra_received: BTreeMap<u64, Value>,
    /// `submitted` events per round.
    submitted: BTreeMap<u64, u64>,
    /// The `state_sha256` of the last round received (as its text, `null` for none).
    last_state: String,
    /// (round, retry id, view, receipt) of each `consented` event.
    consented: Vec<(u64, String, String, String)>,
}

impl Group {
    /// Each `received` more than the refused stores seen so far explain (the first extra
    /// `received` of its round stands for it).
    fn unexplained(&self) -> impl Iterator<Item = (u64, &Value)> {
        self.tries.iter().flat_map(|(round, (received, refused))| {
            let extra = received.saturating_sub(refused.saturating_add(1));
            let e = self.extra_received.get(round);
            (0..extra).filter_map(move |_| e.map(|e| (*round, e)))
        })
    }

    /// Whether anything rests on `round`: a consent given for it or a retry submitted.
    fn used(&self, round: u64) -> bool {
        self.submitted.contains_key(&round) || self.consented.iter().any(|c| c.0 == round)
    }

    fn submitted_up_to(&self) -> u64 {
        self.submitted.keys().next_back().copied().unwrap_or(0)
    }

    fn shows(&self, round: u64, view: &str) -> bool {
        self.views.get(&round).is_some_and(|v| v.contains(view))
    }
}

fn kind_of(reason: &str) -> &str {
    match reason {
        "inactive_mrtr_round" | "no_live_request" => "late_or_replayed",
        "mrtr_identity_or_argument_mismatch" => "cross_principal",
        "retry_requires_new_jsonrpc_id" => "id_collision",
        "state_already_used" => "lost_race",
        other => other,
    }
}

fn text(v: &Value, field: &str) -> String {
    v.get(field).map(Value::to_string).unwrap_or_default()
}

/// A binding: its server, original id and `binding` (each as its JSON text).
type Key = (String, String, String);

/// An event that waits for a refusal: its finding should none come, the event's kind, the event.
type Waiting = (Finding, &'static str, Value);

/// The walk over one trail.
#[derive(Default)]
struct Walk {
    out: Reconciliation,
    live: BTreeMap<Key, Group>,
    /// The last ended group of each key: a late `consented` event of a racing instance (one
    /// that read the round before another consumed it) may follow the binding's end.
    ended: BTreeMap<Key, Group>,
    /// Events of ended bindings that a refused store of one of their rounds explains, that
    /// refusal not yet seen: an instance that audited `received` and then found the record
    /// gone (another instance removed the binding and audited `terminal` in between) audits
    /// its refusal after the end. A `terminal` naming the round before the last one received,
    /// and each `received` more than the refusals so far explain. Keyed by the binding, the
    /// round and its state digest, each waits for one `rejected` event of that round and
    /// state; what still waits at the end of the trail is a finding.
    awaiting_refusal: BTreeMap<(Key, u64, String), Vec<Waiting>>,
}

impl Walk {
    /// The group an event belongs to. A trail written across an upgrade mixes lines without
    /// `binding` (`audit/v2`) and lines with it, and one binding's events may be of both: a
    /// line without it joins the one live group of its id, and a line with it takes over the
    /// live group its id's lines without it started.
    fn group_of(&mut self, e: &Value) -> Key {
        let (server, id, binding) = (text(e, "server"), text(e, "request_id"), text(e, "binding"));
        let of_id = |live: &BTreeMap<Key, Group>| -> Vec<Key> {
            live.range((server.clone(), id.clone(), String::new())..)
                .take_while(|((s, i, _), _)| *s == server && *i == id)
                .map(|(k, _)| k.clone())
                .collect()
        };
        if binding.is_empty() {
            if let [only] = of_id(&self.live).as_slice() {
                return only.clone();
            }
        } else if binding != "null" {
            let key = (server.clone(), id.clone(), binding.clone());
            let unnamed = (server.clone(), id.clone(), String::new());
            if !self.live.contains_key(&key)
                && let Some(g) = self.live.remove(&unnamed)
            {
                self.live.insert(key.clone(), g);
            }
            return key;
        }
        (server, id, binding)
    }

    fn find(&mut self, finding: Finding, e: &Value, event: &str, round: u64) {
        self.out.lifecycle.push(LifecycleFinding {
            finding,
            event: event.to_owned(),
            server: e.get("server").cloned().unwrap_or(Value::Null),
            request_id: e.get("request_id").cloned().unwrap_or(Value::Null),
            binding: e.get("binding").cloned().unwrap_or(Value::Null),
            round,
            seq: e.get("seq").cloned().unwrap_or(Value::Null),
        });
    }

    /// Nothing of a binding without a live group: a new one starts only with round 1.
    fn without_group(&mut self, key: &Key, e: &Value, event: &str, round: u64) {
        let finding = if self.ended.contains_key(key) {
            Finding::AfterTerminal
        } else {
            Finding::NotReceived
        };
        self.find(finding, e, event, round);
    }

    fn received(&mut self, key: Key, e: &Value, round: u64) {
        let view = text(e, "view_sha256");
        let Some(g) = self.live.get_mut(&key) else {
            if round == 1 {
                let g = Group {
                    received: 1,
                    views: BTreeMap::from([(1, BTreeSet::from([view]))]),
                    tries: BTreeMap::from([(1, (1, 0))]),
                    last_state: text(e, "state_sha256"),
                    ..Group::default()
                };
                self.live.insert(key, g);
                self.out.bindings = self.out.bindings.saturating_add(1);
            } else {
                self.without_group(&key, e, "received", round);
            }
            return;
        };
        if round >= 1 && round <= g.received {
            // Received again: legitimate only when that one's store was refused (two
            // instances judged one response; a store that failed was tried again).
            let n = g.tries.entry(round).or_default();
            n.0 = n.0.saturating_add(1);
            g.views.entry(round).or_default().insert(view);
            g.extra_received.entry(round).or_insert_with(|| e.clone());
        } else if round == g.received.saturating_add(1) && g.submitted_up_to() == g.received {
            g.received = round;
            g.views.entry(round).or_default().insert(view);
            g.tries.insert(round, (1, 0));
            g.last_state = text(e, "state_sha256");
        } else {
            self.find(Finding::OutOfOrder, e, "received", round);
        }
    }

    fn consented(&mut self, key: Key, e: &Value, round: u64) {
        let entry = (
            round,
            text(e, "retry_id"),
            text(e, "view_sha256"),
            text(e, "consent_receipt_id"),
        );
        let (g, late) = match (self.live.get_mut(&key), self.ended.get_mut(&key)) {
            (Some(g), _) => (g, false),
            (None, Some(g)) => (g, true),
            (None, None) => return self.find(Finding::NotReceived, e, "consented", round),
        };
        let finding = if !g.views.contains_key(&round) {
            Some(if late {
                Finding::AfterTerminal
            } else {
                Finding::NotReceived
            })
        } else if !g.shows(round, &entry.2) {
            Some(Finding::OtherView)
        } else if g.consented.contains(&entry) {
            Some(Finding::Duplicate)
        } else {
            None
        };
        match finding {
            Some(f) => self.find(f, e, "consented", round),
            None => g.consented.push(entry),
        }
    }

    fn submitted(&mut self, key: Key, e: &Value, round: u64) {
        let at = json!({"server": e.get("server"), "request_id": e.get("request_id"),
            "binding": e.get("binding"), "round": round, "seq": e.get("seq")});
        let Some(g) = self.live.get_mut(&key) else {
            return self.without_group(&key, e, "submitted", round);
        };
        if !g.views.contains_key(&round) {
            return self.find(Finding::NotReceived, e, "submitted", round);
        }
        let count = g.submitted.entry(round).or_default();
        *count = count.saturating_add(1);
        let n = *count;
        if n == 2 {
            self.out.double_use.push(at.clone());
        }
        let in_place = n == 1 && round == g.received;
        let view = text(e, "view_sha256");
        let other_view = !g.shows(round, &view);
        let receipt = e.get("consent_receipt_id").filter(|r| !r.is_null());
        let asked_input = e
            .get("input_kinds")
            .and_then(Value::as_object)
            .is_some_and(|k| !k.is_empty());
        let wanted = (
            round,
            text(e, "retry_id"),
            view,
            text(e, "consent_receipt_id"),
        );
        let consented = g.consented.contains(&wanted);
        match receipt {
            Some(_) if !consented => self.out.unconsented.push(at),
            None if asked_input => self.out.consent_missing.push(at),
            _ => {}
        }
        if other_view {
            self.find(Finding::OtherView, e, "submitted", round);
        } else if !in_place && n == 1 {
            // An earlier round, not submitted, whose next round was received already.
            self.find(Finding::OutOfOrder, e, "submitted", round);
        }
    }

    fn terminal(&mut self, key: Key, e: &Value, round: u64) {
        if e.get("outcome").and_then(Value::as_str) == Some("expired") {
            self.out.expired.push(
                json!({"server": e.get("server"), "request_id": e.get("request_id"),
                    "binding": e.get("binding")}),
            );
        }
        let Some(g) = self.live.remove(&key) else {
            // A binding ended before any round (a denial of its first response) names
            // round 0; any other round needs a live binding that received it.
            if round != 0 {
                self.without_group(&key, e, "terminal", round);
            }
            return;
        };
        // The round of the stored binding: the last received, or the one before it when
        // that one was never stored (a `rejected` event names it, or its `received` could not
        // be confirmed to the gate, which then audits nothing more of it); never before the
        // last submitted.
        let refused_last = g.tries.get(&g.received).is_some_and(|t| t.1 > 0);
        let before_last = round.saturating_add(1) == g.received;
        let stored = round == g.received || (refused_last && before_last);
        if round < g.submitted_up_to() {
            self.find(Finding::OutOfOrder, e, "terminal", round);
        } else if !stored && before_last && !g.used(g.received) {
            // Never stored, and nothing rests on it: a `terminal` naming the round before
            // can only come from the record as it was (each end is a compare-and-swap on the
            // version read), so the last round never reached storage. Its `received` was
            // written but not confirmed (a sink that applied the line and then timed out
            // waiting for its replica), and a refusal cannot follow it: the failed audit was
            // the refusal (docs/audit.md, "What the failure means").
        } else if !stored && before_last && g.submitted_up_to() < g.received {
            let state = g.last_state.clone();
            self.awaiting_refusal
                .entry((key.clone(), g.received, state))
                .or_default()
                .push((Finding::OutOfOrder, "terminal", e.clone()));
        } else if !stored {
            self.find(Finding::OutOfOrder, e, "terminal", round);
        }
        for (round, extra) in g.unexplained() {
            self.awaiting_refusal
                .entry((key.clone(), round, text(extra, "state_sha256")))
                .or_default()
                .push((Finding::Duplicate, "received", extra.clone()));
        }
        // The group ends here: the id may be registered again.
        self.ended.insert(key, g);
    }

    fn rejected(&mut self, key: &Key, e: &Value, round: u64) {
        let reason = e.get("reason").and_then(Value::as_str).unwrap_or("unknown");
        self.out
            .refused
            .entry(kind_of(reason).to_owned())
            .or_default()
            .push(json!({"reason": reason, "request_id": e.get("request_id"), "retry_id": e.get("retry_id"), "seq": e.get("seq")}));
        // A refusal that an ended binding waits for is its; otherwise the live binding's.
        let waiting = (key.clone(), round, text(e, "state_sha256"));
        if let Some(events) = self.awaiting_refusal.get_mut(&waiting) {
            events.pop();
            if events.is_empty() {
                self.awaiting_refusal.remove(&waiting);
            }
        } else if let Some(n) = self.live.get_mut(key).and_then(|g| g.tries.get_mut(&round)) {
            n.1 = n.1.saturating_add(1);
        }
    }
}

/// Reconcile `lines` (one trail, in order).
pub fn reconcile<'a>(lines: impl IntoIterator<Item = &'a str> + Clone) -> Reconciliation {
    let mut walk = Walk {
        out: Reconciliation {
            chain_break: verify_chain(lines.clone()).err(),
            ..Reconciliation::default()
        },
        ..Walk::default()
    };
    for line in lines {
        walk.out.events = walk.out.events.saturating_add(1);
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let event = e.get("event").and_then(Value::as_str).unwrap_or_default();
        let key = walk.group_of(&e);
        let round = e.get("round").and_then(Value::as_u64).unwrap_or(0);
        match event {
            "received" => walk.received(key, &e, round),
            "consented" => walk.consented(key, &e, round),
            "submitted" => walk.submitted(key, &e, round),
            "rejected" => walk.rejected(&key, &e, round),
            "terminal" => walk.terminal(key, &e, round),
            _ => {}
        }
    }
    let live = std::mem::take(&mut walk.live);
    // One finding per round and kind, however many events stand unexplained.
    for g in live.values() {
        let rounds: BTreeMap<u64, &Value> = g.unexplained().collect();
        for (round, e) in rounds {
            walk.find(Finding::Duplicate, e, "received", round);
        }
    }
    for ((_, round, _), mut waiting) in std::mem::take(&mut walk.awaiting_refusal) {
        waiting.dedup_by_key(|(finding, event, _)| (*finding, *event));
        for (finding, event, e) in waiting {
            let named = e.get("round").and_then(Value::as_u64).unwrap_or(round);
            walk.find(finding, &e, event, named);
        }
    }
    let mut out = walk.out;
    let mut open: Vec<Value> = live
        .into_iter()
        .map(|((server, id, binding), g)| {
            let parsed = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
            json!({"server": parsed(&server), "request_id": parsed(&id), "binding": parsed(&binding),
                "rounds": g.received, "submitted": g.submitted.values().sum::<u64>()})
        })
        .collect();
    open.sort_by_key(Value::to_string);
    out.open = open;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::sha256_hex;

    fn chain(events: &[Value]) -> Vec<String> {
        let mut prev = "0".repeat(64);
        events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut e = e.clone();
                if let Some(o) = e.as_object_mut() {
                    o.insert("seq".into(), json!(i + 1));
                    o.insert("prev_sha256".into(), json!(prev));
                }
                let line = crate::canonical::to_canonical(&e);
                prev = sha256_hex(line.as_bytes());
                line
            })
            .collect()
    }

    fn ev(event: &str, id: i64, extra: Value) -> Value {
        let mut e =
            json!({"event": event, "server": "https://s#sha256:x", "request_id": id, "round": 1});
        if let (Some(o), Some(x)) = (e.as_object_mut(), extra.as_object()) {
            o.extend(x.clone());
        }
        e
    }

    /// `e` as an event of binding `b` (an `audit/v3` line).
    fn of_binding(mut e: Value, b: u64) -> Value {
        if let Some(o) = e.as_object_mut() {
            o.insert("binding".into(), json!(b));
        }
        e
    }

    #[test]
    fn a_clean_trail_reports_its_open_and_ended_bindings() {
        let lines = chain(&[
            ev(
                "received",
                1,
                json!({"input_kinds": {"a": "form"}, "view_sha256": "v"}),
            ),
            ev(
                "consented",
                1,
                json!({"retry_id": 2, "view_sha256": "v", "consent_receipt_id": "r1"}),
            ),
            ev(
                "submitted",
                1,
                json!({"retry_id": 2, "view_sha256": "v", "consent_receipt_id": "r1", "input_kinds": {"a": "form"}}),
            ),
            ev("terminal", 1, json!({"outcome": "complete"})),
            ev("received", 5, json!({"input_kinds": {}})),
            ev(
                "submitted",
                5,
                json!({"retry_id": 6, "consent_receipt_id": null, "input_kinds": {}}),
            ),
            ev(
                "rejected",
                5,
                json!({"reason": "inactive_mrtr_round", "retry_id": 7}),
            ),
            ev(
                "rejected",
                5,
                json!({"reason": "mrtr_identity_or_argument_mismatch", "retry_id": 8}),
            ),
            ev("received", 9, json!({})),
            ev("terminal", 9, json!({"outcome": "expired"})),
        ]);
        let r = reconcile(lines.iter().map(String::as_str));
        assert!(r.consistent(), "{:?}", r.to_json());
        assert_eq!((r.events, r.bindings), (10, 3));
        assert_eq!(r.open.len(), 1, "binding 5 is still live");
        assert!(!r.clean(), "a binding left open is no clean end");
        assert_eq!(r.to_json()["consistent"], true);
        assert_eq!(r.to_json()["clean"], false);
        assert_eq!(r.open[0]["request_id"], 5);
        assert_eq!(r.expired.len(), 1);
        assert_eq!(r.refused["late_or_replayed"].len(), 1);
        assert_eq!(r.refused["cross_principal"].len(), 1);
    }

    #[test]
    fn a_round_used_twice_a_retry_without_consent_and_a_broken_chain_are_reported() {
        let mut lines = chain(&[
            ev("received", 1, json!({"input_kinds": {"a": "form"}})),
            ev(
                "submitted",
                1,
                json!({"retry_id": 2, "consent_receipt_id": "forged", "input_kinds": {"a": "form"}}),
            ),
            ev(
                "submitted",
                1,
                json!({"retry_id": 3, "consent_receipt_id": null, "input_kinds": {"a": "form"}}),
            ),
        ]);
        let r = reconcile(lines.iter().map(String::as_str));
        assert!(!r.consistent());
        assert_eq!(r.double_use.len(), 1);
        assert_eq!(r.unconsented.len(), 1);
        assert_eq!(r.consent_missing.len(), 1);
        assert!(r.chain_break.is_none());
        lines.remove(1);
        let r = reconcile(lines.iter().map(String::as_str));
        assert!(
            r.chain_break.is_some(),
            "a line cut out of the middle breaks the chain"
        );
        assert!(
            reconcile(["not json"].iter().copied())
                .chain_break
                .is_some()
        );
        assert_eq!(
            reconcile(std::iter::empty::<&str>()),
            Reconciliation::default()
        );
    }

    fn findings(r: &Reconciliation) -> Vec<(&'static str, &str, u64)> {
        r.lifecycle
            .iter()
            .map(|f| (f.finding.as_str(), f.event.as_str(), f.round))
            .collect()
    }

    #[test]
    fn races_the_gate_allows_are_not_findings() {
        let round = |r: u64, extra: Value| {
            let mut e = ev(
                "received",
                1,
                json!({"round": r, "view_sha256": format!("v{r}")}),
            );
            if let (Some(o), Some(x)) = (e.as_object_mut(), extra.as_object()) {
                o.extend(x.clone());
            }
            e
        };
        let consent = |retry: u64, receipt: &str| {
            ev(
                "consented",
                1,
                json!({"retry_id": retry, "view_sha256": "v1", "consent_receipt_id": receipt}),
            )
        };
        let lines = chain(&[
            // Two instances judged round 1's response; the second one's store lost.
            round(1, json!({})),
            round(1, json!({})),
            ev("rejected", 1, json!({"reason": "state_already_used"})),
            // Two consents (two instances); one retry; the other instance's consent came
            // after the round was consumed, and again after the binding ended.
            consent(2, "a"),
            consent(3, "b"),
            ev(
                "submitted",
                1,
                json!({"retry_id": 2, "view_sha256": "v1", "consent_receipt_id": "a", "input_kinds": {"k": "form"}}),
            ),
            consent(4, "c"),
            round(2, json!({})),
            ev("terminal", 1, json!({"round": 2, "outcome": "cancelled"})),
            consent(5, "d"),
            // The id registered again: a binding denied at its first response, then one
            // with a round.
            ev("terminal", 1, json!({"round": 0, "outcome": "error"})),
            round(1, json!({})),
        ]);
        let r = reconcile(lines.iter().map(String::as_str));
        assert!(r.consistent(), "{}", r.to_json());
        assert_eq!(r.bindings, 2);
    }

    /// F4 (docs/checker-counterexamples.md): the id is registered again (binding 9) while a
    /// late `consented` and a long-contended `terminal` of its ended binding (3) are still to
    /// land. Each event names its binding, so each lands in its own group; without the names
    /// the two bindings' events would be one group's, out of order.
    #[test]
    fn an_ended_bindings_late_events_stay_out_of_the_next_binding_of_its_id() {
        let of = |b: u64, event: &str, extra: Value| of_binding(ev(event, 1, extra), b);
        let trail = [
            of(
                3,
                "received",
                json!({"view_sha256": "old", "input_kinds": {"k": "form"}}),
            ),
            of(
                9,
                "received",
                json!({"view_sha256": "new", "input_kinds": {"k": "form"}}),
            ),
            of(
                3,
                "consented",
                json!({"retry_id": 2, "view_sha256": "old", "consent_receipt_id": "a"}),
            ),
            of(3, "terminal", json!({"outcome": "expired"})),
            of(
                9,
                "consented",
                json!({"retry_id": 4, "view_sha256": "new", "consent_receipt_id": "b"}),
            ),
            of(
                9,
                "submitted",
                json!({"retry_id": 4, "view_sha256": "new", "consent_receipt_id": "b", "input_kinds": {"k": "form"}}),
            ),
        ];
        let lines = chain(&trail);
        let r = reconcile(lines.iter().map(String::as_str));
        assert!(r.consistent(), "{}", r.to_json());
        assert_eq!(r.bindings, 2);
        assert_eq!(r.open.len(), 1);
        assert_eq!(r.open[0]["binding"], 9);
        assert_eq!(
            r.expired,
            vec![json!({"server": "https://s#sha256:x", "request_id": 1, "binding": 3})]
        );
        // The same trail without the names: the two bindings cannot be told apart.
        let unnamed: Vec<Value> = trail
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if let Some(o) = e.as_object_mut() {
                    o.remove("binding");
                }
                e
            })
            .collect();
        let lines = chain(&unnamed);
        assert!(!reconcile(lines.iter().map(String::as_str)).consistent());
    }

    /// A trail written across an upgrade: a binding whose first events are `audit/v2` lines
    /// (no `binding`) and whose later ones are `v3` lines, and the other way round.
    #[test]
    fn a_binding_audited_partly_before_an_upgrade_is_one_group() {
        let received = |id| {
            ev(
                "received",
                id,
                json!({"view_sha256": "v", "input_kinds": {"k": "form"}}),
            )
        };
        let consented = |id| {
            ev(
                "consented",
                id,
                json!({"retry_id": 9, "view_sha256": "v", "consent_receipt_id": "r"}),
            )
        };
        let submitted = |id| {
            ev(
                "submitted",
                id,
                json!({"retry_id": 9, "view_sha256": "v", "consent_receipt_id": "r", "input_kinds": {"k": "form"}}),
            )
        };
        let terminal = |id| ev("terminal", id, json!({"outcome": "complete"}));
        let lines = chain(&[
            received(1),
            of_binding(consented(1), 4),
            of_binding(submitted(1), 4),
            of_binding(terminal(1), 4),
            of_binding(received(2), 6),
            consented(2),
            submitted(2),
            terminal(2),
        ]);
        let r = reconcile(lines.iter().map(String::as_str));
        assert!(r.consistent(), "{}", r.to_json());
        assert_eq!((r.bindings, r.open.len()), (2, 0));
    }

    /// F3 (docs/checker-counterexamples.md): an instance audits round 2's `received`, another
    /// removes the binding (still at round 1) and audits `terminal` naming round 1, then the
    /// first one's store finds the record gone and audits `rejected` for round 2. A `terminal`
    /// naming the round before the last received says that round was never stored; with
    /// nothing resting on it (no consent, no retry) it reconciles with its refusal or without
    /// one (a `received` the sink wrote but could not confirm is refused by the failed audit
    /// itself, which cannot be audited). Once the round was used, it had been stored, and a
    /// `terminal` naming the round before is out of order unless a refusal of that round and
    /// state explains it.
    #[test]
    fn a_terminal_naming_the_round_before_the_last_received_needs_that_round_unused_or_refused() {
        let received = |r: u64, state: &str| {
            ev(
                "received",
                1,
                json!({"round": r, "view_sha256": format!("v{r}"), "state_sha256": state}),
            )
        };
        let refused = |r: u64, state: &str| {
            ev(
                "rejected",
                1,
                json!({"round": r, "reason": "state_already_used", "state_sha256": state}),
            )
        };
        let submitted = ev(
            "submitted",
            1,
            json!({"retry_id": 11, "view_sha256": "v1", "consent_receipt_id": null, "input_kinds": {}, "state_sha256": "s1"}),
        );
        let consented = ev(
            "consented",
            1,
            json!({"round": 2, "retry_id": 12, "view_sha256": "v2", "consent_receipt_id": "r2"}),
        );
        let end = ev("terminal", 1, json!({"round": 1, "outcome": "cancelled"}));
        let run = |events: Vec<Value>| {
            let lines = chain(&events);
            reconcile(lines.iter().map(String::as_str))
        };
        let unused = vec![received(1, "s1"), submitted.clone(), received(2, "s2")];
        for tail in [
            vec![],
            vec![refused(2, "s2")],
            vec![received(1, "s3"), refused(2, "s2")],
            vec![refused(2, "s9")],
        ] {
            let mut events = unused.clone();
            events.push(end.clone());
            events.extend(tail);
            let r = run(events);
            assert!(r.consistent(), "{}", r.to_json());
        }
        // Round 2 consented: it was stored, so an end naming round 1 needs its refusal.
        let used = vec![
            received(1, "s1"),
            submitted.clone(),
            received(2, "s2"),
            consented.clone(),
            end.clone(),
        ];
        for tail in [vec![], vec![refused(2, "s9")], vec![refused(1, "s1")]] {
            let mut events = used.clone();
            events.extend(tail);
            let r = run(events);
            assert_eq!(
                findings(&r),
                vec![("out_of_order", "terminal", 1)],
                "{}",
                r.to_json()
            );
        }
    }

    /// Two instances judged one response; the binding ended before the losing one audited
    /// its refused store: the refusal after the end still explains the second `received`.
    #[test]
    fn a_round_received_twice_needs_a_refusal_before_or_after_the_end() {
        let received = ev(
            "received",
            1,
            json!({"view_sha256": "v1", "state_sha256": "s1"}),
        );
        let end = ev("terminal", 1, json!({"outcome": "cancelled"}));
        let refused = |state: &str| {
            ev(
                "rejected",
                1,
                json!({"reason": "state_already_used", "state_sha256": state}),
            )
        };
        let run = |events: Vec<Value>| {
            let lines = chain(&events);
            reconcile(lines.iter().map(String::as_str))
        };
        let r = run(vec![
            received.clone(),
            received.clone(),
            end.clone(),
            refused("s1"),
        ]);
        assert!(r.consistent(), "{}", r.to_json());
        for events in [
            vec![received.clone(), received.clone(), end.clone()],
            vec![
                received.clone(),
                received.clone(),
                end.clone(),
                refused("s2"),
            ],
            vec![
                received.clone(),
                received.clone(),
                received.clone(),
                end.clone(),
                refused("s1"),
            ],
        ] {
            let r = run(events);
            assert_eq!(
                findings(&r),
                vec![("duplicate", "received", 1)],
                "{}",
                r.to_json()
            );
        }
    }

    #[test]
    fn each_event_out_of_its_bindings_life_is_a_typed_finding() {
        let received = |r: u64| {
            ev(
                "received",
                1,
                json!({"round": r, "view_sha256": format!("v{r}")}),
            )
        };
        let submitted = |r: u64, view: &str| {
            ev(
                "submitted",
                1,
                json!({"round": r, "retry_id": 10 + r, "view_sha256": view, "consent_receipt_id": null, "input_kinds": {}}),
            )
        };
        type Expected = Vec<(&'static str, &'static str, u64)>;
        let cases: Vec<(Vec<Value>, Expected)> = vec![
            (
                vec![submitted(1, "v1")],
                vec![("not_received", "submitted", 1)],
            ),
            (
                vec![ev(
                    "consented",
                    1,
                    json!({"retry_id": 2, "view_sha256": "v1", "consent_receipt_id": "r"}),
                )],
                vec![("not_received", "consented", 1)],
            ),
            (
                vec![
                    received(1),
                    submitted(1, "v1"),
                    ev("terminal", 1, json!({"round": 1})),
                    submitted(1, "v1"),
                ],
                vec![("after_terminal", "submitted", 1)],
            ),
            (
                vec![received(1), submitted(1, "v2")],
                vec![("other_view", "submitted", 1)],
            ),
            (
                vec![received(1), received(2)],
                vec![("out_of_order", "received", 2)],
            ),
            (vec![received(2)], vec![("not_received", "received", 2)]),
            (
                vec![received(1), received(1)],
                vec![("duplicate", "received", 1)],
            ),
            (
                vec![
                    received(1),
                    submitted(1, "v1"),
                    ev("terminal", 1, json!({"round": 2})),
                ],
                vec![("out_of_order", "terminal", 2)],
            ),
            (
                vec![ev("terminal", 1, json!({"round": 1}))],
                vec![("not_received", "terminal", 1)],
            ),
        ];
        for (events, expected) in cases {
            let lines = chain(&events);
            let r = reconcile(lines.iter().map(String::as_str));
            assert!(!r.consistent(), "{events:?}");
            assert_eq!(findings(&r), expected, "{}", r.to_json());
        }
    }
}
