//! The `audit` contract, one suite over the in-memory sink and the shared Redis trail (on one
//! server and on a Cluster): an append is written only if it extends the head (else the head
//! comes back), its line is read back, an entry whose digest is not its line's is refused, the
//! head appended again is written once, an append fewer replicas hold than the sink waits for
//! is an error (and a root never anchors a head they do not hold), and the trail is one intact
//! chain.

#![cfg(test)]

use mrtr_gate_host::core::audit::{anchor_root, verify_chain};
use mrtr_gate_host::core::digest::sha256_hex;
use mrtr_gate_host::core::host::{AppendOutcome, Audit, AuditEntry, ChainHead, ShardHeads};
use mrtr_gate_host::reference_hosts::MemoryAudit;
use mrtr_gate_redis::{Options, RedisAudit};
mod support;
use support::entry_in;

fn entry(head: &ChainHead, body: &str) -> AuditEntry {
    entry_in("s1", head, body)
}

fn sinks() -> Vec<(&'static str, Box<dyn Audit>, Option<RedisAudit>)> {
    let mut out: Vec<(&'static str, Box<dyn Audit>, Option<RedisAudit>)> =
        vec![("memory", Box::new(MemoryAudit::new()), None)];
    for (name, url) in support::deployments() {
        let trail = format!("t{}-{}", std::process::id(), rand_suffix());
        let sink = RedisAudit::connect(&url, "audit-contract", &trail).unwrap();
        let reader = RedisAudit::connect(&url, "audit-contract", &trail).unwrap();
        out.push((name, Box::new(sink), Some(reader)));
    }
    out
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

#[test]
fn appends_extend_the_head_and_read_back() {
    for (name, sink, reader) in sinks() {
        let mut head = ChainHead::genesis();
        for i in 0..5 {
            let e = entry(&head, &format!("event {i}"));
            assert_eq!(
                sink.append(&e).unwrap(),
                AppendOutcome::written(&e, Some(e.line.clone())),
                "{name}"
            );
            head = ChainHead {
                seq: e.seq,
                event_sha256: e.event_sha256,
            };
        }
        // An entry that does not extend the head is not written; the head comes back.
        let stale = entry(&ChainHead::genesis(), "late");
        assert_eq!(
            sink.append(&stale).unwrap(),
            AppendOutcome::head_moved(head.clone()),
            "{name}"
        );
        let wrong_prev = AuditEntry {
            prev_sha256: "f".repeat(64),
            ..entry(&head, "forked")
        };
        assert!(!sink.append(&wrong_prev).unwrap().written, "{name}");
        if let Some(reader) = reader {
            let lines = reader.lines().unwrap();
            assert_eq!(lines.len(), 5);
            assert_eq!(verify_chain(lines.iter().map(String::as_str)).unwrap(), 5);
        }
    }
}

#[test]
fn an_entry_whose_digest_is_not_its_lines_is_refused_by_redis() {
    for (name, sink, _) in sinks() {
        if name == "memory" {
            continue; // the in-memory sink trusts its caller; the durable sinks check
        }
        let mut e = entry(&ChainHead::genesis(), "x");
        e.event_sha256 = "0".repeat(64);
        assert!(sink.append(&e).is_err(), "{name}");
    }
}

#[test]
fn each_shard_is_its_own_chain_and_the_reader_sees_every_shard() {
    for (name, sink, reader) in sinks() {
        let mut heads = std::collections::BTreeMap::new();
        for i in 0..6 {
            let shard = ["aa", "bb", "cc"][i % 3];
            let head = heads.get(shard).cloned().unwrap_or_else(ChainHead::genesis);
            let e = entry_in(shard, &head, &format!("event {i}"));
            assert!(sink.append(&e).unwrap().written, "{name} {i}");
            heads.insert(
                shard.to_owned(),
                ChainHead {
                    seq: e.seq,
                    event_sha256: e.event_sha256,
                },
            );
        }
        // Each shard's head is its own: seq 2 everywhere, not 6.
        assert!(heads.values().all(|h| h.seq == 2), "{name}");
        let stale = entry_in("bb", &ChainHead::genesis(), "late");
        assert_eq!(
            sink.append(&stale).unwrap(),
            AppendOutcome::head_moved(heads["bb"].clone()),
            "{name}"
        );
        if let Some(reader) = reader {
            assert_eq!(reader.heads().unwrap(), heads, "{name}");
            let lines = reader.lines().unwrap();
            assert_eq!(
                verify_chain(lines.iter().map(String::as_str)),
                Ok(6),
                "{name}"
            );
        }
    }
}

#[test]
fn an_entry_on_a_shard_its_line_does_not_name_or_no_key_can_carry_is_refused_by_redis() {
    for (name, sink, _) in sinks() {
        if name == "memory" {
            continue;
        }
        let mut other = entry_in("aa", &ChainHead::genesis(), "x");
        other.shard = "bb".into();
        assert!(sink.append(&other).is_err(), "{name}");
        for bad in ["a}b", "a{b", "A", ""] {
            let mut e = entry_in("aa", &ChainHead::genesis(), "x");
            e.line = e
                .line
                .replace("\"shard\":\"aa\"", &format!("\"shard\":\"{bad}\""));
            e.event_sha256 = sha256_hex(e.line.as_bytes());
            e.shard = bad.into();
            assert!(sink.append(&e).is_err(), "{name} {bad}");
        }
    }
}

#[test]
fn two_writers_contend_for_one_head_and_the_trail_stays_one_chain() {
    for (_, url) in support::deployments() {
        contend(&url);
    }
}

fn contend(url: &str) {
    let url = url.to_owned();
    let trail = format!("race{}", std::process::id());
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let url = url.clone();
            let trail = trail.clone();
            std::thread::spawn(move || {
                let sink = RedisAudit::connect(&url, "audit-contract", &trail).unwrap();
                let mut head = ChainHead::genesis();
                let mut written = 0;
                while written < 100 {
                    let e = entry(&head, &format!("writer {w} event {written}"));
                    let outcome = sink.append(&e).unwrap();
                    if outcome.written {
                        written += 1;
                        head = ChainHead {
                            seq: e.seq,
                            event_sha256: e.event_sha256,
                        };
                    } else {
                        head = outcome.head();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let lines = RedisAudit::connect(&url, "audit-contract", &trail)
        .unwrap()
        .lines()
        .unwrap();
    assert_eq!(verify_chain(lines.iter().map(String::as_str)).unwrap(), 200);
}

#[test]
fn the_head_appended_again_is_written_once_as_a_retried_call_would() {
    for (name, url) in support::deployments() {
        let trail = format!("again{}-{}", std::process::id(), rand_suffix());
        let sink = RedisAudit::connect(&url, "audit-contract", &trail).unwrap();
        let e = entry(&ChainHead::genesis(), "once");
        let first = sink.append(&e).unwrap();
        let again = sink.append(&e).unwrap();
        assert!(first.written && again.written, "{name}");
        assert_eq!(first.stored, again.stored, "{name}");
        // An entry at the head's place with another line is not the head: the head moved.
        let mut other = entry(&ChainHead::genesis(), "other");
        other.seq = 1;
        assert!(!sink.append(&other).unwrap().written, "{name}");
        assert_eq!(sink.lines().unwrap(), vec![e.line], "{name}");
    }
}

#[test]
fn an_append_fewer_replicas_hold_than_the_sink_waits_for_is_an_error() {
    for (name, url) in support::deployments() {
        // One server has no replica; each Cluster master has one, never two.
        let wanted = if name == "redis" { 1 } else { 2 };
        let trail = format!("unheld{}-{}", std::process::id(), rand_suffix());
        let options = Options::for_url(&url).replicas(wanted);
        let sink = RedisAudit::connect_with(&url, "audit-contract", &trail, options).unwrap();
        let e = entry(&ChainHead::genesis(), "unheld");
        let err = sink.append(&e).unwrap_err();
        assert!(err.message.contains("replicas"), "{name}: {err:?}");
    }
}

#[test]
fn a_root_anchors_only_heads_the_replicas_hold() {
    for (name, url) in support::deployments() {
        let trail = format!("unanchored{}-{}", std::process::id(), rand_suffix());
        let connect = |replicas| {
            let options = Options::for_url(&url).replicas(replicas);
            RedisAudit::connect_with(&url, "audit-contract", &trail, options).unwrap()
        };
        // A line the master took and no replica need hold: what a master holds between taking
        // an append and its `WAIT` ending, or after a `WAIT` that failed.
        let e = entry_in("aa", &ChainHead::genesis(), "taken, not held");
        assert!(connect(0).append(&e).unwrap().written, "{name}");
        // One server has no replica; each Cluster master has one, never two.
        let strict = connect(if name == "redis" { 1 } else { 2 });
        let err = strict.heads().unwrap_err();
        assert!(
            err.message.contains("shard aa") && err.message.contains("replicas"),
            "{name}: {err:?}"
        );
        let mut anchored = std::collections::BTreeMap::new();
        assert!(anchor_root(&strict, &mut anchored, 1).is_err(), "{name}");
        assert_eq!(
            strict.last_root().unwrap(),
            None,
            "{name}: a root was written"
        );
        assert!(anchored.is_empty(), "{name}");
        // Held by as many replicas as there are (a Cluster master's one, one server's none),
        // the head is read, and anchored.
        let held = connect(u32::from(name != "redis"));
        let head = ChainHead {
            seq: 1,
            event_sha256: e.event_sha256.clone(),
        };
        assert_eq!(held.heads().unwrap().get("aa"), Some(&head), "{name}");
        assert_eq!(
            anchor_root(&held, &mut anchored, 2).unwrap(),
            Some(1),
            "{name}"
        );
        assert_eq!(anchored.get("aa"), Some(&head), "{name}");
    }
}

#[test]
fn the_sinks_of_one_process_learn_each_others_heads_without_a_round_trip() {
    for (name, url) in support::deployments() {
        let trail = format!("siblings{}-{}", std::process::id(), rand_suffix());
        let a = RedisAudit::connect(&url, "audit-contract", &trail).unwrap();
        let b = a.another().unwrap();
        let first = entry_in("aa", &ChainHead::genesis(), "a's");
        assert!(a.append(&first).unwrap().written, "{name}");
        let head = |e: &AuditEntry| ChainHead {
            seq: e.seq,
            event_sha256: e.event_sha256.clone(),
        };
        // b's entry on the genesis head: answered from what a saw, with no call to Redis.
        let calls = b.round_trips();
        let late = entry_in("aa", &ChainHead::genesis(), "b's, late");
        assert_eq!(
            b.append(&late).unwrap(),
            AppendOutcome::head_moved(head(&first)),
            "{name}"
        );
        assert_eq!(
            b.round_trips(),
            calls,
            "{name}: a refusal cost a round trip"
        );
        let second = entry_in("aa", &head(&first), "b's");
        assert!(b.append(&second).unwrap().written, "{name}");
        // Another process's line is learned from Redis, as before.
        let other = RedisAudit::connect(&url, "audit-contract", &trail).unwrap();
        let third = entry_in("aa", &head(&second), "another process's");
        assert!(other.append(&third).unwrap().written, "{name}");
        let fourth = entry_in("aa", &head(&second), "a's, behind");
        assert_eq!(
            a.append(&fourth).unwrap(),
            AppendOutcome::head_moved(head(&third)),
            "{name}"
        );
        let lines = a.lines().unwrap();
        assert_eq!(
            verify_chain(lines.iter().map(String::as_str)),
            Ok(3),
            "{name}"
        );
        // A head Redis names replaces a higher one seen: lines lost (here the shard removed, as
        // a failover to a replica that never had them would) do not leave what is seen ahead of
        // the trail for good. (On one server: its keys are removed from outside.)
        if name == "redis" {
            let mut raw = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            let _: () = redis::cmd("DEL")
                .arg(format!("audit-contract:{{aa}}#audit:{trail}"))
                .arg(format!("audit-contract:{{aa}}#audit-head:{trail}"))
                .query(&mut raw)
                .unwrap();
            let after = entry_in("aa", &head(&third), "after the loss");
            assert_eq!(
                b.append(&after).unwrap(),
                AppendOutcome::head_moved(ChainHead::genesis()),
                "{name}"
            );
            let again = entry_in("aa", &ChainHead::genesis(), "again");
            assert!(a.append(&again).unwrap().written, "{name}");
        }
    }
}
