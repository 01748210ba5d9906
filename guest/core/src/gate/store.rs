//! Live bindings in the host's storage: load, store, reserve and remove, each change a
//! compare-and-swap on the version read, so instances sharing a store can never both consume
//! one round. The cache here only saves parsing; it never decides anything.

use crate::error::{GateError, HostFault};
use crate::gate::record::{Binding, id_key, is_record};
use crate::host::{CasOutcome, HostError, Storage, Versioned};
use crate::ids::RequestId;
use crate::ids::ServerIdentity;
use std::collections::VecDeque;
use std::rc::Rc;

/// How long an expired binding stays in storage so its end can still be audited.
pub const EXPIRY_GRACE_MS: u64 = 60_000;

/// How many parsed records the cache keeps.
const RECORD_CACHE_SIZE: usize = 32;

pub(crate) fn storage_failed(e: HostError) -> GateError {
    GateError::Host(HostFault::StorageFailed(e.message))
}

fn corrupted() -> GateError {
    GateError::Host(HostFault::StorageCorrupted)
}

/// The bindings of one gate instance's storage, with the last records it read or wrote.
#[derive(Default)]
pub(crate) struct BindingStore {
    /// The last records read or written, with the exact version and length they had: a
    /// record whose version and length are unchanged in storage parses to the same value, so
    /// the parse is skipped. An entry is found by its binding's original id and server key
    /// (the parts of its storage key): comparing ids first makes a miss cost a few
    /// instructions, where comparing the long keys of one server did not (measured in wasm).
    cache: VecDeque<(u64, usize, Rc<Binding>)>,
}

/// Whether `binding` is the one whose record lives under (`server_key`, `original`).
fn stored_under(binding: &Binding, server_key: &str, original: &RequestId) -> bool {
    binding.fixed.original_id == *original && binding.fixed.server_key() == server_key
}

/// A binding's storage lifetime: its own, plus the grace in which its end is still audited.
fn ttl(binding: &Binding, now: u64) -> u64 {
    binding
        .fixed
        .expires_at_ms
        .saturating_sub(now)
        .saturating_add(EXPIRY_GRACE_MS)
}

impl BindingStore {
    fn cached(
        &self,
        server_key: &str,
        original: &RequestId,
        stored: &Versioned,
    ) -> Option<Rc<Binding>> {
        self.cache
            .iter()
            // The store's contract: a key's version changes on every write and is never
            // reused. Version and length are checked, not every byte (a byte compare of
            // every record is measurable in wasm); a host that broke the contract would
            // at worst get back the record this gate itself wrote.
            .find(|(v, len, b)| {
                *v == stored.version
                    && *len == stored.value.len()
                    && stored_under(b, server_key, original)
            })
            .map(|(_, _, b)| Rc::clone(b))
    }

    /// Remember `binding`, read or written at `version`: only a binding whose record lives
    /// under its own original id's key (checked by the caller).
    fn remember(&mut self, version: u64, len: usize, binding: Rc<Binding>) {
        self.forget(&binding);
        if self.cache.len() >= RECORD_CACHE_SIZE {
            self.cache.pop_front();
        }
        self.cache.push_back((version, len, binding));
    }

    fn forget(&mut self, binding: &Binding) {
        let (server_key, original) = (binding.fixed.server_key(), &binding.fixed.original_id);
        self.cache
            .retain(|(_, _, b)| !stored_under(b, server_key, original));
    }

    /// The binding on `server` (whose key part is `server_key`) that uses `id` (as its
    /// original id or a retry id), with its record's version; none when no live binding on
    /// that server uses it.
    pub(crate) fn load(
        &mut self,
        storage: &dyn Storage,
        server: &ServerIdentity,
        server_key: &Rc<str>,
        id: &RequestId,
    ) -> Result<Option<(Rc<Binding>, u64)>, GateError> {
        let key = id_key(server_key, id);
        let Some(first) = storage.get(&key).map_err(storage_failed)? else {
            return Ok(None);
        };
        // The original id: one read. A retry id: its pointer, then the record.
        let (original, stored) = if is_record(&first.value) {
            (id.clone(), first)
        } else {
            let original: RequestId =
                serde_json::from_slice(&first.value).map_err(|_| corrupted())?;
            if original == *id {
                return Err(corrupted());
            }
            let key = id_key(server_key, &original);
            let Some(stored) = storage.get(&key).map_err(storage_failed)? else {
                return Ok(None);
            };
            if !is_record(&stored.value) {
                return Err(corrupted());
            }
            (original, stored)
        };
        let binding = match self.cached(server_key, &original, &stored) {
            Some(b) => b,
            None => {
                let b = Binding::decode(&stored.value)?;
                // A record under another server's key, or another id's: not written by a
                // gate (and never cached, so it cannot stand in for the record it names).
                if b.fixed.original_id != original || b.fixed.server != *server {
                    return Err(corrupted());
                }
                // The key part is a pure function of the server, just checked equal.
                let _ = b.fixed.server_key.set(Rc::clone(server_key));
                let b = Rc::new(b);
                self.remember(stored.version, stored.value.len(), Rc::clone(&b));
                b
            }
        };
        // The server whole, not only its key part: a cached binding was checked when it was
        // cached, but the key part is a truncated digest (`ServerIdentity::key_part`).
        if binding.fixed.server != *server || !binding.used_ids.contains(id) {
            return Err(corrupted());
        }
        Ok(Some((binding, stored.version)))
    }

    /// Write `binding` if its record is still at `expected` (absent when `None`). A lost
    /// compare-and-swap is `state_already_used`; the binding comes back with the error.
    pub(crate) fn store(
        &mut self,
        storage: &dyn Storage,
        now: u64,
        binding: Binding,
        expected: Option<u64>,
    ) -> Result<(Rc<Binding>, u64), (GateError, Box<Binding>)> {
        let bytes = match binding.encode() {
            Ok(b) => b,
            Err(e) => return Err((e, Box::new(binding))),
        };
        let key = binding.key();
        match storage.compare_and_swap(&key, expected, Some(&bytes), ttl(&binding, now)) {
            Ok(CasOutcome::Applied(v)) => {
                let binding = Rc::new(binding);
                self.remember(v, bytes.len(), Rc::clone(&binding));
                Ok((binding, v))
            }
            Ok(CasOutcome::Conflict) => Err((
                GateError::Host(HostFault::StateAlreadyUsed),
                Box::new(binding),
            )),
            Err(e) => Err((storage_failed(e), Box::new(binding))),
        }
    }

    /// The binding behind `rc`, owned: the cached copy is dropped first, so the usual case
    /// (no other holder) takes it without a copy.
    pub(crate) fn take(&mut self, rc: Rc<Binding>) -> Binding {
        self.forget(&rc);
        Rc::unwrap_or_clone(rc)
    }

    /// Reserve `id` for `binding`: the pointer's version, or none when the id is live
    /// elsewhere.
    pub(crate) fn reserve_alias(
        storage: &dyn Storage,
        now: u64,
        id: &RequestId,
        binding: &Binding,
    ) -> Result<Option<u64>, GateError> {
        let target = serde_json::to_vec(&binding.fixed.original_id).map_err(|_| corrupted())?;
        Ok(
            match storage
                .compare_and_swap(&binding.id_key(id), None, Some(&target), ttl(binding, now))
                .map_err(storage_failed)?
            {
                CasOutcome::Applied(v) => Some(v),
                CasOutcome::Conflict => None,
            },
        )
    }

    /// Give an id reserved for `binding` back (best effort: a failure leaves a pointer that
    /// expires).
    pub(crate) fn release_alias(
        storage: &dyn Storage,
        binding: &Binding,
        id: &RequestId,
        version: u64,
    ) {
        let _ = storage.compare_and_swap(&binding.id_key(id), Some(version), None, 0);
    }

    /// Delete `binding`'s pointer for retry id `id` if it still names the binding (best effort).
    fn delete_alias(
        storage: &dyn Storage,
        binding: &Binding,
        id: &RequestId,
    ) -> Result<(), GateError> {
        let original = &binding.fixed.original_id;
        let key = binding.id_key(id);
        if let Some(v) = storage.get(&key).map_err(storage_failed)? {
            let points_here = !is_record(&v.value)
                && serde_json::from_slice::<RequestId>(&v.value)
                    .is_ok_and(|target| &target == original);
            if points_here {
                storage
                    .compare_and_swap(&key, Some(v.version), None, 0)
                    .map_err(storage_failed)?;
            }
        }
        Ok(())
    }

    /// Remove a binding (record first: that is the atomic step) and its retry ids' pointers.
    pub(crate) fn remove(
        &mut self,
        storage: &dyn Storage,
        binding: &Binding,
        version: u64,
    ) -> Result<(), GateError> {
        self.forget(binding);
        match storage
            .compare_and_swap(&binding.key(), Some(version), None, 0)
            .map_err(storage_failed)?
        {
            CasOutcome::Applied(_) => {}
            CasOutcome::Conflict => return Err(GateError::Host(HostFault::StateAlreadyUsed)),
        }
        // The record was the original id's key; then each retry id's pointer.
        for (i, id) in binding.used_ids.iter().skip(1).enumerate() {
            match binding.alias_versions.get(i) {
                // The version we wrote: delete without reading. A conflict means the pointer
                // already expired or was replaced; either way it is not ours to delete.
                Some(&v) => {
                    storage
                        .compare_and_swap(&binding.id_key(id), Some(v), None, 0)
                        .map_err(storage_failed)?;
                }
                None => Self::delete_alias(storage, binding, id)?,
            }
        }
        Ok(())
    }
}
