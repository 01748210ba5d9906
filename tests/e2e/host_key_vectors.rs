//! The host keys' formats, pinned as vectors every host checks byte for byte
//! (tests/host_keys/vectors.json): pseudonyms, sealed store values and values that must be
//! refused. The Python and Node packages read the same file (their tests `test_host_keys.py`
//! and `host-keys.test.js`), so a store or a trail written by one host verifies in the others.
//! A change of format re-records the file with
//! `MRTR_GATE_BLESS=1 cargo test --workspace --locked --test e2e host_key_vectors::`, and the
//! diff shows it.

use mrtr_gate_host::core::host::{DuePage, HostError, ReadKey, Storage, Versioned, Write};
use mrtr_gate_host::host_keys::{AuthenticatedStorage, HostKeys, Pseudonyms};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const K1: (&str, [u8; 32]) = ("k1", [7; 32]);
const K2: (&str, [u8; 32]) = ("2026-12_b", [0xa5; 32]);
// Never accepted by the verifying keys: values it seals are refused.
const K3: (&str, [u8; 32]) = ("k3", [3; 32]);

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/host_keys/vectors.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A store that keeps what the wrapper writes and answers one value to every read: the
/// sealed text of a write, and the opening of a given stored text, with nothing else around.
struct OneValue {
    written: Arc<Mutex<Vec<String>>>,
    stored: Versioned,
}

impl Storage for OneValue {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        Ok(keys.iter().map(|_| self.stored.clone()).collect())
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let mut written = self.written.lock().unwrap();
        written.extend(writes.iter().filter_map(|w| w.value.map(str::to_owned)));
        Ok(writes.iter().map(|w| w.expected + 1).collect())
    }

    fn list_due(&self, _: u64, _: Option<&str>, _: u32) -> Result<DuePage, HostError> {
        Err(HostError::new("not listed"))
    }
}

fn seal(keys: &HostKeys, key: &str, prev: u64, text: &str) -> String {
    let written = Arc::new(Mutex::new(Vec::new()));
    let store = AuthenticatedStorage::new(
        OneValue {
            written: written.clone(),
            stored: Versioned::absent(),
        },
        keys.clone(),
    );
    store
        .write(&[Write {
            key,
            expected: prev,
            value: Some(text),
            ttl_ms: 60_000,
        }])
        .unwrap();
    written.lock().unwrap().pop().unwrap()
}

/// The text a fresh wrapper with `keys` opens from `stored` under `key` (Err: refused).
fn open(keys: &HostKeys, key: &str, stored: &str, version: u64) -> Result<String, String> {
    let store = AuthenticatedStorage::new(
        OneValue {
            written: Arc::default(),
            stored: Versioned {
                value: stored.to_owned(),
                version,
            },
        },
        keys.clone(),
    );
    store
        .read(&[ReadKey::from(key)])
        .map_err(|e| e.to_string())
        .map(|mut v| {
            v.pop()
                .and_then(|v| v.present())
                .map(|v| v.value)
                .unwrap_or_default()
        })
}

fn verifying_keys() -> HostKeys {
    let mut keys = HostKeys::new(K1.0, &K1.1).unwrap();
    keys.add(K2.0, &K2.1).unwrap();
    keys
}

fn generate() -> Value {
    let k1 = HostKeys::new(K1.0, &K1.1).unwrap();
    let mut k2 = verifying_keys();
    k2.rotate_to(K2.0).unwrap();
    let k3 = HostKeys::new(K3.0, &K3.1).unwrap();

    let mut pseudonyms = Vec::new();
    for (keys, user, tenant) in [
        (&k1, "ada@example.com", "acme"),
        (&k1, "", ""),
        (&k1, "Zoë Ünïcode ✓", "t.e.n.a.n.t"),
        (&k2, "ada@example.com", "acme"),
    ] {
        let names = Pseudonyms::new(keys.clone());
        pseudonyms.push(json!({
            "key_id": keys.current_id(), "user": user, "tenant": tenant,
            "user_pseudonym": names.user(user), "tenant_pseudonym": names.tenant(tenant),
        }));
    }

    let key = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/1";
    let epoch_prev = 0x9e37_79b9_0000_0007_u64;
    let mut sealed = Vec::new();
    for (keys, key, prev, text) in [
        (&k1, key, 0, "{}"),
        (&k1, key, 5, "{\"round\":1,\"params\":\"a.b.c\"}"),
        (
            &k1,
            "mrtr-gate/v3/rid/ab.cd",
            epoch_prev,
            "Zoë ✓ line\nnext",
        ),
        (&k1, key, 1, ""),
        (&k2, key, epoch_prev, "sealed by the second key"),
    ] {
        sealed.push(json!({
            "key_id": keys.current_id(), "key": key, "prev": prev.to_string(), "text": text,
            "sealed": seal(keys, key, prev, text),
        }));
    }

    let base = seal(&k1, key, 0, "{\"to\":\"bob\"}");
    let (head, text) = base.rsplit_once('.').unwrap();
    let tag = &head[head.len() - 64..];
    let flipped = format!(
        "{}{}",
        &tag[..63],
        if tag.ends_with('0') { "1" } else { "0" }
    );
    let mut refused = vec![
        (
            "the text rewritten",
            key.to_owned(),
            format!("{head}.{{\"to\":\"eve\"}}"),
        ),
        (
            "the MAC changed",
            key.to_owned(),
            base.replace(tag, &flipped),
        ),
        (
            "prev changed",
            key.to_owned(),
            base.replace(".0000000000000000.", ".0000000000000001."),
        ),
        ("moved to another key", format!("{key}x"), base.clone()),
        (
            "sealed by a key not accepted",
            key.to_owned(),
            seal(&k3, key, 0, text),
        ),
        (
            "another accepted key's id put on it",
            key.to_owned(),
            base.replacen("mac2.k1.", &format!("mac2.{}.", K2.0), 1),
        ),
        (
            "the MAC in uppercase hex",
            key.to_owned(),
            base.replace(tag, &tag.to_uppercase()),
        ),
        (
            "prev with a sign",
            key.to_owned(),
            base.replace(".0000000000000000.", ".+000000000000000."),
        ),
        (
            "prev one digit short",
            key.to_owned(),
            base.replace(".0000000000000000.", ".000000000000000."),
        ),
        ("not sealed", key.to_owned(), text.to_owned()),
        (
            "the old format",
            key.to_owned(),
            base.replace(".0000000000000000.", "."),
        ),
        ("no text separator", key.to_owned(), head.to_owned()),
        (
            "another prefix",
            key.to_owned(),
            base.replacen("mac2.", "MAC2.", 1),
        ),
    ];
    refused.sort_by(|a, b| a.0.cmp(b.0));
    json!({
        "about": "Host key formats (docs/host-keys.md), recorded from host-harness/host/src/host_keys.rs by tests/e2e/host_key_vectors.rs. Every host checks them byte for byte. Secrets are hex; prev is a decimal u64 string. `keys` are the verifying keys (the first is current); `sealed` entries name the key that sealed them (current); `refused` values must fail to open under the verifying keys.",
        "keys": [
            {"id": K1.0, "secret_hex": hex(&K1.1)},
            {"id": K2.0, "secret_hex": hex(&K2.1)},
        ],
        "unaccepted_key": {"id": K3.0, "secret_hex": hex(&K3.1)},
        "pseudonyms": pseudonyms,
        "sealed": sealed,
        "refused": refused.into_iter().map(|(why, key, stored)| json!({"why": why, "key": key, "stored": stored})).collect::<Vec<_>>(),
    })
}

#[test]
fn the_recorded_vectors_are_what_the_rust_host_makes_and_refuses() {
    let made = generate();
    crate::support::assert_recorded(&vectors_path(), &made, "the host key formats");
}

#[test]
fn every_sealed_vector_opens_and_every_refused_one_is_refused() {
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(vectors_path()).unwrap()).unwrap();
    let keys = verifying_keys();
    for v in recorded["sealed"].as_array().unwrap() {
        let prev: u64 = v["prev"].as_str().unwrap().parse().unwrap();
        let opened = open(
            &keys,
            v["key"].as_str().unwrap(),
            v["sealed"].as_str().unwrap(),
            prev + 1,
        );
        assert_eq!(opened.as_deref(), Ok(v["text"].as_str().unwrap()), "{v}");
    }
    let refused = recorded["refused"].as_array().unwrap();
    assert!(refused.len() >= 10);
    for v in refused {
        let opened = open(
            &keys,
            v["key"].as_str().unwrap(),
            v["stored"].as_str().unwrap(),
            1,
        );
        assert!(opened.is_err(), "accepted: {v}");
    }
}
