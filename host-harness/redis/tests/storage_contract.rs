//! The `storage` contract (guest/core/src/host.rs, wit/gate.wit), one suite run against every
//! store a gate can run over: the in-memory store and Redis (a real redis-server; the test
//! command starts one and sets MRTR_GATE_REDIS_URL). Both must pass it identically: liveness
//! by the host's clock, compare-and-swap batches that stop at the first loser, versions never
//! reused by a key, the reader's version elided, opaque values.

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
        expected: None,
        value: Some(value),
        ttl_ms,
    }
}

fn swap<'a>(key: &'a str, expected: u64, value: Option<&'a str>) -> Write<'a> {
    Write {
        key,
        expected: Some(expected),
        value,
        ttl_ms: 60_000,
    }
}

fn get(s: &dyn Storage, key: &str) -> Option<(u64, String)> {
    s.read(&[ReadKey::from(key)])
        .unwrap()
        .pop()
        .unwrap()
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
                ReadKey {
                    key: KEY,
                    have: Some(v),
                },
                ReadKey {
                    key: KEY,
                    have: Some(v + 1000),
                },
                ReadKey {
                    key: OTHER,
                    have: Some(v),
                },
            ])
            .unwrap();
        assert_eq!(
            got[0].as_ref().map(|x| (x.version, x.value.as_str())),
            Some((v, "")),
            "{name}"
        );
        assert_eq!(
            got[1].as_ref().map(|x| (x.version, x.value.as_str())),
            Some((v, "the record")),
            "{name}"
        );
        assert!(got[2].is_none(), "{name}");
    });
}

#[test]
fn liveness_follows_the_host_clock() {
    each(|name, s, clock| {
        s.write(&[insert(KEY, "short", 1_000)]).unwrap();
        clock.advance(999);
        assert!(get(s, KEY).is_some(), "{name}: live until its ttl");
        assert_eq!(
            s.list_keys("mrtr-gate/").unwrap(),
            vec![KEY.to_owned()],
            "{name}"
        );
        clock.advance(1);
        assert_eq!(get(s, KEY), None, "{name}: dead at its ttl");
        assert_eq!(
            s.list_keys("mrtr-gate/").unwrap(),
            Vec::<String>::new(),
            "{name}"
        );
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

#[test]
fn keys_are_listed_by_prefix() {
    each(|name, s, _| {
        s.write(&[
            insert(KEY, "1", 60_000),
            insert(OTHER, "2", 60_000),
            insert(ELSEWHERE, "3", 60_000),
            insert("plain*key?[x]", "4", 60_000),
        ])
        .unwrap();
        let mut all = s.list_keys("mrtr-gate/v3/id/").unwrap();
        all.sort();
        assert_eq!(
            all,
            vec![KEY.to_owned(), OTHER.to_owned(), ELSEWHERE.to_owned()]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(
            s.list_keys("mrtr-gate/v3/id/fedcba").unwrap(),
            vec![ELSEWHERE.to_owned()],
            "{name}"
        );
        assert_eq!(
            s.list_keys("plain*key?[").unwrap(),
            vec!["plain*key?[x]".to_owned()],
            "{name}: glob characters are literal"
        );
        assert_eq!(s.list_keys("plain*").unwrap().len(), 1, "{name}");
        assert_eq!(
            s.list_keys("nothing").unwrap(),
            Vec::<String>::new(),
            "{name}"
        );
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
