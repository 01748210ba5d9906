//! Reconciliation (G002): read a trail back and report what it proves and what it does not.
//! The rules are docs/audit.md, "Reconciliation": events are walked in `seq` order and
//! grouped by binding (server and original id; a group ends at its `terminal` event, since an
//! id may be registered again afterwards).

use crate::audit::{ChainBreak, verify_chain};
use serde_json::{Value, json};
use std::collections::BTreeMap;

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
    /// the causes docs/audit.md lists. `{server, request_id, rounds, submitted}`.
    pub open: Vec<Value>,
    /// Bindings that ended `expired` (`{server, request_id}`).
    pub expired: Vec<Value>,
    /// Rounds with more than one `submitted` event: a round used twice. Must be empty.
    pub double_use: Vec<Value>,
    /// `submitted` events that carry a receipt with no matching `consented` event before
    /// them (same binding, round, retry id, view and receipt). Must be empty.
    pub unconsented: Vec<Value>,
    /// `submitted` events without a receipt for a round that asked for input. Must be empty.
    pub consent_missing: Vec<Value>,
    /// Refused attempts by what they were (`late_or_replayed`: `inactive_mrtr_round`,
    /// `no_live_request`; `cross_principal`: `mrtr_identity_or_argument_mismatch`;
    /// `id_collision`: `retry_requires_new_jsonrpc_id`; `lost_race`: `state_already_used`;
    /// every other code under its own name), each `{reason, request_id, retry_id, seq}`.
    pub refused: BTreeMap<String, Vec<Value>>,
}

impl Reconciliation {
    /// True when nothing the trail shows is a violation (open bindings and refusals are not).
    pub fn clean(&self) -> bool {
        self.chain_break.is_none()
            && self.double_use.is_empty()
            && self.unconsented.is_empty()
            && self.consent_missing.is_empty()
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
            "refused": self.refused,
            "clean": self.clean(),
        })
    }
}

#[derive(Default)]
struct Group {
    received: bool,
    rounds: u64,
    submitted: BTreeMap<u64, u64>,
    // (round, retry id, view, receipt) of each `consented` event.
    consented: Vec<(u64, String, String, String)>,
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

/// Reconcile `lines` (one trail, in order).
pub fn reconcile<'a>(lines: impl IntoIterator<Item = &'a str> + Clone) -> Reconciliation {
    let mut out = Reconciliation {
        chain_break: verify_chain(lines.clone()).err(),
        ..Reconciliation::default()
    };
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for line in lines {
        out.events = out.events.saturating_add(1);
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let event = e.get("event").and_then(Value::as_str).unwrap_or_default();
        let key = (text(&e, "server"), text(&e, "request_id"));
        let round = e.get("round").and_then(Value::as_u64).unwrap_or(0);
        match event {
            "received" => {
                let g = groups.entry(key).or_default();
                if !g.received {
                    out.bindings = out.bindings.saturating_add(1);
                }
                g.received = true;
                g.rounds = g.rounds.max(round);
            }
            "consented" => groups.entry(key).or_default().consented.push((
                round,
                text(&e, "retry_id"),
                text(&e, "view_sha256"),
                text(&e, "consent_receipt_id"),
            )),
            "submitted" => {
                let g = groups.entry(key.clone()).or_default();
                let n = g.submitted.entry(round).or_default();
                *n = n.saturating_add(1);
                let at = json!({"server": e.get("server"), "request_id": e.get("request_id"), "round": round, "seq": e.get("seq")});
                if *n == 2 {
                    out.double_use.push(at.clone());
                }
                let receipt = e.get("consent_receipt_id").filter(|r| !r.is_null());
                let asked_input = e
                    .get("input_kinds")
                    .and_then(Value::as_object)
                    .is_some_and(|k| !k.is_empty());
                match receipt {
                    Some(_) => {
                        let wanted = (
                            round,
                            text(&e, "retry_id"),
                            text(&e, "view_sha256"),
                            text(&e, "consent_receipt_id"),
                        );
                        if !g.consented.contains(&wanted) {
                            out.unconsented.push(at);
                        }
                    }
                    None if asked_input => out.consent_missing.push(at),
                    None => {}
                }
            }
            "rejected" => {
                let reason = e.get("reason").and_then(Value::as_str).unwrap_or("unknown");
                out.refused
                    .entry(kind_of(reason).to_owned())
                    .or_default()
                    .push(json!({"reason": reason, "request_id": e.get("request_id"), "retry_id": e.get("retry_id"), "seq": e.get("seq")}));
            }
            "terminal" => {
                if e.get("outcome").and_then(Value::as_str) == Some("expired") {
                    out.expired.push(
                        json!({"server": e.get("server"), "request_id": e.get("request_id")}),
                    );
                }
                // The group ends here: the id may be registered again.
                groups.remove(&key);
            }
            _ => {}
        }
    }
    let mut open: Vec<Value> = groups
        .into_iter()
        .filter(|(_, g)| g.received)
        .map(|((server, id), g)| {
            json!({"server": serde_json::from_str::<Value>(&server).unwrap_or(Value::Null),
                "request_id": serde_json::from_str::<Value>(&id).unwrap_or(Value::Null),
                "rounds": g.rounds, "submitted": g.submitted.values().sum::<u64>()})
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

    #[test]
    fn a_clean_trail_reports_its_open_and_ended_bindings() {
        let lines = chain(&[
            ev("received", 1, json!({"input_kinds": {"a": "form"}})),
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
        assert!(r.clean(), "{:?}", r.to_json());
        assert_eq!((r.events, r.bindings), (10, 3));
        assert_eq!(r.open.len(), 1, "binding 5 is still live");
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
        assert!(!r.clean());
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
}
