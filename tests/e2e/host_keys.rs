//! Keys that never enter the sandbox (host-harness/host/src/host_keys.rs): values in the store
//! authenticated by a host key, principals pseudonymised before the gate sees them, and the
//! audit head anchored apart from the trail. Each against the attack it answers.

use crate::support;
use mrtr_gate_host::core::host::{ReadKey, Storage, Write};
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::host_keys::{
    AnchorCheck, AnchoredAudit, AuthenticatedStorage, HostKeys, Pseudonyms, verify_anchor,
};
use mrtr_gate_host::reference_hosts::{
    FileAudit, ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::services::SharedStorage;
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::json;
use std::sync::Arc;

fn keys(id: &str, byte: u8) -> HostKeys {
    HostKeys::new(id, &[byte; 32]).unwrap()
}

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://keys.example.com/mcp").unwrap()
}

fn gate_over(
    storage: SharedStorage,
    audit: Arc<dyn mrtr_gate_host::core::host::Audit + Send + Sync>,
    clock: Arc<ManualClock>,
) -> ComponentGate {
    ComponentGate::new(
        support::runtime(),
        HostServices {
            clock,
            storage,
            consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
            audit,
        },
    )
}

fn open_round(g: &mut ComponentGate, user: &str, tenant: &str) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    g.register(Registration {
        request_id: RequestId::Number(1),
        server: server(),
        user: user.into(),
        tenant: tenant.into(),
        method: "tools/call".into(),
        params_json:
            json!({"name": "transfer", "arguments": {"to": "bob", "amount": 10}, "_meta": meta})
                .to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "inputRequests": {"ok": {"method": "elicitation/create", "params": {"message": "Confirm?",
            "requestedSchema": {"type": "object", "properties": {"yes": {"type": "boolean"}}}}}}}});
    assert!(matches!(
        g.accept_response(&server(), &round.to_string()),
        Ok(ResponseVerdict::InputRequired(_))
    ));
}

fn retry(g: &mut ComponentGate, user: &str, tenant: &str) -> Result<String, String> {
    g.build_retry(RetryRequest {
        server: server(),
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(2),
        user: user.into(),
        tenant: tenant.into(),
        responses_json: json!({"ok": {"action": "accept", "content": {"yes": true}}}).to_string(),
    })
    .map(|r| r.request_json)
    .map_err(|d| d.code.to_string())
}

/// The attack: someone who can write the store rewrites the open binding's arguments (and,
/// wherever a digest of them is kept, the digest too), keeping the store's own version rules.
fn rewrite_arguments(store: &MemoryStorage) -> bool {
    let keys = store.live_keys("mrtr-gate/");
    let mut rewritten = false;
    for key in keys {
        let found = store
            .read(&[ReadKey::from(key.as_str())])
            .unwrap()
            .pop()
            .and_then(|v| v.present())
            .unwrap();
        if !found.value.contains("bob") {
            continue;
        }
        let forged = found
            .value
            .replace("bob", "eve")
            .replace("\\\"amount\\\":10", "\\\"amount\\\":9999");
        let applied = store
            .write(&[Write {
                key: &key,
                expected: found.version,
                value: Some(&forged),
                ttl_ms: 300_000,
            }])
            .unwrap();
        rewritten |= applied.len() == 1;
    }
    rewritten
}

#[test]
fn a_value_rewritten_in_the_store_is_refused_when_values_are_authenticated() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let inner = MemoryStorage::new(clock.clone());
    let sealed = Arc::new(AuthenticatedStorage::new(inner.clone(), keys("k1", 7)));
    let mut g = gate_over(sealed, Arc::new(MemoryAudit::new()), clock.clone());
    open_round(&mut g, "alice", "acme");
    assert!(
        rewrite_arguments(&inner),
        "the attacker could write the store"
    );
    assert_eq!(
        retry(&mut g, "alice", "acme"),
        Err("storage_failed".into()),
        "the forged record is never read"
    );
}

#[test]
fn authenticated_values_work_through_a_whole_round_and_a_key_rotation() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let inner = MemoryStorage::new(clock.clone());
    let mut k = keys("k1", 7);
    let mut g = gate_over(
        Arc::new(AuthenticatedStorage::new(inner.clone(), k.clone())),
        Arc::new(MemoryAudit::new()),
        clock.clone(),
    );
    open_round(&mut g, "alice", "acme");
    // Rotate: new writes use k2, the record written under k1 still reads.
    k.add("k2", &[9; 32]).unwrap();
    k.rotate_to("k2").unwrap();
    let mut g2 = gate_over(
        Arc::new(AuthenticatedStorage::new(inner.clone(), k.clone())),
        Arc::new(MemoryAudit::new()),
        clock.clone(),
    );
    let sent = retry(&mut g2, "alice", "acme").unwrap();
    assert!(sent.contains("\"to\":\"bob\""));
    // Once k1 is retired, a value only k1 vouches for is refused.
    let stale = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/9";
    AuthenticatedStorage::new(inner.clone(), keys("k1", 7))
        .write(&[Write {
            key: stale,
            expected: 0,
            value: Some("{}"),
            ttl_ms: 60_000,
        }])
        .unwrap();
    k.retire("k1");
    let reader = AuthenticatedStorage::new(inner.clone(), k);
    assert!(reader.read(&[ReadKey::from(stale)]).is_err());
}

#[test]
fn a_sealed_value_moved_to_another_key_or_forged_is_refused() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let inner = MemoryStorage::new(clock.clone());
    let store = AuthenticatedStorage::new(inner.clone(), keys("k1", 7));
    let (a, b) = (
        "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/1",
        "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/2",
    );
    store
        .write(&[Write {
            key: a,
            expected: 0,
            value: Some("record of a"),
            ttl_ms: 60_000,
        }])
        .unwrap();
    assert_eq!(
        store.read(&[ReadKey::from(a)]).unwrap()[0]
            .clone()
            .present()
            .map(|v| v.value),
        Some("record of a".to_owned())
    );
    let raw = inner
        .read(&[ReadKey::from(a)])
        .unwrap()
        .pop()
        .and_then(|v| v.present())
        .unwrap()
        .value;
    inner
        .write(&[Write {
            key: b,
            expected: 0,
            value: Some(&raw),
            ttl_ms: 60_000,
        }])
        .unwrap();
    assert!(
        store.read(&[ReadKey::from(b)]).is_err(),
        "a value is bound to its key"
    );
    for forged in [
        "record of b",
        "mac1.k1.00.x",
        "mac1.kX.0000000000000000000000000000000000000000000000000000000000000000.x",
        "",
    ] {
        let key = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/3";
        let v = inner
            .read(&[ReadKey::from(key)])
            .unwrap()
            .pop()
            .map_or(0, |v| v.version);
        inner
            .write(&[Write {
                key,
                expected: v,
                value: Some(forged),
                ttl_ms: 60_000,
            }])
            .unwrap();
        assert!(store.read(&[ReadKey::from(key)]).is_err(), "{forged:?}");
    }
    assert!(
        HostKeys::new("k", &[1; 31]).is_err(),
        "short keys are refused"
    );
    assert!(HostKeys::new("bad id", &[1; 32]).is_err());
}

#[test]
fn principals_reach_the_trail_only_as_keyed_pseudonyms() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let audit = Arc::new(MemoryAudit::new());
    let p = Pseudonyms::new(keys("k1", 7));
    let (user, tenant) = (p.user("alice@example.com"), p.tenant("acme"));
    assert_eq!(user, p.user("alice@example.com"), "stable under one key");
    assert_ne!(user, p.user("bob@example.com"));
    assert_ne!(
        p.user("acme"),
        p.tenant("acme"),
        "a user and a tenant of one name differ"
    );
    assert_ne!(
        user,
        Pseudonyms::new(keys("k1", 8)).user("alice@example.com"),
        "another key, another pseudonym"
    );
    let mut g = gate_over(
        Arc::new(MemoryStorage::new(clock.clone())),
        audit.clone(),
        clock,
    );
    open_round(&mut g, &user, &tenant);
    retry(&mut g, &user, &tenant).unwrap();
    // The trail digests a principal as its canonical JSON text; a dictionary over addresses
    // (either spelling) finds nothing.
    let digest = |s: &str| mrtr_gate_host::core::digest::sha256_hex(s.as_bytes());
    let plain = [digest("alice@example.com"), digest("\"alice@example.com\"")];
    let events = audit.events();
    assert!(!events.is_empty());
    for e in &events {
        let line = e.to_string();
        assert!(plain.iter().all(|p| !line.contains(p.as_str())), "{line}");
        assert!(!line.contains("alice@example.com"));
    }
    assert_eq!(events[0]["user_sha256"], digest(&format!("\"{user}\"")));
}

/// A gate writing one round to the trail at `dir/audit.jsonl` under `k`, its links beside it
/// and its anchor at `anchor`.
fn anchored_round(dir: &std::path::Path, k: &HostKeys, anchor: &std::path::Path, id: i64) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let audit = Arc::new(AnchoredAudit::new(
        FileAudit::open(dir.join("audit.jsonl")).unwrap(),
        k.clone(),
        anchor,
        dir.join("audit.jsonl.links"),
    ));
    let mut g = gate_over(Arc::new(MemoryStorage::new(clock.clone())), audit, clock);
    open_round_with_id(&mut g, "alice", "acme", id);
}

fn open_round_with_id(g: &mut ComponentGate, user: &str, tenant: &str, id: i64) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    g.register(Registration {
        request_id: RequestId::Number(id),
        server: server(),
        user: user.into(),
        tenant: tenant.into(),
        method: "tools/call".into(),
        params_json: json!({"name": "t", "arguments": {}, "_meta": meta}).to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
        "requestState": "s"}});
    assert!(matches!(
        g.accept_response(&server(), &round.to_string()),
        Ok(ResponseVerdict::InputRequired(_))
    ));
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mrtr-gate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_trail_cut_short_is_caught_by_its_anchor() {
    let dir = temp_dir("anchor");
    let (trail, anchor, links) = (
        dir.join("audit.jsonl"),
        dir.join("audit.anchor"),
        dir.join("audit.jsonl.links"),
    );
    let k = keys("k1", 7);
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let audit = Arc::new(AnchoredAudit::new(
        FileAudit::open(&trail).unwrap(),
        k.clone(),
        &anchor,
        &links,
    ));
    let mut g = gate_over(Arc::new(MemoryStorage::new(clock.clone())), audit, clock);
    open_round(&mut g, "alice", "acme");
    retry(&mut g, "alice", "acme").unwrap();
    let text = std::fs::read_to_string(&trail).unwrap();
    let anchored = std::fs::read_to_string(&anchor).unwrap();
    let linked = std::fs::read_to_string(&links).unwrap();
    let n = text.lines().count() as u64;
    assert_eq!(
        verify_anchor(&text, &linked, &anchored, &k),
        AnchorCheck::Intact { events: n }
    );
    // The newest line removed: still a valid chain, but short of its anchor.
    let cut: String = text
        .lines()
        .take(text.lines().count() - 1)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        mrtr_gate_host::core::audit::verify_chain(cut.lines()).is_ok(),
        "the chain alone cannot tell"
    );
    assert_eq!(
        verify_anchor(&cut, &linked, &anchored, &k),
        AnchorCheck::Truncated {
            shard: shard_of(&text),
            events: n - 1,
            anchored: n
        }
    );
    assert_eq!(
        verify_anchor(
            &text,
            &linked,
            &anchored.replace("\"seq\":", "\"seq\":1"),
            &k
        ),
        AnchorCheck::BadAnchor
    );
    assert_eq!(
        verify_anchor(&text, &linked, &anchored, &keys("k1", 8)),
        AnchorCheck::BadAnchor,
        "another key's anchor"
    );
    assert_eq!(
        verify_anchor(&text, &linked, "", &k),
        AnchorCheck::BadAnchor
    );
    // Without its links, no line is shown to be the key holder's.
    assert_eq!(
        verify_anchor(&text, "", &anchored, &k),
        AnchorCheck::Unkeyed {
            shard: shard_of(&text),
            seq: 1
        }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lines_past_the_anchor_are_extended_and_lines_without_the_key_are_unkeyed() {
    let dir = temp_dir("extended");
    let k = keys("k1", 7);
    let (first, second) = (dir.join("first.anchor"), dir.join("second.anchor"));
    anchored_round(&dir, &k, &first, 1);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let trail = dir.join("audit.jsonl");
    let links = dir.join("audit.jsonl.links");
    let n = read(&trail).lines().count() as u64;
    assert_eq!(
        verify_anchor(&read(&trail), &read(&links), &read(&first), &k),
        AnchorCheck::Intact { events: n }
    );
    // Another writer with the key (another process, its own anchor) goes on: the first
    // anchor does not cover its lines, which are keyed.
    anchored_round(&dir, &k, &second, 2);
    let m = read(&trail).lines().count() as u64;
    assert!(m > n);
    assert_eq!(
        verify_anchor(&read(&trail), &read(&links), &read(&first), &k),
        AnchorCheck::Extended {
            shard: shard_of(&read(&trail)),
            events: m,
            anchored: n
        },
        "lines past the anchor are not intact"
    );
    assert_eq!(
        verify_anchor(&read(&trail), &read(&links), &read(&second), &k),
        AnchorCheck::Intact { events: m }
    );
    // A line appended by whoever can write the trail, chained as the core would: the chain
    // verifies; it has no link made with the key.
    let text = read(&trail);
    let last = text.lines().last().unwrap();
    let mut forged: serde_json::Value = serde_json::from_str(last).unwrap();
    forged["event"] = json!("consented");
    forged["seq"] = json!(m + 1);
    forged["prev_sha256"] = json!(mrtr_gate_host::core::digest::sha256_hex(last.as_bytes()));
    let extended = format!(
        "{text}{}\n",
        mrtr_gate_host::core::canonical::to_canonical(&forged)
    );
    assert!(mrtr_gate_host::core::audit::verify_chain(extended.lines()).is_ok());
    for anchor in [&first, &second] {
        assert_eq!(
            verify_anchor(&extended, &read(&links), &read(anchor), &k),
            AnchorCheck::Unkeyed {
                shard: shard_of(&text),
                seq: m + 1
            }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shard of a trail's first line (these trails have one server, so one shard).
fn shard_of(trail: &str) -> String {
    let first: serde_json::Value = serde_json::from_str(trail.lines().next().unwrap()).unwrap();
    first["shard"].as_str().unwrap().to_owned()
}
