//! The `storage` contract (guest/core/src/host.rs, wit/gate.wit), one suite run against every
//! store a gate can run over: the in-memory store and Redis (a real redis-server; the test
//! command starts one and sets MRTR_GATE_REDIS_URL). Both must pass it identically: liveness
//! by the host's clock, compare-and-swap batches that stop at the first loser, versions never
//! reused by a key, the reader's version elided, opaque values, and `list-due` (only what is
//! due, by deadline, every due key exactly once over the pages of a listing).

#![cfg(test)]

use mrtr_gate_host::core::host::{Clock, ReadKey, Storage, Write};
use mrtr_gate_host::reference_hosts::{ManualClock, MemoryStorage};
use mrtr_gate_redis::RedisStorage;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const KEY: &str = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/1";
const OTHER: &str = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/\"r-2\"";
const ELSEWHERE: &str = "mrtr-gate/v3/id/fedcba9876543210fedcba9876543210/1";

fn insert<'a>(key: &'a str, value: &'a str, ttl_ms: u64) -> Write<'a> {
    Write {
        key,
        expected: 0,
        value: Some(value),
        ttl_ms,
    }
}

fn swap<'a>(key: &'a str, expected: u64, value: Option<&'a str>) -> Write<'a> {
    Write {
        key,
        expected,
        value,
        ttl_ms: 60_000,
    }
}

fn get(s: &dyn Storage, key: &str) -> Option<(u64, String)> {
    s.read(&[ReadKey::from(key)])
        .unwrap()
        .pop()
        .unwrap()
        .present()
        .map(|v| (v.version, v.value))
}

/// Every store under test, each empty, over one manual clock.
fn stores(clock: &Arc<ManualClock>) -> Vec<(&'static str, Box<dyn Storage>)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let shared: Arc<dyn Clock + Send + Sync> = clock.clone();
    let mut out: Vec<(&'static str, Box<dyn Storage>)> =
        vec![("memory", Box::new(MemoryStorage::new(shared.clone())))];
    match std::env::var("MRTR_GATE_REDIS_URL") {
        Ok(url) => {
            let ns = format!(
                "contract-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::SeqCst)
            );
            out.push((
                "redis",
                Box::new(RedisStorage::connect(&url, &ns, shared).unwrap()),
            ));
        }
        // CI always has Redis (scripts/test starts it): its absence there is a failure.
        Err(_) if std::env::var_os("CI").is_some() => {
            panic!("MRTR_GATE_REDIS_URL is not set (scripts/redis start)")
        }
        Err(_) => {
            eprintln!("MRTR_GATE_REDIS_URL is not set: the Redis half of the contract is skipped")
        }
    }
    out
}

fn each(test: impl Fn(&str, &dyn Storage, &ManualClock)) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    for (name, store) in stores(&clock) {
        test(name, store.as_ref(), &clock);
    }
}

#[test]
fn an_absent_key_reads_as_none() {
    each(|name, s, _| {
        assert_eq!(get(s, KEY), None, "{name}");
        assert!(s.read(&[]).unwrap().is_empty(), "{name}");
    });
}

#[test]
fn insert_if_absent_applies_once() {
    each(|name, s, _| {
        let v1 = s.write(&[insert(KEY, "one", 60_000)]).unwrap();
        assert_eq!(v1.len(), 1, "{name}");
        assert_ne!(v1[0], 0, "{name}: a version is never 0");
        assert_eq!(
            s.write(&[insert(KEY, "two", 60_000)]).unwrap(),
            Vec::<u64>::new(),
            "{name}: the key is taken"
        );
        assert_eq!(get(s, KEY), Some((v1[0], "one".into())), "{name}");
    });
}

#[test]
fn a_compare_and_swap_needs_the_current_version() {
    each(|name, s, _| {
        let v1 = s.write(&[insert(KEY, "one", 60_000)]).unwrap()[0];
        let v2 = s.write(&[swap(KEY, v1, Some("two"))]).unwrap();
        assert_eq!(v2.len(), 1, "{name}");
        assert_ne!(v2[0], v1, "{name}");
        assert_eq!(
            s.write(&[swap(KEY, v1, Some("stale"))]).unwrap(),
            Vec::<u64>::new(),
            "{name}: a stale version loses"
        );
        assert_eq!(get(s, KEY), Some((v2[0], "two".into())), "{name}");
        assert_eq!(
            s.write(&[swap(ELSEWHERE, v1, Some("x"))]).unwrap(),
            Vec::<u64>::new(),
            "{name}: an absent key has no version"
        );
    });
}

#[test]
fn a_batch_stops_at_the_first_loser() {
    each(|name, s, _| {
        let v = s.write(&[insert(OTHER, "taken", 60_000)]).unwrap()[0];
        let applied = s
            .write(&[
                insert(KEY, "a", 60_000),
                insert(OTHER, "b", 60_000),
                insert(ELSEWHERE, "c", 60_000),
            ])
            .unwrap();
        assert_eq!(
            applied.len(),
            1,
            "{name}: the first applied, the second lost, the third was not tried"
        );
        assert_eq!(get(s, KEY).map(|x| x.1), Some("a".into()), "{name}");
        assert_eq!(get(s, OTHER), Some((v, "taken".into())), "{name}");
        assert_eq!(get(s, ELSEWHERE), None, "{name}");
    });
}

#[test]
fn versions_are_never_reused_by_a_key_even_after_a_delete() {
    each(|name, s, _| {
        let mut seen = HashSet::new();
        for round in 0..20 {
            let v = s.write(&[insert(KEY, "x", 60_000)]).unwrap()[0];
            assert!(
                seen.insert(v),
                "{name}: version {v} came back in round {round}"
            );
            let v = s.write(&[swap(KEY, v, Some("y"))]).unwrap()[0];
            assert!(
                seen.insert(v),
                "{name}: version {v} came back in round {round}"
            );
            assert_eq!(
                s.write(&[swap(KEY, v, None)]).unwrap(),
                vec![0],
                "{name}: a delete reports 0"
            );
            assert_eq!(get(s, KEY), None, "{name}");
        }
    });
}

#[test]
fn a_reader_that_holds_the_version_gets_no_value() {
    each(|name, s, _| {
        let v = s.write(&[insert(KEY, "the record", 60_000)]).unwrap()[0];
        let got = s
            .read(&[
                ReadKey { key: KEY, have: v },
                ReadKey {
                    key: KEY,
                    have: v + 1000,
                },
                ReadKey {
                    key: OTHER,
                    have: v,
                },
            ])
            .unwrap();
        assert_eq!(
            Some(&got[0])
                .filter(|x| x.is_present())
                .map(|x| (x.version, x.value.as_str())),
            Some((v, "")),
            "{name}"
        );
        assert_eq!(
            Some(&got[1])
                .filter(|x| x.is_present())
                .map(|x| (x.version, x.value.as_str())),
            Some((v, "the record")),
            "{name}"
        );
        assert!(!got[2].is_present(), "{name}");
    });
}

#[test]
fn liveness_follows_the_host_clock() {
    each(|name, s, clock| {
        s.write(&[insert(KEY, "short", 1_000)]).unwrap();
        clock.advance(999);
        assert!(get(s, KEY).is_some(), "{name}: live until its ttl");
        assert_eq!(due(s, u64::MAX, 64), vec![KEY.to_owned()], "{name}");
        clock.advance(1);
        assert_eq!(get(s, KEY), None, "{name}: dead at its ttl");
        assert_eq!(due(s, u64::MAX, 64), Vec::<String>::new(), "{name}");
        assert_eq!(
            s.write(&[swap(KEY, 1, Some("x"))]).unwrap(),
            Vec::<u64>::new(),
            "{name}: a dead key has no version"
        );
        assert_eq!(
            s.write(&[insert(KEY, "again", 1_000)]).unwrap().len(),
            1,
            "{name}: a dead key is absent"
        );
    });
}

/// Every key `list_due` lists by `due_by`, page after page of at most `limit`, checking that
/// each page keeps to the limit and each cursor moves on.
fn due(s: &dyn Storage, due_by: u64, limit: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let page = s.list_due(due_by, cursor.as_deref(), limit).unwrap();
        assert!(page.keys.len() <= limit as usize, "a page over its limit");
        out.extend(page.keys);
        match page.next {
            None => return out,
            Some(next) => {
                assert_ne!(Some(&next), cursor.as_ref(), "a cursor that does not move");
                cursor = Some(next);
            }
        }
    }
    panic!("list_due never finished")
}

fn key_of(tag: &str, i: usize) -> String {
    format!("mrtr-gate/v3/id/{tag}/{i}")
}

const TAG_A: &str = "0123456789abcdef0123456789abcdef";
const TAG_B: &str = "fedcba9876543210fedcba9876543210";

#[test]
fn an_empty_store_has_nothing_due() {
    each(|name, s, _| {
        let page = s.list_due(u64::MAX, None, 64).unwrap();
        assert!(page.keys.is_empty() && page.next.is_none(), "{name}");
        assert!(due(s, 0, 1).is_empty(), "{name}");
    });
}

#[test]
fn only_due_keys_are_listed_in_deadline_order() {
    each(|name, s, clock| {
        let now = clock.now_ms();
        // One server's keys (one tag: one shard on Redis), written out of deadline order.
        for (i, ttl) in [3_000u64, 1_000, 2_000, 10_000, 3_001].iter().enumerate() {
            s.write(&[insert(&key_of(TAG_A, i), "v", *ttl)]).unwrap();
        }
        s.write(&[insert("plain key", "v", 500)]).unwrap();
        assert_eq!(
            due(s, now + 3_000, 64)
                .into_iter()
                .filter(|k| k.contains(TAG_A))
                .collect::<Vec<_>>(),
            vec![key_of(TAG_A, 1), key_of(TAG_A, 2), key_of(TAG_A, 0)],
            "{name}: due by now + 3 s, earliest first"
        );
        let mut all = due(s, now + 3_000, 64);
        all.sort();
        let mut want = vec![
            key_of(TAG_A, 0),
            key_of(TAG_A, 1),
            key_of(TAG_A, 2),
            "plain key".to_owned(),
        ];
        want.sort();
        assert_eq!(all, want, "{name}: every shard, the deadline inclusive");
        assert_eq!(
            due(s, now + 999, 64),
            vec!["plain key".to_owned()],
            "{name}"
        );
        assert_eq!(
            due(s, now, 64),
            Vec::<String>::new(),
            "{name}: nothing due yet"
        );
        assert_eq!(due(s, u64::MAX, 64).len(), 6, "{name}");
    });
}

#[test]
fn paging_visits_every_due_key_exactly_once_at_any_limit() {
    each(|name, s, clock| {
        let now = clock.now_ms();
        let mut want = Vec::new();
        for (t, tag) in [TAG_A, TAG_B, "_x"].iter().enumerate() {
            for i in 0..12 {
                let key = if *tag == "_x" {
                    format!("other/{i}")
                } else {
                    key_of(tag, i)
                };
                // Deadlines shared by several keys, and some keys not due.
                let ttl = 1_000 + (i as u64 % 4) * 1_000 + t as u64;
                s.write(&[insert(&key, "v", ttl)]).unwrap();
                if ttl <= 3_500 {
                    want.push(key);
                }
            }
        }
        want.sort();
        for limit in [1, 2, 3, 5, 64] {
            let mut got = due(s, now + 3_500, limit);
            got.sort();
            assert_eq!(got, want, "{name}: limit {limit}");
        }
    });
}

#[test]
fn deleted_keys_leave_the_index_and_rewritten_keys_move() {
    each(|name, s, clock| {
        let now = clock.now_ms();
        let (a, b, c) = (key_of(TAG_A, 1), key_of(TAG_A, 2), key_of(TAG_A, 3));
        let va = s.write(&[insert(&a, "a", 1_000)]).unwrap()[0];
        let vb = s.write(&[insert(&b, "b", 1_000)]).unwrap()[0];
        let vc = s.write(&[insert(&c, "c", 60_000)]).unwrap()[0];
        assert_eq!(
            due(s, now + 1_000, 64),
            vec![a.clone(), b.clone()],
            "{name}"
        );
        s.write(&[swap(&a, va, None)]).unwrap();
        // b lives longer now, c less long.
        s.write(&[Write {
            ttl_ms: 60_000,
            ..swap(&b, vb, Some("b2"))
        }])
        .unwrap();
        s.write(&[Write {
            ttl_ms: 500,
            ..swap(&c, vc, Some("c2"))
        }])
        .unwrap();
        assert_eq!(due(s, now + 1_000, 64), vec![c.clone()], "{name}");
        assert_eq!(due(s, now + 60_000, 64), vec![c, b], "{name}");
    });
}

#[test]
fn keys_past_their_ttl_are_not_due_they_are_gone() {
    each(|name, s, clock| {
        s.write(&[
            insert(&key_of(TAG_A, 1), "v", 1_000),
            insert(&key_of(TAG_A, 2), "v", 5_000),
        ])
        .unwrap();
        clock.advance(1_000);
        assert_eq!(due(s, u64::MAX, 1), vec![key_of(TAG_A, 2)], "{name}");
        clock.advance(4_000);
        assert!(due(s, u64::MAX, 1).is_empty(), "{name}");
    });
}

#[test]
fn a_cursor_the_store_did_not_make_or_a_zero_limit_is_an_error() {
    each(|name, s, _| {
        s.write(&[
            insert(&key_of(TAG_A, 1), "v", 1_000),
            insert(&key_of(TAG_B, 1), "v", 1_000),
        ])
        .unwrap();
        for bad in ["", "garbage", "x:y z", "\u{0}", "-1 -1 "] {
            assert!(
                s.list_due(u64::MAX, Some(bad), 64).is_err(),
                "{name}: {bad:?}"
            );
        }
        assert!(s.list_due(u64::MAX, None, 0).is_err(), "{name}: limit 0");
        // The store still answers afterwards.
        assert_eq!(due(s, u64::MAX, 1).len(), 2, "{name}");
    });
}

#[test]
fn values_are_opaque() {
    each(|name, s, _| {
        let big = "x".repeat(1 << 20);
        for (i, value) in [
            "",
            "ünïcödé 🦀",
            "{\"a\":1}\n\r\u{0}",
            "%s %d \\ ' \"",
            big.as_str(),
        ]
        .iter()
        .enumerate()
        {
            let key = format!("mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/{i}");
            s.write(&[insert(&key, value, 60_000)]).unwrap();
            assert_eq!(
                get(s, &key).map(|x| x.1).as_deref(),
                Some(*value),
                "{name}: value {i}"
            );
        }
    });
}

#[test]
fn two_connections_racing_on_one_key_apply_exactly_one_swap_per_version() {
    // Two clients of one namespace (as two processes would be), each trying to move the
    // key from the version both read: exactly one wins every round.
    let Ok(url) = std::env::var("MRTR_GATE_REDIS_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "MRTR_GATE_REDIS_URL is not set"
        );
        return;
    };
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(ManualClock::new(1_700_000_000_000));
    let ns = format!("race-{}", std::process::id());
    let a = Arc::new(RedisStorage::connect(&url, &ns, clock.clone()).unwrap());
    let b = Arc::new(RedisStorage::connect(&url, &ns, clock).unwrap());
    let mut v = a.write(&[insert(KEY, "0", 600_000)]).unwrap()[0];
    for round in 0..200 {
        let wins: Vec<bool> = [a.clone(), b.clone()]
            .into_iter()
            .enumerate()
            .map(|(who, s)| {
                std::thread::spawn(move || {
                    s.write(&[swap(KEY, v, Some(if who == 0 { "a" } else { "b" }))])
                        .unwrap()
                        .len()
                        == 1
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert_eq!(
            wins.iter().filter(|w| **w).count(),
            1,
            "round {round}: {wins:?}"
        );
        v = get(a.as_ref(), KEY).unwrap().0;
    }
}

#[test]
fn a_store_that_is_gone_is_a_host_error_not_a_verdict() {
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(ManualClock::new(1_700_000_000_000));
    // Nothing listens on port 1.
    assert!(RedisStorage::connect("redis://127.0.0.1:1/", "gone", clock.clone()).is_err());
    assert!(RedisStorage::connect("not a url", "gone", clock.clone()).is_err());
    assert!(RedisStorage::connect("redis://127.0.0.1:1/", "bad{ns}", clock).is_err());
}
