//! `mrtr-gate proxy --redis URL`: two stdio proxies of one server command, each the server
//! entry of its own official Python SDK client (automatic MRTR mode), keep their rounds and
//! one trail on one Redis. Both clients' rounds complete; the shared trail reconciles clean
//! (`mrtr-gate reconcile redis:<trail>`), every round consented as the client's.
//!
//! Runs on one redis-server and on a Redis Cluster (`eval "$(./scripts/redis start)"` and
//! `eval "$(./scripts/redis cluster start)"` set MRTR_GATE_REDIS_URL and
//! MRTR_GATE_REDIS_CLUSTER_URL; the test command starts both). Without one the test says so
//! and skips it, except on CI.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::process::Command;
use support::{Proxy, bin, python_client, python_server};

fn deployments() -> Vec<String> {
    ["MRTR_GATE_REDIS_URL", "MRTR_GATE_REDIS_CLUSTER_URL"]
        .into_iter()
        .filter_map(|var| match std::env::var(var) {
            Ok(url) => Some(url),
            Err(_) if std::env::var_os("CI").is_some() => panic!("{var} is not set"),
            Err(_) => {
                eprintln!("{var} is not set: the Redis proxy test skips it");
                None
            }
        })
        .collect()
}

#[test]
fn two_proxies_on_one_redis_share_one_trail_that_reconciles_clean() {
    for url in deployments() {
        share_one_trail(&url);
    }
}

fn share_one_trail(url: &str) {
    let url = url.to_owned();
    let namespace = format!("proxy-test-{}", std::process::id());
    let trail = "proxies";
    let redis = ["--redis", &url, "--namespace", &namespace, "--trail", trail];
    let calls =
        json!([["book_flight", {"origin": "OSL", "destination": "SFO"}], ["continue_job", {}]]);
    let (a, b) = (Proxy::new("redis-a"), Proxy::new("redis-b"));
    let first = python_client(&calls, &a.argv_on(&redis, &[], &python_server()));
    // One key file for every replica: the rounds each stores are authenticated under it.
    std::fs::copy(&a.keys, &b.keys).unwrap();
    let second = python_client(&calls, &b.argv_on(&redis, &[], &python_server()));
    for report in [&first, &second] {
        for call in &report.calls {
            assert_eq!(call["ok"], true, "{call}\n{}", report.stderr);
        }
    }
    let out = Command::new(bin())
        .args([
            "reconcile",
            &format!("redis:{trail}"),
            "--redis",
            &url,
            "--namespace",
            &namespace,
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["clean"], true, "{report}");
    assert!(out.status.success());
    assert_eq!(report["bindings"], 4, "{report}");
    assert_eq!(report["open"], json!([]), "{report}");
}
