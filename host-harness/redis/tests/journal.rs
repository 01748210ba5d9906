//! The `journal` on Redis, on one server and on a Cluster: a store write and the audit line
//! that records it, made in one script when the store and the trail are one Redis, answer
//! exactly what the two calls answer on every outcome (the line written or refused on a moved
//! head, the writes applied or lost, in either order), in fewer round trips; writes outside
//! the line's slot on a Cluster, and a sink the store cannot see, fall back to the two calls;
//! and the host keys seal what the journal writes as they seal a plain write.

#![cfg(test)]

mod support;

use mrtr_gate_host::core::ID_PREFIX;
use mrtr_gate_host::core::audit::verify_chain;
use mrtr_gate_host::core::host::{
    AppendOutcome, Audit, AuditEntry, ChainHead, HostError, Journaled, Order, ReadKey, Storage,
    Write, journal,
};
use mrtr_gate_host::host_keys::{AuthenticatedStorage, HostKeys};
use mrtr_gate_host::reference_hosts::SystemClock;
use mrtr_gate_redis::{RedisAudit, RedisStorage};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A shard, and so the hash tag of the keys written with its lines (a server's key part).
const SHARD: &str = "0123456789abcdef0123456789abcdef";
/// Another server's key part: another slot on a Cluster.
const OTHER: &str = "fedcba9876543210fedcba9876543210";

fn key(tag: &str, id: &str) -> String {
    format!("{ID_PREFIX}{tag}/{id}")
}

fn entry(head: &ChainHead, body: &str) -> AuditEntry {
    support::entry_in(SHARD, head, body)
}

fn head_of(e: &AuditEntry) -> ChainHead {
    ChainHead {
        seq: e.seq,
        event_sha256: e.event_sha256.clone(),
    }
}

fn put<'a>(key: &'a str, expected: u64, value: &'a str) -> Write<'a> {
    Write {
        key,
        expected,
        value: Some(value),
        ttl_ms: 60_000,
    }
}

/// A sink that hides the Redis trail behind it: no store can fuse with it, so a journal call
/// is the two calls.
struct Apart<'a>(&'a RedisAudit);

impl Audit for Apart<'_> {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        self.0.append(entry)
    }
}

/// A store and a trail of their own on `url`.
fn pair(url: &str) -> (RedisStorage, RedisAudit) {
    static N: AtomicU64 = AtomicU64::new(0);
    let ns = format!(
        "journal{}n{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let clock = Arc::new(SystemClock);
    (
        RedisStorage::connect(url, &ns, clock).unwrap(),
        RedisAudit::connect(url, &ns, "trail").unwrap(),
    )
}

/// What a call did, as the test compares it: the writes applied, the line's outcome (written,
/// read back as sent, the head's seq), and whether a second step failed.
type Seen = (usize, Option<(bool, bool, u64)>, bool);

fn seen(j: &Journaled, e: &AuditEntry) -> Seen {
    (
        j.applied.len(),
        j.appended
            .as_ref()
            .map(|o| (o.written, o.stored.as_deref() == Some(&e.line), o.head_seq)),
        j.failed.is_some(),
    )
}

/// Every outcome of both orders, through `sink` (the trail itself, or [`Apart`]); returns
/// what each call did and the round trips the calls took.
fn outcomes(store: &RedisStorage, trail: &RedisAudit, sink: &dyn Audit) -> (Vec<Seen>, u64) {
    let (k1, k2, k3) = (key(SHARD, "1"), key(SHARD, "2"), key(SHARD, "3"));
    let trips = || store.round_trips() + trail.round_trips();
    // The shard listed and the script loaded beforehand, so both modes count only their calls.
    let warm = entry(&ChainHead::genesis(), "warm");
    journal(
        store,
        sink,
        Order::AppendThenWrite,
        &warm,
        &[put(&k3, 0, "w")],
    )
    .unwrap();
    let before = trips();
    let mut out = Vec::new();
    let mut call = |order, e: &AuditEntry, writes: &[Write<'_>]| {
        let j = journal(store, sink, order, e, writes).unwrap();
        out.push(seen(&j, e));
        j
    };
    let head = head_of(&warm);
    // The line, then the write.
    let first = entry(&head, "first");
    let v1 = call(Order::AppendThenWrite, &first, &[put(&k1, 0, "a")]).applied[0];
    // A line on a head that moved: not written, and the write not tried.
    call(
        Order::AppendThenWrite,
        &entry(&head, "stale"),
        &[put(&k2, 0, "b")],
    );
    // The line written, the write lost (the key is not absent).
    let second = entry(&head_of(&first), "second");
    call(Order::AppendThenWrite, &second, &[put(&k1, 0, "c")]);
    // The write lost first: the line not offered.
    call(
        Order::WriteThenAppend,
        &entry(&head_of(&second), "x"),
        &[put(&k1, 1, "d")],
    );
    // The write (a delete), then the line.
    let third = entry(&head_of(&second), "third");
    let delete = Write {
        key: &k1,
        expected: v1,
        value: None,
        ttl_ms: 0,
    };
    call(Order::WriteThenAppend, &third, &[delete]);
    // The write applied, the line on a head that moved refused.
    call(
        Order::WriteThenAppend,
        &entry(&head_of(&second), "late"),
        &[put(&k2, 0, "e")],
    );
    let spent = trips() - before;
    // What the store holds: k1 deleted, k2 written only by the last call.
    let held = store
        .read(&[ReadKey::from(k1.as_str()), ReadKey::from(k2.as_str())])
        .unwrap();
    assert_eq!(held[0].version, 0);
    assert_eq!(held[1].value, "e");
    (out, spent)
}

#[test]
fn one_script_answers_what_the_two_calls_answer_in_fewer_round_trips() {
    for (name, url) in support::deployments() {
        let (store, trail) = pair(&url);
        let (fused, fused_trips) = outcomes(&store, &trail, &trail);
        let (store2, trail2) = pair(&url);
        let (apart, apart_trips) = outcomes(&store2, &trail2, &Apart(&trail2));
        assert_eq!(fused, apart, "{name}");
        assert_eq!(
            fused,
            vec![
                (1, Some((true, true, 2)), false),
                (0, Some((false, false, 2)), false),
                (0, Some((true, true, 3)), false),
                (0, None, false),
                (1, Some((true, true, 4)), false),
                (1, Some((false, false, 4)), false),
            ],
            "{name}"
        );
        assert!(
            fused_trips < apart_trips,
            "{name}: {fused_trips} round trips in one script each, {apart_trips} as two calls"
        );
        for t in [&trail, &trail2] {
            let lines = t.lines().unwrap();
            assert_eq!(lines.len(), 4, "{name}");
            verify_chain(lines.iter().map(String::as_str)).unwrap();
        }
    }
}

#[test]
fn writes_outside_the_lines_slot_and_another_redis_fall_back_to_the_two_calls() {
    for (name, url) in support::deployments() {
        let (store, trail) = pair(&url);
        let other_key = key(OTHER, "1");
        let e = entry(&ChainHead::genesis(), "elsewhere");
        let j = journal(
            &store,
            &trail,
            Order::AppendThenWrite,
            &e,
            &[put(&other_key, 0, "v")],
        )
        .unwrap();
        assert_eq!(seen(&j, &e), (1, Some((true, true, 1)), false), "{name}");
        // A trail under another namespace of the same Redis: the same answers.
        let (_, elsewhere) = pair(&url);
        let next = entry(&ChainHead::genesis(), "second trail");
        let k = key(SHARD, "2");
        let j = journal(
            &store,
            &elsewhere,
            Order::WriteThenAppend,
            &next,
            &[put(&k, 0, "w")],
        )
        .unwrap();
        assert_eq!(seen(&j, &next), (1, Some((true, true, 1)), false), "{name}");
    }
}

#[test]
fn the_host_keys_seal_what_the_journal_writes() {
    for (name, url) in support::deployments() {
        let (store, trail) = pair(&url);
        let sealed = AuthenticatedStorage::new(store, HostKeys::new("k1", &[7; 32]).unwrap());
        let k = key(SHARD, "1");
        let e = entry(&ChainHead::genesis(), "sealed");
        let j = journal(
            &sealed,
            &trail,
            Order::AppendThenWrite,
            &e,
            &[put(&k, 0, "text")],
        )
        .unwrap();
        assert_eq!(seen(&j, &e), (1, Some((true, true, 1)), false), "{name}");
        let back = sealed.read(&[ReadKey::from(k.as_str())]).unwrap();
        assert_eq!(back[0].value, "text", "{name}");
        assert_eq!(back[0].version, j.applied[0], "{name}");
    }
}
