//! The `storage` contract (guest/core/src/host.rs, wit/gate.wit), one suite run against every
//! store a gate can run over: the in-memory store, Redis (a real redis-server) and a Redis
//! Cluster (3 masters, 3 replicas; the test command starts both and sets MRTR_GATE_REDIS_URL
//! and MRTR_GATE_REDIS_CLUSTER_URL). All must pass it identically: the cases
//! of tests/storage/contract.json, which the Python and Node packages' stores are held to as
//! well (liveness by the host's clock, compare-and-swap batches that stop at the first loser,
//! versions never reused by a key, the reader's version elided, opaque values, and
//! `list-due`: only what is due, by deadline, every due key exactly once over the pages of a
//! listing); then what only a Rust store can be asked (a mebibyte value, two connections
//! racing, a store that is gone).

#![cfg(test)]

use mrtr_gate_host::core::host::{Clock, ReadKey, Storage, Write};
use mrtr_gate_host::reference_hosts::{ManualClock, MemoryStorage};
use mrtr_gate_redis::RedisStorage;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
mod support;

const KEY: &str = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/1";

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
    for (name, url) in support::deployments() {
        let ns = format!(
            "contract-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        out.push((
            name,
            Box::new(RedisStorage::connect(&url, &ns, shared.clone()).unwrap()),
        ));
    }
    out
}

fn each(test: impl Fn(&str, &dyn Storage, &ManualClock)) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    for (name, store) in stores(&clock) {
        test(name, store.as_ref(), &clock);
    }
}

/// The shared cases, run against every store.
#[test]
fn every_store_keeps_the_shared_contract() {
    let vectors: Value =
        serde_json::from_str(include_str!("../../../tests/storage/contract.json")).unwrap();
    let t0 = vectors["t0_ms"].as_u64().unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 14, "the shared cases");
    for case in cases {
        let clock = Arc::new(ManualClock::new(t0));
        for (store, s) in stores(&clock) {
            let name = format!("{store}: {}", case["name"].as_str().unwrap());
            run_case(
                &name,
                s.as_ref(),
                &clock,
                t0,
                case["steps"].as_array().unwrap(),
            );
        }
    }
}

/// A version named in a case: `0`, `NAME` or `NAME+N`.
fn version(bound: &HashMap<String, u64>, v: &Value) -> u64 {
    if let Some(n) = v.as_u64() {
        return n;
    }
    let text = v.as_str().unwrap();
    let (name, plus) = text.split_once('+').unwrap_or((text, "0"));
    bound[name] + plus.parse::<u64>().unwrap()
}

fn run_case(name: &str, s: &dyn Storage, clock: &ManualClock, t0: u64, steps: &[Value]) {
    let mut bound: HashMap<String, u64> = HashMap::new();
    // The versions each key has had (0 never is one).
    let mut seen: HashSet<(String, u64)> = HashSet::new();
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{name}, step {i}: {step}");
        if let Some(writes) = step["write"].as_array() {
            let writes: Vec<Write<'_>> = writes
                .iter()
                .map(|w| Write {
                    key: w["key"].as_str().unwrap(),
                    expected: version(&bound, &w["expected"]),
                    value: w["value"].as_str(),
                    ttl_ms: w["ttl_ms"].as_u64().unwrap(),
                })
                .collect();
            let got = s.write(&writes).unwrap();
            let want = step["versions"].as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{at}: {got:?}");
            for ((v, w), write) in got.iter().zip(want).zip(&writes) {
                match w.as_str().and_then(|w| w.strip_prefix("new:")) {
                    Some(fresh) => {
                        assert!(
                            *v != 0 && seen.insert((write.key.to_owned(), *v)),
                            "{at}: version {v} is 0 or came back"
                        );
                        bound.insert(fresh.to_owned(), *v);
                    }
                    None => assert_eq!(Some(*v), w.as_u64(), "{at}"),
                }
            }
        } else if let Some(reads) = step["read"].as_array() {
            let keys: Vec<ReadKey<'_>> = reads
                .iter()
                .map(|r| ReadKey {
                    key: r["key"].as_str().unwrap(),
                    have: version(&bound, &r["have"]),
                })
                .collect();
            let got: Vec<Option<(u64, String)>> = s
                .read(&keys)
                .unwrap()
                .into_iter()
                .map(|e| e.present().map(|v| (v.version, v.value)))
                .collect();
            let want: Vec<Option<(u64, String)>> = step["expect"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (!e.is_null()).then(|| {
                        (
                            version(&bound, &e["version"]),
                            e["value"].as_str().unwrap().to_owned(),
                        )
                    })
                })
                .collect();
            assert_eq!(got, want, "{at}");
        } else if let Some(ms) = step["advance_ms"].as_u64() {
            clock.advance(ms);
        } else if step.get("due").is_some() {
            let d = &step["due"];
            let by = d["by"].as_u64().map_or(u64::MAX, |by| t0 + by);
            let mut got = due(s, by, u32::try_from(d["limit"].as_u64().unwrap()).unwrap());
            if let Some(only) = d["only"].as_str() {
                got.retain(|k| k.starts_with(only));
            }
            let mut want: Vec<String> = serde_json::from_value(step["expect"].clone()).unwrap();
            if step["order"] == "any" {
                got.sort();
                want.sort();
            }
            assert_eq!(got, want, "{at}");
        } else if step.get("due_error").is_some() {
            let d = &step["due_error"];
            let limit = u32::try_from(d["limit"].as_u64().unwrap()).unwrap();
            assert!(
                s.list_due(u64::MAX, d["cursor"].as_str(), limit).is_err(),
                "{at}"
            );
        } else {
            panic!("{at}: an unknown step");
        }
    }
}

#[test]
fn a_mebibyte_value_is_opaque_too() {
    each(|name, s, _| {
        let big = "x".repeat(1 << 20);
        s.write(&[insert(KEY, &big, 60_000)]).unwrap();
        assert_eq!(get(s, KEY).map(|x| x.1), Some(big), "{name}");
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

#[test]
fn two_connections_racing_on_one_key_apply_exactly_one_swap_per_version() {
    // Two clients of one namespace (as two processes would be), each trying to move the
    // key from the version both read: exactly one wins every round.
    for (_, url) in support::deployments() {
        racing(&url);
    }
}

fn racing(url: &str) {
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(ManualClock::new(1_700_000_000_000));
    let ns = format!("race-{}", std::process::id());
    let a = Arc::new(RedisStorage::connect(url, &ns, clock.clone()).unwrap());
    let b = Arc::new(RedisStorage::connect(url, &ns, clock).unwrap());
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
    assert!(RedisStorage::connect("redis://127.0.0.1:1/", "bad{ns}", clock.clone()).is_err());
    for cluster in [
        "redis-cluster://127.0.0.1:1/",
        "redis-cluster://127.0.0.1:1,127.0.0.1:2/",
        "redis-cluster:///",
        "redis-cluster://127.0.0.1:1/db?x",
        "redis-cluster://a@b@,/",
    ] {
        assert!(
            RedisStorage::connect(cluster, "gone", clock.clone()).is_err(),
            "{cluster}"
        );
    }
}

#[test]
fn a_write_fewer_replicas_hold_than_the_store_waits_for_is_an_error() {
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(ManualClock::new(1_700_000_000_000));
    for (name, url) in support::deployments() {
        // One server has no replica; each Cluster master has one, never two.
        let wanted = if name == "redis" { 1 } else { 2 };
        let ns = format!("unheld-{}", std::process::id());
        let options = mrtr_gate_redis::Options::for_url(&url).replicas(wanted);
        let store = RedisStorage::connect_with(&url, &ns, clock.clone(), options).unwrap();
        let err = store.write(&[insert(KEY, "x", 60_000)]).unwrap_err();
        assert!(err.message.contains("replicas"), "{name}: {err:?}");
        // And as many as there are is a write.
        let held = mrtr_gate_redis::Options::for_url(&url).replicas(wanted - 1);
        let store = RedisStorage::connect_with(&url, &ns, clock.clone(), held).unwrap();
        assert_eq!(
            store
                .write(&[swap(KEY, get(&store, KEY).map_or(0, |v| v.0), Some("y"))])
                .unwrap()
                .len(),
            1,
            "{name}"
        );
    }
}
