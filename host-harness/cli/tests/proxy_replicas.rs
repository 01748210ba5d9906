//! Two `mrtr-gate proxy --listen 127.0.0.1:0 --upstream URL --redis URL` replicas on one
//! Redis (one namespace, one trail, one key file) in front of one upstream that writes down
//! every message it receives (tests/peers/recording_http_server.py). Raw JSON-RPC over HTTP
//! written by the test, as a load balancer would spread it: each call at one replica, its
//! retry at the other, then every retry replayed at both; rounds retried at both at once.
//! Then one replica is killed (SIGKILL) with a round delivered and not yet retried, with a
//! round never to be retried, and with a retry in flight upstream; the retries go to the
//! survivor.
//!
//! Asserted: the upstream receives at most one retry per round (exactly one for each round
//! retried), a replay at either replica is refused with the gate's code and never goes
//! upstream, and `mrtr-gate reconcile` finds the shared trail clean, the killed replica's
//! unfinished bindings listed as `open` until the survivor's sweep ends them `expired` after
//! their lifetime (docs/proxy.md "Replicas on Redis").
//!
//! Last, the same replicas on a Redis Cluster of the test's own while its masters fail: killed,
//! moved by `CLUSTER FAILOVER`, paused past the node timeout; single use holds through each.
//!
//! Needs a Redis (`eval "$(./scripts/redis start)"` sets MRTR_GATE_REDIS_URL): without it
//! the test says so and passes, except on CI. Hang guards only: nothing here depends on how
//! fast the machine is; the retry in flight is held by the upstream until the test lets go.

#![cfg(test)]
#![cfg(unix)]

mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::raw::recording_upstream;
use support::{Running, bin, post, proxy_listening, root};

/// Far beyond any answer on a loaded machine: only a hang runs into it.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Calls spread over the two replicas before one is killed.
const SPREAD_CALLS: usize = 12;

/// Calls (each a form round and a state-only round) spread over two replicas in front of the
/// Python SDK's server.
const SDK_CALLS: usize = 6;

/// Rounds retried at both replicas at once.
const RACES: usize = 8;

fn redis_url() -> Option<String> {
    match std::env::var("MRTR_GATE_REDIS_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var_os("CI").is_some() => panic!("MRTR_GATE_REDIS_URL is not set"),
        Err(_) => {
            eprintln!("MRTR_GATE_REDIS_URL is not set: the replica test is skipped");
            None
        }
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < HANG_GUARD, "{what}: never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One replica: `mrtr-gate proxy` on Redis in front of `upstream`, gating on three engines;
/// the URL it listens on.
fn replica(dir: &Path, redis: &[&str], upstream: &str) -> (Running, String) {
    let mut command = Command::new(bin());
    command
        .arg("proxy")
        .args(redis)
        // One key file for every replica: the rounds each stores are authenticated under it,
        // and the principal is pseudonymised alike.
        .arg("--host-keys")
        .arg(dir.join("host-keys.json"))
        .args(["--user", "alice", "--tenant", "acme"])
        // More engines than this machine's cores: a round opened through one engine is
        // retried, replayed and raced through the others of its replica and the other's.
        .args(["--engines", "3"]);
    proxy_listening(command, upstream)
}

fn call(id: u64, name: &str, n: usize) -> Value {
    tool_call(id, name, json!({"n": n}))
}

fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}})
}

/// The retry of `round` (the answer to `request`) under a new id, answering its seat form.
fn retry(request: &Value, round: &Value, id: u64, seat: &str) -> Value {
    let seat = json!({"seat": {"action": "accept", "content": {"seat": seat}}});
    retry_with(request, round, id, Some(seat))
}

/// The same with these `inputResponses` (none: a state-only round's retry, as the Python
/// SDK client sends it), and the round's state when it has one.
fn retry_with(request: &Value, round: &Value, id: u64, responses: Option<Value>) -> Value {
    let mut r = request.clone();
    r["id"] = json!(id);
    if let Some(responses) = responses {
        r["params"]["inputResponses"] = responses;
    }
    if let Some(state) = round["result"].get("requestState") {
        r["params"]["requestState"] = state.clone();
    }
    r
}

fn ask(url: &str, message: &Value) -> Value {
    let answer = post(url, message).unwrap();
    assert_eq!(answer["id"], message["id"], "{answer}");
    answer
}

/// A round: `input_required` with a state, under the client's id.
fn assert_round(answer: &Value) -> String {
    assert_eq!(answer["result"]["resultType"], "input_required", "{answer}");
    answer["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn assert_booked(answer: &Value, seat: &str) {
    assert_eq!(
        answer["result"]["content"][0]["text"],
        format!("booked {seat}"),
        "{answer}"
    );
}

/// A retry of a used round: refused by the gate, whichever way it lost (the round already
/// consumed and out of the index: `inactive_mrtr_round`; found mid-consume by another
/// replica: `state_already_used`).
fn assert_refused_as_used(answer: &Value) {
    let code = &answer["error"]["data"]["mrtr_gate"]["code"];
    let expected = match code.as_str() {
        Some("inactive_mrtr_round") => -31001,
        Some("state_already_used") => -31002,
        _ => panic!("not refused as a used round: {answer}"),
    };
    assert_eq!(answer["error"]["code"], expected, "{answer}");
    assert_eq!(answer["error"]["data"]["mrtr_gate"]["audited"], true);
    assert!(answer.get("result").is_none(), "{answer}");
}

/// Every message the upstream received, in order.
fn received(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("received.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// How many retries (calls carrying `inputResponses`) the upstream received, per state.
fn retries_per_state(dir: &Path) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in received(dir) {
        if m["params"].get("inputResponses").is_some() {
            let state = m["params"]["requestState"].as_str().unwrap().to_owned();
            *counts.entry(state).or_insert(0) += 1;
        }
    }
    counts
}

fn reconcile(url: &str, namespace: &str, trail: &str) -> (Value, bool) {
    let out = Command::new(bin())
        .args(["reconcile", &format!("redis:{trail}")])
        .args(["--redis", url, "--namespace", namespace])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // No violation: exit 0 (clean) or 3 (bindings open, as a killed replica leaves them).
    (report, matches!(out.status.code(), Some(0 | 3)))
}

/// The upstream and two replicas of it on one Redis namespace and trail.
struct Cluster {
    dir: PathBuf,
    redis_url: String,
    namespace: String,
    trail: &'static str,
    // Declared before the upstream: killed first, when the cluster is dropped.
    a: Running,
    a_url: String,
    _b: Running,
    b_url: String,
    _upstream: Running,
}

impl Cluster {
    fn start(
        name: &str,
        redis_url: String,
        upstream: impl FnOnce(&Path) -> (Running, String),
    ) -> Self {
        Self::start_with(name, redis_url, upstream, &[])
    }

    /// [`Cluster::start`], every replica given `flags` too.
    fn start_with(
        name: &str,
        redis_url: String,
        upstream: impl FnOnce(&Path) -> (Running, String),
        flags: &[&str],
    ) -> Self {
        let tag = format!("{name}-{}", std::process::id());
        let dir = std::env::temp_dir().join(format!("mrtr-gate-replicas-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let namespace = format!("replicas-{tag}");
        let trail = "replicas";
        let mut redis = vec![
            "--redis",
            redis_url.as_str(),
            "--namespace",
            namespace.as_str(),
            "--trail",
            trail,
        ];
        redis.extend_from_slice(flags);
        let (upstream, upstream_url) = upstream(&dir);
        let (a, a_url) = replica(&dir, &redis, &upstream_url);
        let (b, b_url) = replica(&dir, &redis, &upstream_url);
        Self {
            dir,
            redis_url,
            namespace,
            trail,
            a,
            a_url,
            _b: b,
            b_url,
            _upstream: upstream,
        }
    }

    /// SIGKILL replica A.
    fn kill_a(&mut self) {
        self.a.0.kill().unwrap();
        self.a.0.wait().unwrap();
    }

    fn reconcile(&self) -> (Value, bool) {
        reconcile(&self.redis_url, &self.namespace, self.trail)
    }
}

impl Drop for Cluster {
    /// A passing test leaves nothing behind; a failing one leaves its folder to look at.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
fn two_replicas_on_one_redis_answer_each_round_once_even_when_one_is_killed_mid_round() {
    let Some(redis_url) = redis_url() else { return };
    let mut cluster = Cluster::start("kill", redis_url, recording_upstream);
    let (a_url, b_url, dir) = (
        cluster.a_url.clone(),
        cluster.b_url.clone(),
        cluster.dir.clone(),
    );
    let mut ids = 1..;
    let mut next_id = || ids.next().unwrap();

    // Spread: each call at one replica, its retry at the other, every retry replayed at both.
    let mut retried = Vec::new();
    for n in 0..SPREAD_CALLS {
        let (here, there) = if n % 2 == 0 {
            (&a_url, &b_url)
        } else {
            (&b_url, &a_url)
        };
        let request = call(next_id(), "book", n);
        let round = ask(here, &request);
        let state = assert_round(&round);
        let seat = format!("{n}A");
        assert_booked(
            &ask(there, &retry(&request, &round, next_id(), &seat)),
            &seat,
        );
        for replay_at in [here, there] {
            assert_refused_as_used(&ask(replay_at, &retry(&request, &round, next_id(), "9Z")));
        }
        retried.push(state);
    }

    // Race: the same round retried at both replicas at once (a client that gave up on one and
    // tried the other, or a replayed request): one retry is built and answered, the other is
    // refused, whichever replica wins.
    for n in 0..RACES {
        let request = call(next_id(), "book", 1000 + n);
        let round = ask(if n % 2 == 0 { &a_url } else { &b_url }, &request);
        retried.push(assert_round(&round));
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = [&a_url, &b_url]
            .into_iter()
            .enumerate()
            .map(|(i, url)| {
                let (url, start) = (url.clone(), start.clone());
                let message = retry(&request, &round, next_id(), &format!("{n}R{i}"));
                std::thread::spawn(move || {
                    start.wait();
                    ask(&url, &message)
                })
            })
            .collect();
        let answers: Vec<Value> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let won: Vec<&Value> = answers
            .iter()
            .filter(|a| a.get("result").is_some())
            .collect();
        assert_eq!(won.len(), 1, "{answers:?}");
        for answer in answers.iter().filter(|a| a.get("result").is_none()) {
            assert_refused_as_used(answer);
        }
    }

    // Replica A delivers three rounds: one the survivor will finish, one never retried, and
    // one whose retry A sends upstream, where it is held while A is killed.
    let to_finish = call(next_id(), "book", 100);
    let to_finish_round = ask(&a_url, &to_finish);
    retried.push(assert_round(&to_finish_round));
    let abandoned = call(next_id(), "book", 101);
    let abandoned_state = assert_round(&ask(&a_url, &abandoned));
    let held = call(next_id(), "hold", 102);
    let held_round = ask(&a_url, &held);
    let held_state = assert_round(&held_round);
    retried.push(held_state.clone());
    let held_retry = retry(&held, &held_round, next_id(), "7C");
    let in_flight = {
        let (url, message) = (a_url.clone(), held_retry.clone());
        std::thread::spawn(move || post(&url, &message))
    };
    wait_until("the held retry reaches the upstream", || {
        retries_per_state(&dir).contains_key(&held_state)
    });
    cluster.kill_a();
    // The client of the killed replica gets no answer, only a broken connection.
    assert!(in_flight.join().unwrap().is_err());
    std::fs::write(dir.join("release"), b"").unwrap();

    // The survivor finishes the round A delivered, once.
    let seat = "1B";
    let finish = retry(&to_finish, &to_finish_round, next_id(), seat);
    assert_booked(&ask(&b_url, &finish), seat);
    assert_refused_as_used(&ask(
        &b_url,
        &retry(&to_finish, &to_finish_round, next_id(), seat),
    ));
    // The round whose retry A sent upstream is used: the client's retry of it at the survivor
    // (new id, as after a lost connection) is refused and never goes upstream.
    let mut again = held_retry.clone();
    again["id"] = json!(next_id());
    assert_refused_as_used(&ask(&b_url, &again));

    // At most one retry per round reached the upstream: exactly one for every round retried,
    // none for the round nobody retried.
    let counts = retries_per_state(&dir);
    for state in &retried {
        assert_eq!(counts.get(state), Some(&1), "{state}: {counts:?}");
    }
    assert_eq!(counts.get(&abandoned_state), None, "{counts:?}");
    assert_eq!(counts.len(), retried.len(), "{counts:?}");

    // The shared trail reconciles clean. The killed replica's two unfinished bindings (the
    // round never retried, and the one whose retry was in flight: submitted, never answered)
    // are open: received, no terminal, until the survivor's sweep ends them `expired` once
    // their lifetime has passed (the opt-in test below).
    let (report, ok) = cluster.reconcile();
    assert!(ok, "{report}");
    assert_eq!(report["consistent"], true, "{report}");
    assert_eq!(report["double_use"], json!([]), "{report}");
    assert_eq!(report["lifecycle"], json!([]), "{report}");
    assert_eq!(report["expired"], json!([]), "{report}");
    assert_eq!(report["bindings"], SPREAD_CALLS + RACES + 3, "{report}");
    let open = report["open"].as_array().unwrap();
    let submitted: Vec<&Value> = open.iter().map(|b| &b["submitted"]).collect();
    assert_eq!(submitted, [&json!(0), &json!(1)], "{report}");
    // Both were A's: their ids carry the same replica prefix (`mg:<nonce>:`).
    let prefix = |b: &Value| {
        let id = b["request_id"].as_str().unwrap();
        id[..id.rfind(':').unwrap()].to_owned()
    };
    assert_eq!(prefix(&open[0]), prefix(&open[1]), "{report}");
}

/// The same spread in front of a real server, the Python SDK's: a form round and a
/// state-only round per call, each delivered by one replica and retried at the other,
/// complete; every replay at either replica is refused; the trail reconciles clean with
/// nothing open.
#[test]
fn calls_spread_over_two_replicas_complete_at_the_python_sdk_server() {
    let Some(redis_url) = redis_url() else { return };
    let cluster = Cluster::start("sdk", redis_url, |_| support::python_server_http());
    let urls = [cluster.a_url.clone(), cluster.b_url.clone()];
    let mut ids = 1..;
    let mut next_id = || ids.next().unwrap();
    let passenger = json!({"passenger": {"action": "accept",
        "content": {"full_name": "Ada Lovelace", "seat": "aisle"}}});
    for n in 0..SDK_CALLS {
        let (here, there) = (&urls[n % 2], &urls[1 - n % 2]);
        let destination = format!("D{n:02}");
        let request = tool_call(
            next_id(),
            "book_flight",
            json!({"origin": "OSL", "destination": destination}),
        );
        let round = ask(here, &request);
        assert_eq!(round["result"]["resultType"], "input_required", "{round}");
        let done = ask(
            there,
            &retry_with(&request, &round, next_id(), Some(passenger.clone())),
        );
        let text = done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.starts_with(&format!("booked OSL-{destination}: ")),
            "{done}"
        );
        for replay_at in [here, there] {
            let replay = retry_with(&request, &round, next_id(), Some(passenger.clone()));
            assert_refused_as_used(&ask(replay_at, &replay));
        }

        let request = tool_call(next_id(), "continue_job", json!({}));
        let round = ask(there, &request);
        // The SDK seals the state (`v1.` envelopes): the gate meets real opaque state.
        assert!(round["result"]["requestState"].is_string(), "{round}");
        let done = ask(here, &retry_with(&request, &round, next_id(), None));
        assert_eq!(
            done["result"]["content"][0]["text"], "job done after step-1",
            "{done}"
        );
        for replay_at in [here, there] {
            assert_refused_as_used(&ask(
                replay_at,
                &retry_with(&request, &round, next_id(), None),
            ));
        }
    }
    let (report, ok) = cluster.reconcile();
    assert!(ok, "{report}");
    assert_eq!(report["consistent"], true, "{report}");
    assert_eq!(report["bindings"], 2 * SDK_CALLS, "{report}");
    assert_eq!(report["open"], json!([]), "{report}");
    assert_eq!(report["expired"], json!([]), "{report}");
}

/// What becomes of the killed replica's open bindings: the survivor's sweep (over the whole
/// shared store, every quarter of a round's lifetime) ends them `expired` once their lifetime
/// (here `--round-trip-lifetime 4`) has passed, and the trail is then clean with nothing open.
#[test]
fn a_killed_replicas_open_bindings_end_expired_by_the_survivors_sweep() {
    let Some(redis_url) = redis_url() else { return };
    let mut cluster = Cluster::start_with(
        "expiry",
        redis_url,
        recording_upstream,
        &["--round-trip-lifetime", "4"],
    );
    let (a_url, b_url, dir) = (
        cluster.a_url.clone(),
        cluster.b_url.clone(),
        cluster.dir.clone(),
    );
    let abandoned = call(1, "book", 1);
    let abandoned_round = ask(&a_url, &abandoned);
    assert_round(&abandoned_round);
    let held = call(2, "hold", 2);
    let held_round = ask(&a_url, &held);
    let held_state = assert_round(&held_round);
    let in_flight = {
        let (url, message) = (a_url.clone(), retry(&held, &held_round, 3, "7C"));
        std::thread::spawn(move || post(&url, &message))
    };
    wait_until("the held retry reaches the upstream", || {
        retries_per_state(&dir).contains_key(&held_state)
    });
    cluster.kill_a();
    assert!(in_flight.join().unwrap().is_err());
    std::fs::write(dir.join("release"), b"").unwrap();

    // Lifetime, then at most one sweep period and the store's grace: the bound only guards
    // against a survivor that never sweeps.
    let started = Instant::now();
    let report = loop {
        let (report, ok) = cluster.reconcile();
        assert!(ok, "{report}");
        if report["open"] == json!([]) {
            break report;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15 * 60),
            "never swept: {report}"
        );
        std::thread::sleep(Duration::from_secs(5));
    };
    assert_eq!(report["consistent"], true, "{report}");
    assert_eq!(report["expired"].as_array().unwrap().len(), 2, "{report}");
    // Expired is used up: the round's retry at the survivor is refused and never goes upstream.
    assert_refused_as_used(&ask(&b_url, &retry(&abandoned, &abandoned_round, 4, "1A")));
    assert_eq!(retries_per_state(&dir).len(), 1);
}

/// A Redis Cluster of the test's own (`scripts/redis cluster start DIR`: 3 masters, 3
/// replicas), with a 3 s node timeout so that a master lost is failed over within seconds;
/// every node stopped when dropped.
struct OwnCluster {
    dir: PathBuf,
    url: String,
}

const NODE_TIMEOUT_MS: &str = "3000";

impl OwnCluster {
    fn start(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "mrtr-gate-own-cluster-{name}-{}",
            std::process::id()
        ));
        let out = Command::new(root().join("scripts/redis"))
            .args(["cluster", "start"])
            .arg(&dir)
            .env("MRTR_GATE_REDIS_NODE_TIMEOUT_MS", NODE_TIMEOUT_MS)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let url = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("MRTR_GATE_REDIS_CLUSTER_URL="))
            .unwrap()
            .to_owned();
        Self { dir, url }
    }

    fn ports(&self) -> Vec<u16> {
        let hosts = self.url.trim_start_matches("redis-cluster://");
        hosts
            .trim_end_matches('/')
            .split(',')
            .map(|h| h.rsplit_once(':').unwrap().1.parse().unwrap())
            .collect()
    }

    fn cli(port: u16, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `master`, `slave`, or "" for a node that does not answer.
    fn role(port: u16) -> String {
        Self::cli(port, &["role"])
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    }

    /// The master that holds keys matching `pattern`.
    fn master_holding(&self, pattern: &str) -> u16 {
        self.ports()
            .into_iter()
            .find(|p| {
                Self::role(*p) == "master"
                    && !Self::cli(*p, &["--scan", "--pattern", pattern])
                        .trim()
                        .is_empty()
            })
            .unwrap_or_else(|| panic!("no master holds {pattern}"))
    }

    /// The replica of `master` (`ROLE`: master, offset, then ip, port, offset per replica).
    fn replica_of(master: u16) -> u16 {
        let mut replica = None;
        wait_until("the master has its replica", || {
            replica = Self::cli(master, &["role"])
                .lines()
                .nth(3)
                .and_then(|p| p.trim().parse().ok());
            replica.is_some()
        });
        replica.unwrap()
    }

    fn signal(&self, port: u16, signal: &str) {
        let pid = std::fs::read_to_string(self.dir.join(format!("node-{port}.pid"))).unwrap();
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.trim().to_owned()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Moves the slot of the keys matching `pattern` from master `from` to master `to`, as
    /// `redis-cli --cluster reshard` moves a slot: importing and migrating marks, the keys
    /// `MIGRATE`d a few at a time, then the slot assigned to `to` on every master.
    fn migrate_slot_of(&self, pattern: &str, from: u16, to: u16) {
        let key = Self::cli(from, &["--scan", "--pattern", pattern]);
        let key = key.lines().next().unwrap().trim().to_owned();
        let slot = Self::cli(from, &["cluster", "keyslot", &key])
            .trim()
            .to_owned();
        let id = |p: u16| Self::cli(p, &["cluster", "myid"]).trim().to_owned();
        let (from_id, to_id) = (id(from), id(to));
        assert_eq!(
            Self::cli(to, &["cluster", "setslot", &slot, "importing", &from_id]).trim(),
            "OK"
        );
        assert_eq!(
            Self::cli(from, &["cluster", "setslot", &slot, "migrating", &to_id]).trim(),
            "OK"
        );
        loop {
            let keys = Self::cli(from, &["cluster", "getkeysinslot", &slot, "5"]);
            let keys: Vec<&str> = keys
                .lines()
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .collect();
            if keys.is_empty() {
                break;
            }
            let mut args = vec!["migrate", "127.0.0.1"];
            let port = to.to_string();
            args.extend([port.as_str(), "", "0", "5000", "keys"]);
            args.extend(keys);
            let out = Self::cli(from, &args);
            assert!(out.trim() == "OK" || out.trim() == "NOKEY", "{out}");
        }
        for p in self.ports() {
            if Self::role(p) == "master" {
                Self::cli(p, &["cluster", "setslot", &slot, "node", &to_id]);
            }
        }
    }

    fn restart(&self, port: u16) {
        let status = Command::new(root().join("scripts/redis"))
            .args(["cluster", "restart", &port.to_string()])
            .arg(&self.dir)
            .env("MRTR_GATE_REDIS_NODE_TIMEOUT_MS", NODE_TIMEOUT_MS)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        // A paused node takes no signal but CONT until it runs again.
        for port in self.ports() {
            if self.dir.join(format!("node-{port}.pid")).exists() {
                let _ = Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "kill -CONT $(cat {}/node-{port}.pid) 2>/dev/null",
                        self.dir.display()
                    ))
                    .status();
            }
        }
        let _ = Command::new(root().join("scripts/redis"))
            .args(["cluster", "stop"])
            .arg(&self.dir)
            .status();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One round a client ran: when it started, the call and the round it got (if it got one),
/// and how it ended: `Ok` booked, `Err` the denial's code (or `transport`).
struct Ran {
    started: Instant,
    request: Value,
    round: Option<Value>,
    end: Result<(), String>,
}

/// Clients running rounds through the two replicas until stopped: each call at one replica,
/// its retry at the other.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ran: std::sync::Arc<std::sync::Mutex<Vec<Ran>>>,
    clients: Vec<std::thread::JoinHandle<()>>,
}

const CLIENTS: u64 = 4;

fn code_of(answer: &Value) -> String {
    answer["error"]["data"]["mrtr_gate"]["code"]
        .as_str()
        .map_or_else(|| format!("other: {answer}"), str::to_owned)
}

impl Load {
    fn start(urls: [String; 2]) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let ran = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let ids = std::sync::Arc::new(AtomicU64::new(1));
        let clients = (0..CLIENTS)
            .map(|c| {
                let (stop, ran, ids, urls) = (stop.clone(), ran.clone(), ids.clone(), urls.clone());
                std::thread::spawn(move || {
                    let next = || ids.fetch_add(1, Ordering::Relaxed);
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let (here, there) = (&urls[(n % 2) as usize], &urls[1 - (n % 2) as usize]);
                        let started = Instant::now();
                        let request = call(next(), "book", (c * 1_000_000 + n) as usize);
                        let (round, end) = match post(here, &request) {
                            Err(e) => (None, Err(format!("transport: {e}"))),
                            Ok(a) if a["result"]["resultType"] == "input_required" => {
                                // The form takes at most 4 characters: the client, then
                                // the round (a seat of 5 is refused by the gate, rightly).
                                let seat = format!("{c}{:03}", n % 1000);
                                match post(there, &retry(&request, &a, next(), &seat)) {
                                    Err(e) => (Some(a), Err(format!("transport: {e}"))),
                                    Ok(done) if done.get("result").is_some() => {
                                        assert_booked(&done, &seat);
                                        (Some(a), Ok(()))
                                    }
                                    Ok(done) => (Some(a), Err(code_of(&done))),
                                }
                            }
                            Ok(a) => (None, Err(code_of(&a))),
                        };
                        let denied = end.is_err();
                        ran.lock().unwrap().push(Ran {
                            started,
                            request,
                            round,
                            end,
                        });
                        if denied {
                            // A denied client waits a little before its next call, as any
                            // client backs off a failing service.
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                })
            })
            .collect();
        Self { stop, ran, clients }
    }

    /// Waits until a round started after `since` is booked; returns how long after `since`
    /// it started, and the rounds started since then that were denied before it.
    fn resumed_after(&self, fault: &str, since: Instant) -> (Duration, Vec<String>) {
        let mut out = None;
        let began = Instant::now();
        wait_until("honest rounds resume after the fault", || {
            let ran = self.ran.lock().unwrap();
            assert!(
                began.elapsed() < HANG_GUARD - Duration::from_secs(1),
                "{fault}: no round booked since; the last ends: {:?}",
                ran.iter().rev().take(8).map(|r| &r.end).collect::<Vec<_>>()
            );
            let first = ran
                .iter()
                .filter(|r| r.started >= since && r.end.is_ok())
                .map(|r| r.started)
                .min();
            if let Some(first) = first {
                let denied = ran
                    .iter()
                    .filter(|r| r.started >= since && r.started < first)
                    .filter_map(|r| r.end.clone().err())
                    .collect();
                out = Some((first - since, denied));
            }
            out.is_some()
        });
        out.unwrap()
    }

    fn stop(self) -> Vec<Ran> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for c in self.clients {
            c.join().unwrap();
        }
        std::sync::Arc::try_unwrap(self.ran)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap()
    }
}

/// Single use through failovers of a real Redis Cluster (docs/redis.md, "Failover"): clients
/// run rounds through two proxy replicas on a Cluster of the test's own while the master that
/// holds the rounds is killed (and started again, to rejoin as a replica), while `CLUSTER
/// FAILOVER` moves the master that holds the trail, and while the rounds' master is paused
/// past the node timeout. After each, honest rounds resume; afterwards every round booked is
/// replayed at both replicas and refused, the upstream got at most one retry per round
/// (exactly one per round booked), every `submitted` line a booked round was confirmed with is
/// in the trail, and `reconcile` finds the trail clean. The rounds denied during each fault
/// and the time to resume are printed (docs/redis.md has a run's).
#[test]
fn single_use_holds_through_a_killed_a_moved_and_a_paused_cluster_master_and_a_migrated_slot() {
    // It runs a Cluster of its own, where the test command has started one (so Debian's
    // redis-server is there).
    if std::env::var_os("MRTR_GATE_REDIS_CLUSTER_URL").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "MRTR_GATE_REDIS_CLUSTER_URL is not set: the test command starts a Cluster"
        );
        eprintln!("no Redis Cluster here (scripts/redis cluster start): the test is skipped");
        return;
    }
    let own = OwnCluster::start("failover");
    let cluster = Cluster::start("failover", own.url.clone(), recording_upstream);
    let ns = cluster.namespace.clone();
    let load = Load::start([cluster.a_url.clone(), cluster.b_url.clone()]);
    let mut report = Vec::new();
    let rounds_at = format!("{ns}:{{*}}#epoch");
    let trail_at = format!("{ns}:{{audit-*");
    // Some rounds before any fault, so the rounds' and the trail's keys exist.
    let (first, _) = load.resumed_after("before any fault", Instant::now());
    assert!(first < HANG_GUARD);

    eprintln!(
        "failover: rounds before any fault: {:.1} s",
        first.as_secs_f64()
    );
    // 1. The rounds' master killed: its replica is promoted after the node timeout; the
    // killed node is started again and rejoins as the new master's replica (until then no
    // write of that slot is held by a replica, and so none is confirmed).
    let master = own.master_holding(&rounds_at);
    let replica = OwnCluster::replica_of(master);
    let since = Instant::now();
    own.signal(master, "KILL");
    wait_until("the replica is promoted", || {
        OwnCluster::role(replica) == "master"
    });
    own.restart(master);
    report.push(("killed", load.resumed_after("killed", since)));

    // 2. The trail's master moved by `CLUSTER FAILOVER` at its replica (no write is lost: the
    // replica catches up first).
    let master = own.master_holding(&trail_at);
    let replica = OwnCluster::replica_of(master);
    let since = Instant::now();
    assert_eq!(
        OwnCluster::cli(replica, &["cluster", "failover"]).trim(),
        "OK"
    );
    wait_until("the failover completes", || {
        OwnCluster::role(replica) == "master"
    });
    report.push(("moved", load.resumed_after("moved", since)));

    // 3. The rounds' master paused past the node timeout: its replica is promoted; resumed,
    // the old master finds itself demoted and follows the new one.
    let master = own.master_holding(&rounds_at);
    let replica = OwnCluster::replica_of(master);
    let since = Instant::now();
    own.signal(master, "STOP");
    wait_until("the replica is promoted", || {
        OwnCluster::role(replica) == "master"
    });
    own.signal(master, "CONT");
    report.push(("paused", load.resumed_after("paused", since)));
    wait_until("the paused master follows", || {
        OwnCluster::role(master) == "slave"
    });

    // 4. The rounds' slot migrated to another master while rounds run, key by key (`ASK`
    // while it moves, `MOVED` once it has).
    let from = own.master_holding(&rounds_at);
    let to = own
        .ports()
        .into_iter()
        .find(|p| *p != from && OwnCluster::role(*p) == "master")
        .unwrap();
    let since = Instant::now();
    own.migrate_slot_of(&rounds_at, from, to);
    report.push(("migrated", load.resumed_after("migrated", since)));
    assert_eq!(own.master_holding(&rounds_at), to);
    // Rounds after the last fault, on the cluster as it now is.
    let (_, _) = load.resumed_after("after the faults", Instant::now());
    let ran = load.stop();

    for (fault, (resume, denied)) in &report {
        let mut codes: BTreeMap<&str, usize> = BTreeMap::new();
        for d in denied {
            *codes.entry(d.as_str()).or_insert(0) += 1;
        }
        eprintln!(
            "failover: {fault}: resumed after {:.1} s, {} rounds denied meanwhile {codes:?}",
            resume.as_secs_f64(),
            denied.len()
        );
    }
    let booked: Vec<&Ran> = ran.iter().filter(|r| r.end.is_ok()).collect();
    eprintln!(
        "failover: {} rounds run by {CLIENTS} clients, {} booked",
        ran.len(),
        booked.len()
    );

    // Every round booked, replayed at both replicas, is refused and never goes upstream.
    let mut id = 1_000_000_000;
    for r in &booked {
        let round = r.round.as_ref().unwrap();
        for url in [&cluster.a_url, &cluster.b_url] {
            id += 1;
            assert_refused_as_used(&ask(url, &retry(&r.request, round, id, "9Z")));
        }
    }
    let counts = retries_per_state(&cluster.dir);
    assert!(
        counts.values().all(|n| *n == 1),
        "a round retried twice: {counts:?}"
    );
    let booked_states: Vec<String> = booked
        .iter()
        .map(|r| assert_round(r.round.as_ref().unwrap()))
        .collect();
    for state in &booked_states {
        assert_eq!(counts.get(state), Some(&1), "{state}");
    }

    // Every `submitted` line a booked round was confirmed with is in the trail.
    let lines = mrtr_gate_redis::RedisAudit::connect(&own.url, &ns, cluster.trail)
        .unwrap()
        .lines()
        .unwrap();
    let submitted: std::collections::HashSet<String> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "submitted")
        .filter_map(|v| v["state_sha256"].as_str().map(str::to_owned))
        .collect();
    for state in &booked_states {
        let digest = mrtr_gate_host::core::digest::digest_str(state);
        assert!(
            submitted.contains(&digest),
            "{state}: its submitted line is gone"
        );
    }

    let (report, ok) = cluster.reconcile();
    assert!(ok, "{report}");
    assert_eq!(report["consistent"], true, "{report}");
    assert_eq!(report["double_use"], json!([]), "{report}");
}
