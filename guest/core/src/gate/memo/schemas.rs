//! Form schemas checked before, remembered by value (bounded).

use crate::error::GateError;
use crate::schema::{FormSchema, check_measured};
use serde_json::Value;

/// FNV-1a (a word at a time) over a value's structure: types, keys, strings and numbers as stored (an integer
/// and a float with the same value differ, as they do to `==`). Equal values always have
/// equal fingerprints except for floats `0.0` and `-0.0`, which only costs a miss.
fn fingerprint(value: &Value) -> u64 {
    fn mix(h: &mut u64, bytes: &[u8]) {
        // Eight bytes a step (the last chunk zero-padded; lengths are mixed in separately).
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            for (w, b) in word.iter_mut().zip(chunk) {
                *w = *b;
            }
            *h ^= u64::from_le_bytes(word);
            *h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn walk(h: &mut u64, value: &Value) {
        match value {
            Value::Null => mix(h, b"n"),
            Value::Bool(b) => mix(h, if *b { b"t" } else { b"f" }),
            Value::Number(n) => {
                if let Some(u) = n.as_u64().filter(|_| n.is_u64()) {
                    mix(h, b"u");
                    mix(h, &u.to_le_bytes());
                } else if let Some(i) = n.as_i64() {
                    mix(h, b"i");
                    mix(h, &i.to_le_bytes());
                } else {
                    mix(h, b"d");
                    mix(h, &n.as_f64().unwrap_or(0.0).to_bits().to_le_bytes());
                }
            }
            Value::String(s) => {
                mix(h, b"s");
                mix(h, &s.len().to_le_bytes());
                mix(h, s.as_bytes());
            }
            Value::Array(items) => {
                mix(h, b"a");
                mix(h, &items.len().to_le_bytes());
                for item in items {
                    walk(h, item);
                }
            }
            Value::Object(map) => {
                mix(h, b"o");
                mix(h, &map.len().to_le_bytes());
                for (k, v) in map {
                    mix(h, &k.len().to_le_bytes());
                    mix(h, k.as_bytes());
                    walk(h, v);
                }
            }
        }
    }
    let mut h = 0xcbf2_9ce4_8422_2325;
    walk(&mut h, value);
    h
}

/// How many checked schemas a [`SchemaCache`] keeps.
pub const SCHEMA_CACHE_ENTRIES: usize = 8;
/// How many fingerprints of schemas seen once a [`SchemaCache`] remembers.
const SEEN_ONCE_ENTRIES: usize = 32;
/// The largest schema a [`SchemaCache`] keeps, in bytes of its canonical JSON.
pub const SCHEMA_CACHE_MAX_BYTES: usize = 4096;

/// Form schemas already checked, remembered by value: a server that asks for the same form
/// round after round has it checked and hashed once. The check is a pure function of the
/// schema's value and an entry is used only for an equal value (`1` and `1.0` are different
/// values here, as they are to the check), so the cache never changes a verdict. Refusals are
/// not kept, and a schema is kept from its second acceptance on. Bounded: at most
/// [`SCHEMA_CACHE_ENTRIES`] schemas, each at most [`SCHEMA_CACHE_MAX_BYTES`] of canonical
/// JSON; the oldest goes first.
#[derive(Debug, Default)]
pub struct SchemaCache {
    /// (fingerprint, the schema's value, its verdict), oldest first.
    entries: std::collections::VecDeque<(u64, Value, FormSchema)>,
    /// Fingerprints of schemas accepted once and not kept: a schema is kept the second time
    /// it is seen, so a server whose every schema is new pays no copies for the cache.
    seen_once: std::collections::VecDeque<u64>,
}

impl SchemaCache {
    /// [`check_form_schema`], answered from the cache when this value was accepted before.
    pub fn check(&mut self, schema: &Value) -> Result<FormSchema, GateError> {
        // The fingerprint only narrows the search (one walk instead of one comparison per
        // entry); an entry answers only for a value equal to the one it was checked for.
        let print = fingerprint(schema);
        let known = self
            .entries
            .iter()
            .find(|(p, value, _)| *p == print && value == schema);
        if let Some((_, _, checked)) = known {
            return Ok(checked.clone());
        }
        let (checked, canonical_len) = check_measured(schema)?;
        if canonical_len > SCHEMA_CACHE_MAX_BYTES {
            return Ok(checked);
        }
        if let Some(at) = self.seen_once.iter().position(|p| *p == print) {
            self.seen_once.remove(at);
            if self.entries.len() >= SCHEMA_CACHE_ENTRIES {
                self.entries.pop_front();
            }
            self.entries
                .push_back((print, schema.clone(), checked.clone()));
        } else {
            if self.seen_once.len() >= SEEN_ONCE_ENTRIES {
                self.seen_once.pop_front();
            }
            self.seen_once.push_back(print);
        }
        Ok(checked)
    }

    /// How many schemas are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none is.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::check_form_schema;
    use serde_json::json;

    fn one_field(max_length: Value) -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": max_length}}})
    }

    #[test]
    fn the_schema_cache_gives_the_checks_own_verdicts() {
        let mut cache = SchemaCache::default();
        let good = one_field(json!(5));
        let first = cache.check(&good);
        assert_eq!(first, check_form_schema(&good));
        assert!(first.is_ok());
        assert!(cache.is_empty(), "kept from the second acceptance on");
        assert_eq!(cache.check(&good), first);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.check(&good), first, "a hit is the same verdict");
        // `1.0` is another value than `1` to the cache (its own entry), though the check
        // takes both as the count 1; `1.5` is refused.
        let one = one_field(json!(1));
        let one_point_zero = one_field(json!(1.0));
        let one_point_five = one_field(json!(1.5));
        for _ in 0..2 {
            assert!(cache.check(&one).is_ok());
        }
        assert_eq!(cache.len(), 2);
        for _ in 0..2 {
            assert_eq!(
                cache.check(&one_point_zero),
                check_form_schema(&one_point_zero)
            );
        }
        assert!(check_form_schema(&one_point_zero).is_ok());
        assert_eq!(cache.len(), 3);
        for _ in 0..2 {
            assert!(cache.check(&one_point_five).is_err());
        }
        assert!(check_form_schema(&one_point_five).is_err());
        // Refusals are not kept.
        assert_eq!(cache.len(), 3);
        for _ in 0..2 {
            assert!(cache.check(&json!({"type": "object"})).is_err());
        }
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn the_schema_cache_is_bounded() {
        let mut cache = SchemaCache::default();
        for n in 0..(SCHEMA_CACHE_ENTRIES as u64 * 3) {
            for _ in 0..2 {
                assert!(cache.check(&one_field(json!(n + 1))).is_ok());
            }
            assert!(cache.len() <= SCHEMA_CACHE_ENTRIES);
        }
        assert_eq!(cache.len(), SCHEMA_CACHE_ENTRIES);
        // Schemas seen once are not kept, however many pass.
        let mut cache = SchemaCache::default();
        for n in 0..1000 {
            assert!(cache.check(&one_field(json!(n + 1))).is_ok());
        }
        assert!(cache.is_empty());
        // A schema over the size bound is checked but not kept.
        let long = "x".repeat(SCHEMA_CACHE_MAX_BYTES);
        let big = json!({"type": "object", "title": long,
            "properties": {"name": {"type": "string"}}});
        for _ in 0..3 {
            assert!(cache.check(&big).is_ok());
        }
        assert!(cache.is_empty());
    }
}
