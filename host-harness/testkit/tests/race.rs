//! Many processes, one truth: rounds opened in one Redis namespace, then attacked at once by
//! several `mrtr-gate-testkit race-worker` processes, each with its own component instance,
//! its own Redis connection and its own audit file. Exactly one retry per round; every other
//! attempt refused with the code for what it was; every audit file an intact chain; across
//! all of them, exactly one `submitted` event per round. Each test runs on one redis-server
//! and on a Redis Cluster (MRTR_GATE_REDIS_URL, MRTR_GATE_REDIS_CLUSTER_URL: the test command
//! starts both).
//!
//! Every test here runs under a CPU hog it starts itself (twice as many busy threads as the
//! machine has cores, stopped when the test ends): a good round is never denied because the
//! machine is busy, whether by the call deadline or by contention for the audit head.

#![cfg(test)]

use mrtr_gate_testkit::race;
use mrtr_gate_wasmtime::GateRuntime;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

const WORKERS: i64 = 4;
const ROUNDS: i64 = 60;
const LATE: i64 = 5;

/// Busy threads, twice as many as the machine has cores, until dropped; each stops by itself
/// after five minutes, should the test hang.
struct Hog(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Hog {
    fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        for _ in 0..cores * 2 {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(300);
                while !stop.load(std::sync::atomic::Ordering::Relaxed)
                    && std::time::Instant::now() < until
                {
                    std::hint::spin_loop();
                }
            });
        }
        Self(stop)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The codes a genuine retry that lost gets: the round found mid-consume by another process
/// (`state_already_used`), or already consumed (`inactive_mrtr_round`).
fn is_genuine_loss(code: &str) -> bool {
    matches!(code, "state_already_used" | "inactive_mrtr_round")
}

/// The shared Redis deployments the test command starts: one server (MRTR_GATE_REDIS_URL) and
/// a Cluster (MRTR_GATE_REDIS_CLUSTER_URL). A missing one fails on CI and is skipped, said
/// so, elsewhere.
fn deployments() -> Vec<(&'static str, String)> {
    [
        ("redis", "MRTR_GATE_REDIS_URL"),
        ("redis-cluster", "MRTR_GATE_REDIS_CLUSTER_URL"),
    ]
    .into_iter()
    .filter_map(|(name, var)| match std::env::var(var) {
        Ok(url) => Some((name, url)),
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{var} is not set (scripts/redis)"
            );
            eprintln!("{var} is not set: the race on {name} is skipped");
            None
        }
    })
    .collect()
}

#[test]
fn processes_racing_on_shared_rounds_retry_each_exactly_once() {
    for (_, url) in deployments() {
        processes_racing_on_shared_rounds_retry_each_exactly_once_on(&url);
    }
}

fn processes_racing_on_shared_rounds_retry_each_exactly_once_on(url: &str) {
    let url = url.to_owned();
    let _hog = Hog::start();
    let dir = std::env::temp_dir().join(format!("mrtr-gate-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let namespace = format!("race-{}", std::process::id());
    let runtime = GateRuntime::embedded().unwrap();
    race::open_rounds(
        &runtime,
        &url,
        &namespace,
        &dir.join("opener.jsonl"),
        1,
        ROUNDS,
        300_000,
    )
    .unwrap();
    // Late submissions: rounds whose lifetime has passed before anyone answers.
    race::open_rounds(
        &runtime,
        &url,
        &namespace,
        &dir.join("opener-late.jsonl"),
        10_001,
        LATE,
        200,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));

    // Every worker loads the component and connects, then all start at once.
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 1500;
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (url, namespace, dir) = (url.clone(), namespace.clone(), dir.clone());
            let spawn = move |first: i64, rounds: i64, tag: &str| {
                Command::new(env!("CARGO_BIN_EXE_mrtr-gate-testkit"))
                    .args(["race-worker", "--redis", &url, "--namespace", &namespace])
                    .arg("--audit")
                    .arg(dir.join(format!("worker-{w}-{tag}.jsonl")))
                    .args([
                        "--first",
                        &first.to_string(),
                        "--rounds",
                        &rounds.to_string(),
                        "--worker",
                        &w.to_string(),
                        "--start-at-ms",
                        &start.to_string(),
                    ])
                    .output()
            };
            std::thread::spawn(move || {
                (
                    spawn(1, ROUNDS, "live").unwrap(),
                    spawn(10_001, LATE, "late").unwrap(),
                )
            })
        })
        .collect();
    let mut attempts: Vec<Value> = Vec::new();
    for w in workers {
        let (live, late) = w.join().unwrap();
        for out in [live, late] {
            attempts.extend(worker_lines(out));
        }
    }

    let mut wins: BTreeMap<i64, usize> = BTreeMap::new();
    let mut by_worker: BTreeMap<i64, usize> = BTreeMap::new();
    for a in &attempts {
        let (round, kind, ok, code) = (
            a["round"].as_i64().unwrap(),
            a["kind"].as_str().unwrap(),
            a["ok"].as_bool().unwrap(),
            a["code"].as_str(),
        );
        if round > 10_000 {
            assert!(!ok, "a late submission went through: {a}");
            assert_eq!(code, Some("inactive_mrtr_round"), "{a}");
            continue;
        }
        match kind {
            "genuine" if ok => {
                *wins.entry(round).or_default() += 1;
                *by_worker.entry(a["worker"].as_i64().unwrap()).or_default() += 1;
            }
            "genuine" => assert!(code.is_some_and(is_genuine_loss), "a losing retry: {a}"),
            "replay" => assert_eq!((ok, code), (false, Some("inactive_mrtr_round")), "{a}"),
            "id_collision" => assert!(
                !ok && matches!(
                    code,
                    Some("retry_requires_new_jsonrpc_id" | "inactive_mrtr_round")
                ),
                "{a}"
            ),
            "cross_user" | "cross_tenant" => assert!(
                !ok && matches!(
                    code,
                    Some("mrtr_identity_or_argument_mismatch" | "inactive_mrtr_round")
                ),
                "{a}"
            ),
            other => panic!("unknown attempt {other}"),
        }
    }
    assert_eq!(wins.len() as i64, ROUNDS, "every round was retried");
    assert!(
        wins.values().all(|n| *n == 1),
        "a round was retried twice: {wins:?}"
    );

    // Every process's trail is an intact chain, and all of them together hold exactly one
    // `submitted` event per round.
    let mut submitted: BTreeMap<String, usize> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        mrtr_gate_host::core::audit::verify_chain(text.lines()).unwrap();
        for line in text.lines() {
            let e: Value = serde_json::from_str(line).unwrap();
            if e["event"] == "submitted" {
                *submitted.entry(e["request_id"].to_string()).or_default() += 1;
            }
        }
    }
    assert_eq!(submitted.len() as i64, ROUNDS);
    assert!(submitted.values().all(|n| *n == 1), "{submitted:?}");
    eprintln!(
        "raced {ROUNDS} rounds (+{LATE} late) across {WORKERS} processes: {} attempts, 0 double uses; rounds won per worker {by_worker:?}",
        attempts.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A worker process holding at `hold` (`--hold-consent-ms` or `--hold-after-win-ms`) on
/// round `round`, killed (SIGKILL) as soon as it says it holds there; returns the lines it
/// printed before.
fn killed_at(
    url: &str,
    namespace: &str,
    audit: &std::path::Path,
    round: i64,
    hold: &str,
) -> Vec<Value> {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mrtr-gate-testkit"))
        .args(["race-worker", "--redis", url, "--namespace", namespace])
        .arg("--audit")
        .arg(audit)
        .args([
            "--first",
            &round.to_string(),
            "--rounds",
            "1",
            "--worker",
            "0",
            hold,
            "60000",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let holding = v.get("holding").is_some();
        lines.push(v);
        if holding {
            child.kill().unwrap();
            break;
        }
    }
    child.wait().unwrap();
    lines
}

fn attempt_once(url: &str, namespace: &str, audit: &std::path::Path, round: i64) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_mrtr-gate-testkit"))
        .args(["race-worker", "--redis", url, "--namespace", namespace])
        .arg("--audit")
        .arg(audit)
        .args([
            "--first",
            &round.to_string(),
            "--rounds",
            "1",
            "--worker",
            "2",
        ])
        .output()
        .unwrap();
    worker_lines(out)
}

/// The JSON lines a worker printed, one per attempt; the worker must have succeeded.
fn worker_lines(out: std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "a worker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn genuine(lines: &[Value]) -> Option<(bool, Option<String>)> {
    lines.iter().find(|l| l["kind"] == "genuine").map(|l| {
        (
            l["ok"].as_bool().unwrap(),
            l["code"].as_str().map(str::to_owned),
        )
    })
}

#[test]
fn a_process_killed_mid_round_never_yields_a_second_retry_and_its_trail_stays_valid() {
    for (_, url) in deployments() {
        a_process_killed_mid_round_never_yields_a_second_retry_and_its_trail_stays_valid_on(&url);
    }
}

fn a_process_killed_mid_round_never_yields_a_second_retry_and_its_trail_stays_valid_on(url: &str) {
    let url = url.to_owned();
    let _hog = Hog::start();
    let dir = std::env::temp_dir().join(format!("mrtr-gate-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let namespace = format!("kill-{}", std::process::id());
    let runtime = GateRuntime::embedded().unwrap();
    race::open_rounds(
        &runtime,
        &url,
        &namespace,
        &dir.join("opener.jsonl"),
        20_001,
        2,
        300_000,
    )
    .unwrap();

    // Killed while the user is still looking at the consent prompt: nothing was consumed, so
    // the round is still there for one retry, from whichever process asks next.
    let before = killed_at(
        &url,
        &namespace,
        &dir.join("killed-in-consent.jsonl"),
        20_001,
        "--hold-consent-ms",
    );
    assert!(
        genuine(&before).is_none(),
        "it died before its retry was built"
    );
    assert_eq!(
        genuine(&attempt_once(
            &url,
            &namespace,
            &dir.join("next-1.jsonl"),
            20_001
        )),
        Some((true, None))
    );

    // Killed after its retry was built (the round consumed, the retry perhaps never sent):
    // no second retry of that round, from any process.
    let after = killed_at(
        &url,
        &namespace,
        &dir.join("killed-after-win.jsonl"),
        20_002,
        "--hold-after-win-ms",
    );
    assert_eq!(genuine(&after), Some((true, None)));
    assert_eq!(
        genuine(&attempt_once(
            &url,
            &namespace,
            &dir.join("next-2.jsonl"),
            20_002
        )),
        Some((false, Some("inactive_mrtr_round".into())))
    );

    // Every trail, the killed processes' included, is an intact chain (each append was
    // durable before it was acknowledged); the killed winner's trail holds its `submitted`.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        mrtr_gate_host::core::audit::verify_chain(text.lines())
            .unwrap_or_else(|b| panic!("{}: {b:?}", path.display()));
    }
    let killed_winner = std::fs::read_to_string(dir.join("killed-after-win.jsonl")).unwrap();
    assert!(
        killed_winner
            .lines()
            .any(|l| l.contains("\"event\":\"submitted\""))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_sharing_one_trail_in_redis_write_one_chain_with_one_retry_per_round() {
    for (_, url) in deployments() {
        processes_sharing_one_trail_in_redis_write_one_chain_with_one_retry_per_round_on(&url);
    }
}

fn processes_sharing_one_trail_in_redis_write_one_chain_with_one_retry_per_round_on(url: &str) {
    let url = url.to_owned();
    let _hog = Hog::start();
    const SHARED_ROUNDS: i64 = 30;
    let namespace = format!("shared-{}", std::process::id());
    let trail = "trail";
    let runtime = GateRuntime::embedded().unwrap();
    let shared = std::path::PathBuf::from(format!("redis:{trail}"));
    race::open_rounds(
        &runtime,
        &url,
        &namespace,
        &shared,
        30_001,
        SHARED_ROUNDS,
        300_000,
    )
    .unwrap();
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 1500;
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            Command::new(env!("CARGO_BIN_EXE_mrtr-gate-testkit"))
                .args([
                    "race-worker",
                    "--redis",
                    &url,
                    "--namespace",
                    &namespace,
                    "--audit",
                    &format!("redis:{trail}"),
                ])
                .args([
                    "--first",
                    "30001",
                    "--rounds",
                    &SHARED_ROUNDS.to_string(),
                    "--worker",
                    &w.to_string(),
                ])
                .args(["--start-at-ms", &start.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut attempts: Vec<Value> = Vec::new();
    for w in workers {
        attempts.extend(worker_lines(w.wait_with_output().unwrap()));
    }
    let mut wins: BTreeMap<i64, usize> = BTreeMap::new();
    for a in attempts
        .iter()
        .filter(|a| a["kind"] == "genuine" && a["ok"] == true)
    {
        *wins.entry(a["round"].as_i64().unwrap()).or_default() += 1;
    }
    let contention = attempts
        .iter()
        .filter(|a| a["code"] == "audit_contention")
        .count();
    assert!(
        wins.values().all(|n| *n == 1),
        "a round was retried twice: {wins:?}"
    );
    // Losing the head to another process costs a second try, never a denial.
    assert_eq!(contention, 0, "attempts denied for audit contention");
    // One chain, written by five processes: intact end to end, one `submitted` per round won.
    let lines = mrtr_gate_redis::RedisAudit::connect(&url, &namespace, trail)
        .unwrap()
        .lines()
        .unwrap();
    mrtr_gate_host::core::audit::verify_chain(lines.iter().map(String::as_str)).unwrap();
    let submitted = lines
        .iter()
        .filter(|l| l.contains("\"event\":\"submitted\""))
        .count();
    assert_eq!(
        submitted,
        wins.len(),
        "every retry built is in the one trail, once"
    );
    assert_eq!(
        wins.len() as i64,
        SHARED_ROUNDS,
        "every round was retried ({contention} attempts lost to audit contention)"
    );
    // Reconciled (G002): no round used twice, no retry without consent; every binding is
    // still open (its retry was built, its result never came); each kind of attack found.
    let report = mrtr_gate_host::core::reconcile::reconcile(lines.iter().map(String::as_str));
    assert!(report.consistent(), "{}", report.to_json());
    assert_eq!(report.bindings as i64, SHARED_ROUNDS);
    assert_eq!(report.open.len() as i64, SHARED_ROUNDS);
    for kind in ["id_collision", "cross_principal", "late_or_replayed"] {
        assert!(
            report.refused.get(kind).is_some_and(|r| !r.is_empty()),
            "no {kind} in {}",
            report.to_json()
        );
    }
    // Which of the two codes a genuine loser gets is the scheduler's choice, so either count
    // may be 0, but the trail must name every lost race the workers were told of.
    for a in attempts
        .iter()
        .filter(|a| a["kind"] == "genuine" && a["ok"] != true)
    {
        assert!(
            a["code"].as_str().is_some_and(is_genuine_loss),
            "a genuine loser got {a}"
        );
    }
    let lost = attempts
        .iter()
        .filter(|a| a["code"] == "state_already_used")
        .count();
    assert_eq!(
        report.refused.get("lost_race").map_or(0, Vec::len),
        lost,
        "every lost race is in the trail, once"
    );
    eprintln!(
        "one shared trail: {} events from {} processes, {} rounds, {contention} audit_contention denials; refused {:?}",
        lines.len(),
        WORKERS + 1,
        wins.len(),
        report
            .refused
            .iter()
            .map(|(k, v)| (k.as_str(), v.len()))
            .collect::<Vec<_>>()
    );
}
