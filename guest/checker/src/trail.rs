//! The invariants, read off the audit trail the gates wrote (and the consent receipts the
//! world issued): checked after every line written and at the end of every run.

use crate::world::World;
use mrtr_gate_core::host::ConsentDecision;
use serde_json::Value;
use std::collections::BTreeMap;

/// An invariant broken, with the host calls that led to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant, and the events that break it.
    pub what: String,
    /// Every host call and fault of the run up to the violation, in order.
    pub log: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "invariant broken: {}", self.what)?;
        writeln!(f, "host calls and faults, in order:")?;
        for line in &self.log {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

fn field<'a>(e: &'a Value, name: &str) -> &'a Value {
    e.get(name).unwrap_or(&Value::Null)
}

fn kind(e: &Value) -> &str {
    field(e, "event").as_str().unwrap_or("")
}

/// The same binding (server, original id, and which registration of that id).
fn same_binding(a: &Value, b: &Value) -> bool {
    ["server", "request_id", "binding"]
        .iter()
        .all(|f| field(a, f) == field(b, f))
}

/// The same round of the same binding, as the events name it.
fn same_round(a: &Value, b: &Value) -> bool {
    same_binding(a, b)
        && ["round", "view_sha256", "state_sha256"]
            .iter()
            .all(|f| field(a, f) == field(b, f))
}

fn brief(e: &Value) -> String {
    format!(
        "seq {} {} request_id {} round {} retry_id {}",
        field(e, "seq"),
        kind(e),
        field(e, "request_id"),
        field(e, "round"),
        field(e, "retry_id")
    )
}

/// The invariants over `lines`, the whole trail so far, in order.
pub fn check(lines: &[String], world: &World) -> Result<(), String> {
    let events: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        .collect();
    let (held, confirmed) = (world.lines(), world.confirmed());
    // Each `submitted` consumes the `received` event of its round: at most one per round
    // received (a requestState the server sends again, to a new binding, is a new round).
    let mut consumed: BTreeMap<usize, &Value> = BTreeMap::new();
    for (i, s) in events.iter().enumerate() {
        if kind(s) != "submitted" {
            continue;
        }
        let before = events.get(..i).unwrap_or(&[]);
        // The round was received (the last time it was, if more than once).
        let Some(at) = before
            .iter()
            .rposition(|r| kind(r) == "received" && same_round(r, s))
        else {
            return Err(format!(
                "submitted without its round received: {}",
                brief(s)
            ));
        };
        if let Some(first) = consumed.insert(at, s) {
            return Err(format!(
                "a round (one requestState digest) submitted twice: {} and {}",
                brief(first),
                brief(s)
            ));
        }
        let since = before.get(at..).unwrap_or(&[]);
        // Nothing built after the binding's terminal event: one the trail still holds, or one
        // confirmed to its writer. A `terminal` a failover lost before its WAIT ended ends
        // nothing: its writer was told the append failed and denied (its cancel failed), so
        // a retry built after it is one built before a cancel that did not happen, and its
        // answer meets the store, which refuses it if the record is gone (F5,
        // docs/checker-counterexamples.md).
        let ended = (at..i).find(|&j| {
            events.get(j).is_some_and(|t| {
                kind(t) == "terminal"
                    && same_binding(t, s)
                    && lines
                        .get(j)
                        .is_some_and(|l| held.contains(l) || confirmed.contains(l))
            })
        });
        if let Some(t) = ended.and_then(|j| events.get(j)) {
            return Err(format!(
                "submitted after its binding ended: {} after {}",
                brief(s),
                brief(t)
            ));
        }
        // Consent for exactly this view (the answers are checked where the retry is returned,
        // [`crate::scenario`]), or none needed.
        match field(s, "consent_receipt_id").as_str() {
            Some(receipt) => {
                let consented = since.iter().any(|c| {
                    kind(c) == "consented"
                        && same_round(c, s)
                        && field(c, "consent_receipt_id") == field(s, "consent_receipt_id")
                });
                if !consented {
                    return Err(format!(
                        "submitted without its consented event: {}",
                        brief(s)
                    ));
                }
                match world.receipt(receipt) {
                    Some((ConsentDecision::Granted, view, _))
                        if Some(view.as_str()) == field(s, "view_sha256").as_str() => {}
                    other => {
                        return Err(format!(
                            "submitted on a receipt not granted for its view: {} ({other:?})",
                            brief(s)
                        ));
                    }
                }
            }
            None => {
                let asked = since
                    .first()
                    .map(|r| field(r, "input_kinds"))
                    .is_some_and(|k| k.as_array().is_some_and(|a| !a.is_empty()));
                if asked {
                    return Err(format!(
                        "submitted without consent for a round that asked for input: {}",
                        brief(s)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The invariants of a whole run, once every gate is done: the last line's, then every line
/// confirmed to a gate is in the trail, the trail's chain verifies, and it reconciles (when no
/// fault touched the sink, the store lost no records and no process died: a binding the store
/// forgot is never ended in the trail, a round a dead process audited is never stored nor
/// refused, and `reconcile` rightly reports both; a line whose WAIT failed may be left out,
/// since its writer denied as if it were not there), then every retry returned has its
/// `submitted` event. Single use is checked whatever the faults (`check`).
pub fn check_end(world: &World) -> Result<(), String> {
    let ledger = world.ledger();
    check(&ledger, world)?;
    world.check_confirmed()?;
    // Whatever the faults: a sink that loses lines loses its newest ones (a promotion, a
    // truncation), and what is left is still one chain, which the gates extend.
    let lines = world.lines();
    mrtr_gate_core::audit::verify_chain(lines.iter().map(String::as_str))
        .map_err(|b| format!("the trail's chain does not verify: {b:?}"))?;
    if !world.sink_faulted() && !world.store_lost_records() && !world.a_process_died() {
        // A line whose WAIT failed stays in the trail though its writer denied as if it were
        // not written: a `received` then stands for a round never stored nor refused, while a
        // refusal still explains what it refuses. So the trail must reconcile with some of
        // those lines left out (each subset tried; the chain is verified above, whole).
        let doubtful = world.doubtful_lines();
        let subsets = 1_u32.checked_shl(u32::try_from(doubtful.len()).unwrap_or(u32::MAX));
        let reconciled = |out: u32| {
            let kept = lines.iter().map(String::as_str).filter(|l| {
                !doubtful
                    .iter()
                    .enumerate()
                    .any(|(i, d)| out & (1 << i) != 0 && d == l)
            });
            let mut report = mrtr_gate_core::reconcile::reconcile(kept);
            if out != 0 {
                report.chain_break = None;
            }
            report
        };
        let report = reconciled(0);
        let clean = report.consistent()
            || subsets.is_none_or(|n| n > 64 || (1..n).any(|out| reconciled(out).consistent()));
        if !clean {
            return Err(format!(
                "the trail does not reconcile: {}",
                report.to_json()
            ));
        }
    }
    let submitted: Vec<Value> = ledger
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| kind(e) == "submitted")
        .map(|e| field(&e, "retry_id").clone())
        .collect();
    for built in world.built() {
        if !submitted.contains(&built) {
            return Err(format!(
                "a retry returned to its caller has no submitted event: retry_id {built}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::{Confirm, Replication};
    use crate::world::{Fault, VersionsAfterLoss};
    use mrtr_gate_core::digest::sha256_hex;
    use mrtr_gate_core::host::AuditEntry;
    use serde_json::json;

    /// The sink's next entry after `head` (seq 0: none) for an event of round 1 of id 7.
    fn entry(head: Option<&AuditEntry>, event: &str) -> AuditEntry {
        let (seq, prev) = head.map_or((1, "0".repeat(64)), |h| (h.seq + 1, h.event_sha256.clone()));
        let line = json!({
            "seq": seq, "prev_sha256": prev, "event": event, "server": "s", "shard": "s",
            "request_id": 7,
            "binding": 1, "round": 1, "view_sha256": "v", "state_sha256": "st",
            "input_kinds": [], "retry_id": 8,
        })
        .to_string();
        AuditEntry {
            shard: "s".into(),
            seq,
            prev_sha256: prev,
            event_sha256: sha256_hex(line.as_bytes()),
            line,
        }
    }

    fn write(world: &World, e: &AuditEntry) {
        assert!(world.append(e).0.is_ok_and(|o| o.written), "{}", e.line);
    }

    /// A replicated sink holding round 1's `received` on both copies and a `terminal` on the
    /// master only, `confirmed` or not; then the master dies (or, `lose`: not), and a
    /// `submitted` of the round goes on the head that is left.
    fn submitted_after_a_terminal(confirmed: bool, lose: bool) -> Result<(), String> {
        let world = World::new(
            VersionsAfterLoss::NewEpoch,
            Replication {
                store: false,
                sink: true,
                confirm: Confirm::WaitForReplica,
            },
        );
        world.settle();
        let received = entry(None, "received");
        write(&world, &received);
        world.inject(Fault::Replicate(crate::replica::Service::Sink));
        world.confirm_line(&received.line);
        let terminal = entry(Some(&received), "terminal");
        write(&world, &terminal);
        if confirmed {
            world.confirm_line(&terminal.line);
        }
        let head = if lose {
            world.inject(Fault::PromoteSink);
            assert_eq!(
                world.lines(),
                std::slice::from_ref(&received.line),
                "the terminal is lost"
            );
            &received
        } else {
            &terminal
        };
        write(&world, &entry(Some(head), "submitted"));
        check(&world.ledger(), &world)
    }

    #[test]
    fn a_terminal_the_trail_holds_or_its_writer_was_told_of_ends_the_binding() {
        for (confirmed, lose) in [(false, false), (true, false), (true, true)] {
            let found = submitted_after_a_terminal(confirmed, lose).unwrap_err();
            assert!(
                found.starts_with("submitted after its binding ended"),
                "{found}"
            );
        }
    }

    /// F5: a `terminal` a failover lost before its WAIT ended ends nothing (its cancel was
    /// denied).
    #[test]
    fn a_terminal_lost_before_it_was_confirmed_ends_nothing() {
        assert_eq!(submitted_after_a_terminal(false, true), Ok(()));
    }
}
