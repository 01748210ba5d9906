//! Storage the gate did not write: every such value is refused, never trusted, never a crash.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::Policy;
use serde_json::{Value, json};

/// The key of `id` (its canonical JSON) on the fixture's server: the prefix, the first 32
/// hex digits of the SHA-256 of the server as shown, `/`, the id.
fn key(id: &str) -> String {
    let digest = mrtr_gate_core::digest::sha256_hex(server().display().as_bytes());
    let server = digest.get(..32).unwrap();
    format!("{}{server}/{id}", mrtr_gate_core::ID_PREFIX)
}

/// Put `value` at `key`, whatever is there.
fn plant_at(fx: &Fx, key: &str, value: &str) {
    use mrtr_gate_core::host::{Storage, Write};
    let current = fx.storage.read(&[key.into()]).unwrap().remove(0).version;
    let write = Write {
        key,
        expected: current,
        value: Some(value),
        ttl_ms: 600_000,
    };
    assert_eq!(fx.storage.write(&[write]).unwrap().len(), 1);
}

/// Put `value` at the key of `id`, whatever is there.
fn plant(fx: &Fx, id: &str, value: &str) {
    plant_at(fx, &key(id), value);
}

fn stored(fx: &Fx, id: &str) -> String {
    use mrtr_gate_core::host::Storage;
    fx.storage
        .read(&[key(id).as_str().into()])
        .unwrap()
        .remove(0)
        .present()
        .unwrap()
        .value
}

#[test]
fn a_binding_lives_under_its_ids_in_its_servers_key_space() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    assert!(stored(&fx, "1").starts_with('{'), "the record");
    fx.round(1, state_only("s"));
    fx.retry_ok(n(1), s("r-2"), &json!({}));
    assert_eq!(
        stored(&fx, "\"r-2\""),
        "1",
        "the retry id points to the original"
    );
    // The server's ids share one key space: the retry id cannot be registered, the original
    // neither.
    assert_code(
        fx.register(s("r-2"), &tool_params("t", json!({})), Policy::default()),
        "request_id_in_use",
    );
    assert_code(
        fx.register(n(1), &tool_params("t", json!({})), Policy::default()),
        "request_id_in_use",
    );
    fx.accept(json!("r-2"), complete()).unwrap();
    assert_eq!(fx.storage.len(), 0, "record and pointer gone");
}

#[test]
fn values_the_gate_did_not_write_are_refused_as_storage_corrupted() {
    // (what is planted, under which id, which id the response names)
    let cases: [(&str, &str, i64); 6] = [
        ("garbage record", "{\"not\":\"a binding\"}", 7),
        ("not json", "\u{fffd}\u{fffe}", 7),
        ("a pointer to itself", "7", 7),
        ("a pointer to a pointer", "8", 7),
        ("an empty value", "", 7),
        ("a record of another id", "", 9),
    ];
    for (what, value, id) in cases {
        let mut fx = Fx::new();
        fx.register_tool(1);
        if what == "a record of another id" {
            let record = stored(&fx, "1");
            plant(&fx, "9", &record);
        } else {
            plant(&fx, "8", "7");
            plant(&fx, &id.to_string(), value);
        }
        let d = assert_code(fx.accept(id, complete()), "storage_corrupted");
        assert!(d.audited, "{what}: the refusal is on record");
        assert_code(fx.retry(n(id), n(100), &json!({})), "storage_corrupted");
        // The real binding is untouched and still works.
        fx.round(1, state_only("s"));
        fx.retry_ok(n(1), n(2), &json!({}));
        fx.accept(2, complete()).unwrap();
        fx.assert_chain();
    }
}

#[test]
fn a_record_copied_under_another_servers_key_is_refused_and_never_cached() {
    use mrtr_gate_core::ServerIdentity;
    let mut fx = Fx::new();
    fx.register_tool(1);
    let other = ServerIdentity::origin(OTHER_SERVER).unwrap();
    let digest = mrtr_gate_core::digest::sha256_hex(other.display().as_bytes());
    let other_key = format!(
        "{}{}/1",
        mrtr_gate_core::ID_PREFIX,
        digest.get(..32).unwrap()
    );
    let record = stored(&fx, "1");
    plant_at(&fx, &other_key, &record);
    // The other server's response finds a record under its key that names this server.
    for _ in 0..2 {
        let d = assert_code(
            fx.accept_from(OTHER_SERVER, 1, complete()),
            "storage_corrupted",
        );
        assert!(d.audited);
    }
    let mut retry = retry_request(n(1), n(2), &json!({}));
    retry.server = other;
    assert_code(fx.gate.build_retry(retry), "storage_corrupted");
    // The binding under its own key is untouched.
    fx.round(1, state_only("s"));
    fx.retry_ok(n(1), n(2), &json!({}));
    fx.accept(2, complete()).unwrap();
    fx.assert_chain();
}

#[test]
fn a_record_whose_params_no_longer_match_their_digest_is_refused() {
    let mut fx = Fx::new();
    fx.register(
        n(1),
        &tool_params("transfer", json!({"amount": 10})),
        Policy::default(),
    )
    .unwrap();
    fx.round(1, state_only("s"));
    // Someone with write access to the store edits the arguments the retry is rebuilt from
    // and leaves the digest as it was.
    let record = stored(&fx, "1");
    let edited = record.replace(
        r#""arguments":{"amount":10}"#,
        r#""arguments":{"amount":10000}"#,
    );
    assert_ne!(edited, record, "the test edits the stored arguments");
    plant(&fx, "1", &edited);
    let d = assert_code(
        fx.retry(n(1), n(2), &json!({})),
        "mrtr_identity_or_argument_mismatch",
    );
    assert!(d.audited);
    // Checked on every retry of a record read back, not only on the first.
    let d = assert_code(
        fx.retry(n(1), n(3), &json!({})),
        "mrtr_identity_or_argument_mismatch",
    );
    assert!(d.audited);
    fx.assert_chain();
}

#[test]
fn a_retry_pointer_the_record_does_not_list_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    // A pointer planted for id 5, naming binding 1, which never used id 5.
    plant(&fx, "5", "1");
    assert_code(fx.accept(5, complete()), "storage_corrupted");
    // Binding 1 goes on.
    fx.retry_ok(n(1), n(2), &json!({}));
}

#[test]
fn a_record_from_another_format_is_refused_and_the_sweeper_skips_what_it_cannot_read() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let mut record: Value = serde_json::from_str(&stored(&fx, "1")).unwrap();
    assert!(record["format"].is_u64());
    record["format"] = json!(1);
    plant(&fx, "1", &record.to_string());
    assert_code(fx.accept(1, complete()), "storage_corrupted");
    plant(&fx, "3", "{\"format\":2}");
    plant(&fx, "4", "1");
    fx.clock
        .advance(Policy::default().round_trip_lifetime_ms + 1);
    // Nothing the sweeper can read as a binding is ended; nothing panics.
    assert_eq!(fx.gate.expire_stale().unwrap(), 0);

    // A genuine record copied under another id's key is not a second binding to end.
    let mut fx = Fx::new();
    fx.register_tool(1);
    let record = stored(&fx, "1");
    plant(&fx, "9", &record);
    fx.clock
        .advance(Policy::default().round_trip_lifetime_ms + 1);
    assert_eq!(fx.gate.expire_stale().unwrap(), 1, "binding 1 only");
    assert_eq!(stored(&fx, "9"), record, "the copy is left to its TTL");
}

#[test]
fn an_open_round_without_a_confirmed_received_event_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    let mut record: Value = serde_json::from_str(&stored(&fx, "1")).unwrap();
    assert!(record["open"]["received_seq"].as_u64().unwrap() > 0);
    record["open"]["received_seq"] = json!(0);
    plant(&fx, "1", &record.to_string());
    assert_code(fx.retry(n(1), n(2), &json!({})), "storage_corrupted");
}

/// A store that sends every value, whatever version the gate says it holds, or one that holds
/// back a value the gate does not hold.
#[derive(Clone)]
struct Have(mrtr_gate_core::memory::MemoryStorage, &'static str);

impl mrtr_gate_core::host::Storage for Have {
    fn read(
        &self,
        keys: &[mrtr_gate_core::host::ReadKey<'_>],
    ) -> Result<Vec<mrtr_gate_core::host::Versioned>, mrtr_gate_core::host::HostError> {
        let all: Vec<mrtr_gate_core::host::ReadKey<'_>> =
            keys.iter().map(|k| k.key.into()).collect();
        let mut found = self.0.read(&all)?;
        if self.1 == "withholds" {
            for v in found.iter_mut().filter(|v| v.is_present()) {
                v.value.clear();
            }
        }
        Ok(found)
    }
    fn write(
        &self,
        writes: &[mrtr_gate_core::host::Write<'_>],
    ) -> Result<Vec<u64>, mrtr_gate_core::host::HostError> {
        self.0.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_core::host::DuePage, mrtr_gate_core::host::HostError> {
        self.0.list_due(due_by_ms, cursor, limit)
    }
}

fn gate_over_have(
    fx: &Fx,
    how: &'static str,
) -> mrtr_gate_core::Gate<impl mrtr_gate_core::host::Host + use<>> {
    mrtr_gate_core::Gate::new(mrtr_gate_core::host::Services {
        clock: fx.clock.clone(),
        storage: Have(fx.storage.clone(), how),
        consent: fx.consent.clone(),
        audit: fx.audit.clone(),
    })
}

#[test]
fn a_store_that_sends_values_the_gate_holds_is_read_as_well() {
    let fx = Fx::new();
    let mut gate = gate_over_have(&fx, "sends everything");
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    gate.accept_response(&server(), &response(1, state_only("s")))
        .unwrap();
    gate.build_retry(retry_request(n(1), s("r-2"), &json!({})))
        .unwrap();
    gate.accept_response(&server(), &response("r-2", complete()))
        .unwrap();
    assert_eq!(fx.storage.len(), 0);
}

#[test]
fn a_value_held_back_that_the_gate_does_not_hold_is_refused() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    // Another instance (no cache) over a store that withholds every value.
    let mut gate = gate_over_have(&fx, "withholds");
    let d = assert_code(
        gate.accept_response(&server(), &response(1, state_only("s"))),
        "storage_corrupted",
    );
    assert!(d.audited);
    // The binding is untouched for a store that behaves.
    fx.round(1, state_only("s"));
}

/// Keys the sweep cannot end stay due: unreadable values, records of another format, a
/// genuine record copied under another id's key, pointers to nothing. When they fill the
/// first pages of the due listing (they fall due before any binding), the sweep must page
/// past them to the bindings behind, read each key once, and stop; a sweeper that lists its
/// first page again would end nothing here.
#[test]
fn expire_stale_pages_past_due_keys_it_cannot_end_to_the_bindings_behind_them() {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::{Services, Storage, Write};
    let fx = Fx::new();
    let store = Recorded::over(fx.storage.clone());
    let mut gate = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: store.clone(),
        consent: fx.consent.clone(),
        audit: fx.audit.clone(),
    });
    // A genuine record to copy, of a binding that stays live.
    gate.register(registration(
        n(1),
        &tool_params("t", json!({})),
        Policy::default(),
    ))
    .unwrap();
    let record = stored(&fx, "1");
    // 200 keys (more than three pages of 64) that fall due 30 s from now, before any
    // binding's record (its lifetime plus the 60 s grace), and that no sweep can end.
    let junk: Vec<String> = (0..200).map(|i| key(&format!("\"junk-{i:03}\""))).collect();
    for (i, k) in junk.iter().enumerate() {
        let value = match i % 4 {
            0 => "not json".to_owned(),
            1 => "{\"format\":2}".to_owned(),
            2 => record.clone(),
            _ => "\"no-such-binding\"".to_owned(),
        };
        let write = Write {
            key: k,
            expected: 0,
            value: Some(&value),
            ttl_ms: 30_000,
        };
        assert_eq!(fx.storage.write(&[write]).unwrap().len(), 1);
    }
    // 70 more that fall due with the bindings' records and list after them (same deadline,
    // higher keys): the bindings sit in the middle of a page, not at the end of the listing.
    let after: Vec<String> = (0..70).map(|i| key(&format!("{}", 900_000 + i))).collect();
    for k in &after {
        let write = Write {
            key: k,
            expected: 0,
            value: Some("not json"),
            ttl_ms: 61_000,
        };
        assert_eq!(fx.storage.write(&[write]).unwrap().len(), 1);
    }
    // Five bindings whose lifetime passes, one with a round open.
    let short = Policy {
        round_trip_lifetime_ms: 1_000,
        ..Policy::default()
    };
    for id in 10..15 {
        gate.register(registration(
            n(id),
            &tool_params("t", json!({})),
            short.clone(),
        ))
        .unwrap();
    }
    gate.accept_response(&server(), &response(10, state_only("s")))
        .unwrap();
    fx.clock.advance(1_000);
    store.read.borrow_mut().clear();

    assert_eq!(
        gate.expire_stale().unwrap(),
        5,
        "every binding behind the junk"
    );
    let cursors = store.cursors.borrow().clone();
    assert_eq!(
        cursors.first(),
        Some(&None),
        "the listing starts at the front"
    );
    assert!(
        cursors.iter().skip(1).all(Option::is_some),
        "every later page goes on from the one before: {cursors:?}"
    );
    let mut unique = cursors.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), cursors.len(), "no page listed twice");
    assert_eq!(cursors.len(), 275usize.div_ceil(64));
    let read = store.read.borrow().clone();
    let mut once = read.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), read.len(), "no key read twice");
    assert_eq!(read.len(), 275, "exactly what was due: {read:?}");
    assert!(junk.iter().chain(&after).all(|k| read.contains(k)));
    // The expired bindings ended (the one with a round on the trail as expired), the
    // junk and the live binding are as they were.
    assert_eq!(terminal_of(&fx, 10).len(), 1);
    assert_eq!(terminal_of(&fx, 10)[0]["outcome"], "expired");
    for id in 10..15 {
        assert!(
            fx.storage.live_keys(&key(&id.to_string())).is_empty(),
            "{id}"
        );
    }
    assert_eq!(fx.storage.live_keys(&key("\"junk-")).len(), 200);
    assert_eq!(stored(&fx, "1"), record);

    // The junk is still due: the next sweep goes through it again, ends nothing, and stops.
    store.cursors.borrow_mut().clear();
    assert_eq!(gate.expire_stale().unwrap(), 0);
    assert_eq!(store.cursors.borrow().len(), 270usize.div_ceil(64));
    fx.assert_chain();
}
