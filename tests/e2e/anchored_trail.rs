//! A keyed trail recorded from a real gate round under `AnchoredAudit` (docs/host-keys.md,
//! "The keyed trail"): the trail, its links and its anchor in tests/host_keys/ (`trail.jsonl`,
//! `trail.jsonl.links`, `trail.anchor`, keyed with `k1` of vectors.json). The Python and Node
//! packages verify it `Intact` and write its links and anchor again byte for byte from its
//! lines (`test_host_keys.py`, `host-keys.test.js`), so a trail keyed by one host verifies in
//! the others. Re-record with
//! `MRTR_GATE_BLESS=1 cargo test --workspace --locked --test e2e anchored_trail::`.

use crate::support;
use mrtr_gate_host::core::host::{Audit, AuditEntry, ChainHead};
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::host_keys::{AnchorCheck, AnchoredAudit, HostKeys, verify_anchor};
use mrtr_gate_host::reference_hosts::{
    FileAudit, ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `k1` of tests/host_keys/vectors.json.
fn keys() -> HostKeys {
    HostKeys::new("k1", &[7; 32]).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/host_keys")
        .join(name)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mrtr-gate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One round (register, an input-required answer, the retry with consent) through the gate, its trail at `trail`
/// under `AnchoredAudit`.
fn record(trail: &Path, links: &Path, anchor: &Path) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let audit = Arc::new(AnchoredAudit::new(
        FileAudit::open(trail).unwrap(),
        keys(),
        anchor,
        links,
    ));
    let mut g = ComponentGate::new(
        support::runtime(),
        HostServices {
            clock: clock.clone(),
            storage: Arc::new(MemoryStorage::new(clock)),
            consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
            audit,
        },
    );
    let server = ServerIdentity::origin("https://keys.example.com/mcp").unwrap();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    g.register(Registration {
        request_id: RequestId::Number(1),
        server: server.clone(),
        user: "u1.anchored".into(),
        tenant: "t1.anchored".into(),
        method: "tools/call".into(),
        params_json: json!({"name": "t", "arguments": {}, "_meta": meta}).to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "inputRequests": {"ok": {"method": "elicitation/create", "params": {"message": "Confirm?",
            "requestedSchema": {"type": "object", "properties": {"yes": {"type": "boolean"}}}}}}}});
    assert!(matches!(
        g.accept_response(&server, &round.to_string()),
        Ok(ResponseVerdict::InputRequired(_))
    ));
    g.build_retry(RetryRequest {
        server: server.clone(),
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(2),
        user: "u1.anchored".into(),
        tenant: "t1.anchored".into(),
        responses_json: json!({"ok": {"action": "accept", "content": {"yes": true}}}).to_string(),
    })
    .unwrap();
}

/// The links and the anchor `AnchoredAudit` writes for `trail`'s lines, appended in order (in
/// a folder of its own, `name`: tests run at once).
fn rekey(trail: &str, name: &str) -> (String, String) {
    let dir = temp_dir(&format!("rekey-{name}"));
    let (links, anchor) = (dir.join("links"), dir.join("anchor"));
    let audit = AnchoredAudit::new(MemoryAudit::new(), keys(), &anchor, &links);
    for line in trail.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        audit
            .append(&AuditEntry {
                shard: v["shard"].as_str().unwrap().to_owned(),
                seq: v["seq"].as_u64().unwrap(),
                prev_sha256: v["prev_sha256"].as_str().unwrap().to_owned(),
                event_sha256: mrtr_gate_host::core::digest::sha256_hex(line.as_bytes()),
                line: line.to_owned(),
            })
            .unwrap();
    }
    let out = (
        std::fs::read_to_string(&links).unwrap(),
        std::fs::read_to_string(&anchor).unwrap(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn the_recorded_keyed_trail_is_intact_and_its_links_and_anchor_are_the_rust_hosts() {
    let (trail, links, anchor) = (
        fixture("trail.jsonl"),
        fixture("trail.jsonl.links"),
        fixture("trail.anchor"),
    );
    if std::env::var_os("MRTR_GATE_BLESS").is_some() {
        // Recorded aside and renamed into place: the other tests read these files meanwhile.
        let aside = [&trail, &links, &anchor]
            .map(|p| p.with_file_name(format!("{}.new", p.file_name().unwrap().to_string_lossy())));
        for p in &aside {
            let _ = std::fs::remove_file(p);
        }
        record(&aside[0], &aside[1], &aside[2]);
        for (from, to) in aside.iter().zip([&trail, &links, &anchor]) {
            std::fs::rename(from, to).unwrap();
        }
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let (text, linked, anchored) = (read(&trail), read(&links), read(&anchor));
    let n = text.lines().count() as u64;
    assert!(n >= 2, "a round writes more than one line");
    assert_eq!(
        verify_anchor(&text, &linked, &anchored, &keys()),
        AnchorCheck::Intact { events: n }
    );
    // The formats: the same lines keyed again give the same bytes.
    assert_eq!(rekey(&text, "rust"), (linked, anchored));
}

/// A trail keyed before shards, continued: its `v1` anchor line is kept as it was (the chain
/// `""` is closed), beside the new shard's, and the whole verifies.
#[test]
fn a_trail_keyed_before_shards_goes_on_verifying_once_continued() {
    let dir = temp_dir("legacy-continued");
    let (trail, links, anchor) = (
        dir.join("t.jsonl"),
        dir.join("t.links"),
        dir.join("t.anchor"),
    );
    for (from, to) in [
        ("legacy_trail.jsonl", &trail),
        ("legacy_trail.jsonl.links", &links),
        ("legacy_trail.anchor", &anchor),
    ] {
        std::fs::copy(fixture(from), to).unwrap();
    }
    let legacy_anchor = std::fs::read_to_string(&anchor).unwrap();
    let audit = AnchoredAudit::new(FileAudit::open(&trail).unwrap(), keys(), &anchor, &links);
    assert!(
        audit
            .append(&support::entry_on(&ChainHead::genesis(), "after"))
            .unwrap()
            .written
    );
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert!(
        read(&anchor).starts_with(&legacy_anchor),
        "{}",
        read(&anchor)
    );
    let events = read(&trail).lines().count() as u64;
    assert_eq!(
        verify_anchor(&read(&trail), &read(&links), &read(&anchor), &keys()),
        AnchorCheck::Intact { events }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trail keyed before shards (audit `v3` lines, `v1` links and anchor, recorded by 0.6.0's
/// development builds as `trail.*`): its lines are the shard `""`, and it still verifies.
#[test]
fn a_trail_keyed_before_shards_still_verifies() {
    let read = |name: &str| std::fs::read_to_string(fixture(name)).unwrap();
    let text = read("legacy_trail.jsonl");
    assert!(!text.contains("\"shard\""));
    assert_eq!(
        verify_anchor(
            &text,
            &read("legacy_trail.jsonl.links"),
            &read("legacy_trail.anchor"),
            &keys()
        ),
        AnchorCheck::Intact {
            events: text.lines().count() as u64
        }
    );
}

#[test]
fn the_anchor_is_replaced_whole_even_over_a_longer_one() {
    // Rewritten in place: what was there before (an anchor under a longer key id, or debris)
    // must not outlive the new line.
    let dir = temp_dir("anchor-in-place");
    let append = |anchor: &Path| {
        let audit = AnchoredAudit::new(MemoryAudit::new(), keys(), anchor, dir.join("links"));
        audit
            .append(&support::entry_on(&ChainHead::genesis(), "one"))
            .unwrap();
        std::fs::read_to_string(anchor).unwrap()
    };
    let over = dir.join("over");
    std::fs::write(&over, "x".repeat(4096)).unwrap();
    let fresh = append(&dir.join("fresh"));
    assert!(fresh.ends_with("\"seq\":1,\"shard\":\"t0\"}\n"), "{fresh}");
    assert_eq!(append(&over), fresh);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_link_or_anchor_spelt_otherwise_than_a_host_writes_it_is_not_accepted() {
    let read = |name: &str| std::fs::read_to_string(fixture(name)).unwrap();
    let (text, linked, anchored) = (
        read("trail.jsonl"),
        read("trail.jsonl.links"),
        read("trail.anchor"),
    );
    let upper = |line: &str| {
        let mac = line
            .split("\"mac\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        line.replace(mac, &mac.to_uppercase())
    };
    // The MAC in uppercase hex says the same bytes; every host refuses it alike.
    assert_eq!(
        verify_anchor(&text, &linked, &upper(&anchored), &keys()),
        AnchorCheck::BadAnchor
    );
    let links: String = linked
        .lines()
        .enumerate()
        .map(|(i, l)| if i == 0 { upper(l) } else { l.to_owned() } + "\n")
        .collect();
    assert_eq!(
        verify_anchor(&text, &links, &anchored, &keys()),
        AnchorCheck::Unkeyed {
            shard: serde_json::from_str::<Value>(text.lines().next().unwrap()).unwrap()["shard"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            seq: 1
        }
    );
}

/// The trails the Python and Node packages keyed through their own gates under their
/// `AnchoredAudit` (recorded by `test_host_keys_anchor.py` and `host-keys-anchor.test.js` with
/// `MRTR_GATE_BLESS=1`) verify here.
#[test]
fn trails_keyed_by_the_python_and_node_packages_are_intact_for_the_rust_verifier() {
    for host in ["python", "node"] {
        let read = |suffix: &str| {
            std::fs::read_to_string(fixture(&format!("{host}_trail{suffix}"))).unwrap()
        };
        let (text, linked, anchored) = (read(".jsonl"), read(".jsonl.links"), read(".anchor"));
        let n = text.lines().count() as u64;
        assert!(n >= 2, "{host}");
        assert_eq!(
            verify_anchor(&text, &linked, &anchored, &keys()),
            AnchorCheck::Intact { events: n },
            "{host}"
        );
        assert_eq!(rekey(&text, host), (linked, anchored), "{host}");
    }
}

/// Threads appending to one keyed file trail at once (a proxy's pool of engines), each as a
/// gate does: offer the line on the head it knows, learn the head from a refusal, offer again.
/// Their links and lines are made durable by shared `fsync`s outside the sink's locks; the
/// trail is still one chain, every line keyed, the anchor at its head.
#[test]
fn threads_appending_at_once_leave_one_keyed_chain_anchored_at_its_head() {
    let dir = temp_dir("anchored-threads");
    let (trail, links, anchor) = (
        dir.join("t.jsonl"),
        dir.join("t.links"),
        dir.join("t.anchor"),
    );
    let audit = AnchoredAudit::new(FileAudit::open(&trail).unwrap(), keys(), &anchor, &links);
    let (threads, each) = (4, 25);
    std::thread::scope(|s| {
        for t in 0..threads {
            let audit = &audit;
            s.spawn(move || {
                let mut head = ChainHead::genesis();
                for i in 0..each {
                    loop {
                        let entry = support::entry_on(&head, &format!("{t}-{i}"));
                        let outcome = audit.append(&entry).unwrap();
                        if outcome.written {
                            assert_eq!(outcome.stored.as_deref(), Some(entry.line.as_str()));
                            head = ChainHead {
                                seq: entry.seq,
                                event_sha256: entry.event_sha256,
                            };
                            break;
                        }
                        head = ChainHead {
                            seq: outcome.head_seq,
                            event_sha256: outcome.head_sha256,
                        };
                    }
                }
            });
        }
    });
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(
        verify_anchor(&read(&trail), &read(&links), &read(&anchor), &keys()),
        AnchorCheck::Intact {
            events: threads * each
        }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A keyed trail over a sink that loses its newest line (a failover, a truncation): the head
/// the keyed sink remembers is then past the inner sink's, and an entry on the inner head must
/// still reach it (or the gate could never see the loss, nor write on), not be refused on the
/// remembered head for ever.
#[test]
fn over_a_sink_that_lost_lines_an_entry_on_its_real_head_is_written() {
    let dir = temp_dir("anchored-lost");
    let inner = Arc::new(MemoryAudit::new());
    let audit = AnchoredAudit::new(
        inner.clone(),
        keys(),
        dir.join("t.anchor"),
        dir.join("t.links"),
    );
    let mut head = ChainHead::genesis();
    for i in 0..3 {
        let e = support::entry_on(&head, &format!("a{i}"));
        assert!(audit.append(&e).unwrap().written);
        head = ChainHead {
            seq: e.seq,
            event_sha256: e.event_sha256,
        };
    }
    assert!(inner.lose_newest().is_some());
    // On the head it had: refused, naming the real one (2), not the one remembered (3).
    let refused = audit.append(&support::entry_on(&head, "b")).unwrap();
    assert!(!refused.written);
    assert_eq!(refused.head_seq, 2);
    let real = ChainHead {
        seq: refused.head_seq,
        event_sha256: refused.head_sha256,
    };
    assert!(
        audit
            .append(&support::entry_on(&real, "c"))
            .unwrap()
            .written
    );
    let _ = std::fs::remove_dir_all(&dir);
}
