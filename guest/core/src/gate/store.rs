//! Live bindings in the host's storage: load, store, consume and remove, each change a
//! compare-and-swap on the version read, so instances sharing a store can never both consume
//! one round. The records read or written are remembered ([`RecordCache`], whose invariant
//! `gate::memo` states).

use crate::error::{GateError, HostFault};
use crate::gate::memo::RecordCache;
use crate::gate::record::{Binding, id_key, is_record};
use crate::host::{HostError, ReadKey, Storage, Versioned, Write};
use crate::ids::RequestId;
use crate::ids::ServerIdentity;
use std::rc::Rc;

/// How long an expired binding stays in storage so its end can still be audited.
pub const EXPIRY_GRACE_MS: u64 = 60_000;

pub(crate) fn storage_failed(e: HostError) -> GateError {
    GateError::Host(HostFault::StorageFailed(e.message))
}

fn corrupted() -> GateError {
    GateError::Host(HostFault::StorageCorrupted)
}

/// The bindings of one gate instance's storage, with the last records it read or wrote.
#[derive(Default)]
pub(crate) struct BindingStore {
    /// Saves parsing and, where an operation's only effect is one compare-and-swap, the read
    /// before it ([`BindingStore::current`]). Never decides anything on its own.
    cache: RecordCache,
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
    /// [`RecordCache::current`]: the binding held that uses `id`, with its version, no read.
    pub(crate) fn current(
        &self,
        server: &ServerIdentity,
        server_key: &str,
        id: &RequestId,
    ) -> Option<(Rc<Binding>, u64)> {
        self.cache.current(server, server_key, id)
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
        self.load_and_probe(storage, server, server_key, id, None)
            .map(|(found, _)| found)
    }

    /// [`Self::load`], and in the same storage call whether `probe` (another key) is live.
    /// `None` when the probe was not asked for or the binding was not found.
    pub(crate) fn load_and_probe(
        &mut self,
        storage: &dyn Storage,
        server: &ServerIdentity,
        server_key: &Rc<str>,
        id: &RequestId,
        probe: Option<&str>,
    ) -> Result<(Option<Found>, Option<bool>), GateError> {
        let key = id_key(server_key, id);
        // A retry id's key holds a pointer to the original id, whose key holds the record.
        // When a cached binding uses `id` as a retry id, its record is read in the same
        // call (a guess: the pointer still decides).
        let guess = self.cache.original_of_retry_id(server_key, id);
        let guess_key = guess.as_ref().map(|g| id_key(server_key, g));
        // For a record this instance holds, the version it holds: a record still at that
        // version is not sent again (the cache below has it).
        let mut keys: Vec<ReadKey<'_>> = Vec::with_capacity(3);
        keys.push(ReadKey {
            key: &key,
            have: self.cache.held(server_key, id),
        });
        if let (Some(g), Some(gk)) = (&guess, &guess_key) {
            keys.push(ReadKey {
                key: gk,
                have: self.cache.held(server_key, g),
            });
        }
        if let Some(probe) = probe {
            keys.push(ReadKey::from(probe));
        }
        let haves: Vec<u64> = keys.iter().map(|k| k.have).collect();
        let mut found = storage.read(&keys).map_err(storage_failed)?;
        if found.len() != keys.len() {
            return Err(short_read());
        }
        // The probe is the last key asked for: taken off first, so the rest read as before.
        let probed = match probe {
            Some(_) => found.pop().map(|entry| entry.is_present()),
            None => None,
        };
        let mut found = found.into_iter();
        let Some(first) = found.next().ok_or_else(short_read)?.present() else {
            return Ok((None, None));
        };
        // The version of the pointer the record was found through, when it was.
        let mut pointer_version = None;
        // Held: at the version this instance holds, and the store withheld the value.
        let is_held =
            |have: u64, v: &Versioned| have != 0 && have == v.version && v.value.is_empty();
        // The original id: one read. A retry id: its pointer, then the record.
        let (original, stored) =
            if is_held(haves.first().copied().unwrap_or(0), &first) || is_record(&first.value) {
                (id.clone(), first)
            } else {
                let original: RequestId =
                    serde_json::from_str(&first.value).map_err(|_| corrupted())?;
                if original == *id {
                    return Err(corrupted());
                }
                pointer_version = Some(first.version);
                let (record, have) = match (guess, found.next()) {
                    (Some(g), Some(read)) if g == original => {
                        (read, haves.get(1).copied().unwrap_or(0))
                    }
                    (Some(_), None) => return Err(short_read()),
                    _ => {
                        let key = id_key(server_key, &original);
                        let have = self.cache.held(server_key, &original);
                        let read = storage
                            .read(&[ReadKey { key: &key, have }])
                            .map_err(storage_failed)?
                            .into_iter()
                            .next()
                            .ok_or_else(short_read)?;
                        (read, have)
                    }
                };
                let Some(stored) = record.present() else {
                    return Ok((None, None));
                };
                if !is_held(have, &stored) && !is_record(&stored.value) {
                    return Err(corrupted());
                }
                (original, stored)
            };
        let binding = match self.cache.withheld(server_key, &original, &stored) {
            Some(b) => b,
            None => {
                let b = Binding::decode_at(&stored.value, stored.version)?;
                // A record under another server's key, or another id's: not written by a
                // gate (and never cached, so it cannot stand in for the record it names).
                if b.fixed.original_id != original || b.fixed.server != *server {
                    return Err(corrupted());
                }
                // The key part is a pure function of the server, just checked equal.
                b.fixed.server_key.set(Rc::clone(server_key));
                let b = Rc::new(b);
                self.cache.remember(stored.version, Rc::clone(&b));
                b
            }
        };
        // The server whole, not only its key part: a cached binding was checked when it was
        // cached, but the key part is a truncated digest (`ServerIdentity::key_part`).
        if binding.fixed.server != *server || !binding.used_ids.contains(id) {
            return Err(corrupted());
        }
        let binding = match pointer_version {
            Some(v) => self.learn_pointer_version(binding, id, v),
            None => binding,
        };
        Ok((Some((binding, stored.version)), probed))
    }

    /// Note in `binding` (and its cached copy) the version of `id`'s pointer just read,
    /// when its record did not know it (a pointer written in the same call as the record,
    /// [`Self::consume`], by another instance): ending the binding then deletes the pointer
    /// with one compare-and-swap, no read first. The next record written carries it.
    fn learn_pointer_version(
        &mut self,
        binding: Rc<Binding>,
        id: &RequestId,
        v: u64,
    ) -> Rc<Binding> {
        let Some(at) = alias_index(&binding, id) else {
            return binding;
        };
        if binding.alias_versions.get(at) != Some(&UNKNOWN_VERSION) {
            return binding;
        }
        self.cache.set_alias_version(binding, at, v)
    }

    /// Write `binding` if its record is still at `expected` (absent when 0). A lost
    /// compare-and-swap is `state_already_used`; the binding comes back with the error.
    pub(crate) fn store(
        &mut self,
        storage: &dyn Storage,
        now: u64,
        binding: Binding,
        expected: u64,
    ) -> Result<(Rc<Binding>, u64), (GateError, Box<Binding>)> {
        let write = match Owned::store(&binding, now, expected) {
            Ok(w) => w,
            Err(e) => return Err((e, Box::new(binding))),
        };
        let applied = storage.write(&[write.as_write()]).map_err(storage_failed);
        self.stored(binding, applied)
    }

    /// What a store of `binding` wrote (`applied`, as [`Storage::write`] returns for the one
    /// write of [`Owned::store`]): the binding as the store holds it now, with its version, or
    /// why not (a lost compare-and-swap is `state_already_used`).
    pub(crate) fn stored(
        &mut self,
        binding: Binding,
        applied: Result<Vec<u64>, GateError>,
    ) -> Result<(Rc<Binding>, u64), (GateError, Box<Binding>)> {
        match applied.map(|a| a.first().copied()) {
            Ok(Some(v)) => {
                let mut binding = binding;
                binding.binding_version.get_or_insert(v);
                let binding = Rc::new(binding);
                self.cache.remember(v, Rc::clone(&binding));
                Ok((binding, v))
            }
            Ok(None) => Err((
                GateError::Host(HostFault::StateAlreadyUsed),
                Box::new(binding),
            )),
            Err(e) => Err((e, Box::new(binding))),
        }
    }

    /// The binding behind `rc`, owned: the cached copy is dropped first, so the usual case
    /// (no other holder) takes it without a copy.
    pub(crate) fn take(&mut self, rc: Rc<Binding>) -> Binding {
        self.cache.forget(&rc);
        Rc::unwrap_or_clone(rc)
    }

    /// What a consume wrote (`applied`, as [`Storage::write`] returns for `writes`,
    /// [`ConsumeWrites`]): the binding moved on, with its record's version, or why not. A
    /// record that moved on gives the pointer back.
    pub(crate) fn consumed(
        &mut self,
        storage: &dyn Storage,
        mut next: Binding,
        retry_id: &RequestId,
        writes: &ConsumeWrites,
        applied: Result<Vec<u64>, GateError>,
    ) -> Result<(Rc<Binding>, u64), (Consume, Box<Binding>)> {
        let applied = match applied {
            Ok(applied) => applied,
            Err(e) => return Err((Consume::Failed(e), Box::new(next))),
        };
        match applied.as_slice() {
            [] => Err((Consume::RetryIdTaken, Box::new(next))),
            [pointer] => {
                // Best effort: a pointer left behind names this binding and expires with it.
                let _ = storage.write(&[delete(&writes.pointer.key, *pointer)]);
                Err((Consume::RecordMoved, Box::new(next)))
            }
            [pointer, record, ..] => {
                if let Some(known) =
                    alias_index(&next, retry_id).and_then(|at| next.alias_versions.get_mut(at))
                {
                    *known = *pointer;
                }
                let next = Rc::new(next);
                self.cache.remember(*record, Rc::clone(&next));
                Ok((next, *record))
            }
        }
    }

    /// Delete `binding`'s pointer for retry id `id` if it still names the binding (best effort).
    fn delete_alias(
        storage: &dyn Storage,
        binding: &Binding,
        id: &RequestId,
    ) -> Result<(), GateError> {
        let original = &binding.fixed.original_id;
        let key = binding.id_key(id);
        let read = storage
            .read(&[ReadKey::from(key.as_str())])
            .map_err(storage_failed)?;
        if let Some(v) = read.first().filter(|v| v.is_present()) {
            let points_here = !is_record(&v.value)
                && serde_json::from_str::<RequestId>(&v.value)
                    .is_ok_and(|target| &target == original);
            if points_here {
                storage
                    .write(&[delete(&key, v.version)])
                    .map_err(storage_failed)?;
            }
        }
        Ok(())
    }

    /// Ok when the record at `key` is still at `version` (one read, the value withheld);
    /// `inactive_mrtr_round` when it is gone (ended, expired, or lost by the store),
    /// `state_already_used` when it was written since.
    pub(crate) fn still_at(
        storage: &dyn Storage,
        key: &str,
        version: u64,
    ) -> Result<(), GateError> {
        let read = storage
            .read(&[ReadKey { key, have: version }])
            .map_err(storage_failed)?;
        match read.as_slice() {
            [found] if found.version == version => Ok(()),
            [found] if !found.is_present() => {
                Err(GateError::from(crate::error::CallerMisuse::InactiveRound))
            }
            [_] => Err(GateError::Host(HostFault::StateAlreadyUsed)),
            _ => Err(short_read()),
        }
    }

    /// Remove a binding (record first: that is the atomic step) and its retry ids' pointers.
    /// A record no longer at `version` is `state_already_used`.
    pub(crate) fn remove(
        &mut self,
        storage: &dyn Storage,
        binding: &Binding,
        version: u64,
    ) -> Result<(), GateError> {
        match self.remove_if_current(storage, binding, version)? {
            true => Ok(()),
            false => Err(GateError::Host(HostFault::StateAlreadyUsed)),
        }
    }

    /// [`Self::remove`], false (and nothing removed) when the record is no longer at
    /// `version`.
    pub(crate) fn remove_if_current(
        &mut self,
        storage: &dyn Storage,
        binding: &Binding,
        version: u64,
    ) -> Result<bool, GateError> {
        let removal = self.removal(binding, version);
        let applied = storage
            .write(&removal.as_writes())
            .map_err(storage_failed)?;
        Self::removed(storage, binding, &removal, applied.len())
    }

    /// The writes that remove `binding` at `version`: the record and every pointer whose
    /// version the binding wrote, in one call (the writes stop at the first that does not
    /// apply, so a lost record leaves every pointer in place). The record is forgotten here.
    pub(crate) fn removal(&mut self, binding: &Binding, version: u64) -> Removal {
        self.cache.forget(binding);
        let record = Owned::delete(binding.key(), version);
        let pointers = binding
            .used_ids
            .iter()
            .skip(1)
            .enumerate()
            .map(|(i, id)| {
                let known = binding.alias_versions.get(i).copied();
                (binding.id_key(id), known.filter(|v| *v != UNKNOWN_VERSION))
            })
            .collect();
        Removal { record, pointers }
    }

    /// After a removal's batch applied `applied` writes: false when the record was not at its
    /// version (nothing removed); else the pointers the batch did not reach, each on its own,
    /// and true. The one it stopped at lost (it expired or was replaced: either way not ours
    /// to delete); a pointer whose version the record does not know is read first.
    pub(crate) fn removed(
        storage: &dyn Storage,
        binding: &Binding,
        removal: &Removal,
        applied: usize,
    ) -> Result<bool, GateError> {
        if applied == 0 {
            return Ok(false);
        }
        let batched = removal.batched();
        let retry_ids = binding.used_ids.iter().skip(1);
        for (i, (id, (key, v))) in retry_ids.zip(&removal.pointers).enumerate() {
            let at = i.saturating_add(1);
            if at < applied || (at == applied && at < batched) {
                continue;
            }
            match v {
                Some(v) => {
                    storage.write(&[delete(key, *v)]).map_err(storage_failed)?;
                }
                None => Self::delete_alias(storage, binding, id)?,
            }
        }
        Ok(true)
    }
}

/// One write, owning its key and value (a batch is built of these, then lent as [`Write`]s).
#[derive(Clone)]
pub(crate) struct Owned {
    pub(crate) key: String,
    expected: u64,
    value: Option<String>,
    ttl_ms: u64,
}

impl Owned {
    /// The write of `binding`'s record over version `expected` (0: absent).
    pub(crate) fn store(binding: &Binding, now: u64, expected: u64) -> Result<Self, GateError> {
        Ok(Self {
            key: binding.key(),
            expected,
            value: Some(binding.encode()?),
            ttl_ms: ttl(binding, now),
        })
    }

    fn delete(key: String, version: u64) -> Self {
        Self {
            key,
            expected: version,
            value: None,
            ttl_ms: 0,
        }
    }

    pub(crate) fn as_write(&self) -> Write<'_> {
        Write {
            key: &self.key,
            expected: self.expected,
            value: self.value.as_deref(),
            ttl_ms: self.ttl_ms,
        }
    }
}

/// The two writes of a consume: the pointer that reserves the retry id, then the record
/// moved on to it.
pub(crate) struct ConsumeWrites {
    pointer: Owned,
    record: Owned,
}

impl ConsumeWrites {
    /// The pointer that reserves `retry_id` for `next` (written only if the id is not live,
    /// on any binding of the server) and then `next`, the binding moved on to `retry_id`
    /// (written only if the record is still at `expected`). `next` already lists `retry_id`
    /// among its ids; its pointer's version is not known when the record is written, so the
    /// record says [`UNKNOWN_VERSION`] and the cached copy the version the store gave.
    pub(crate) fn new(
        next: &Binding,
        now: u64,
        expected: u64,
        retry_id: &RequestId,
    ) -> Result<Self, GateError> {
        let target = serde_json::to_string(&next.fixed.original_id).map_err(|_| corrupted())?;
        let record = Owned::store(next, now, expected)?;
        let pointer = Owned {
            key: next.id_key(retry_id),
            expected: 0,
            value: Some(target),
            ttl_ms: record.ttl_ms,
        };
        Ok(Self { pointer, record })
    }

    pub(crate) fn as_writes(&self) -> [Write<'_>; 2] {
        [self.pointer.as_write(), self.record.as_write()]
    }

    pub(crate) fn owned(&self) -> Vec<Owned> {
        vec![self.pointer.clone(), self.record.clone()]
    }
}

/// The writes that remove a binding: its record, then each retry id's pointer whose version
/// is known, up to the first that is not ([`BindingStore::removal`]).
pub(crate) struct Removal {
    record: Owned,
    /// Each retry id's pointer key, with its version when the binding knows it.
    pointers: Vec<(String, Option<u64>)>,
}

impl Removal {
    pub(crate) fn as_writes(&self) -> Vec<Write<'_>> {
        let mut writes = Vec::with_capacity(self.pointers.len().saturating_add(1));
        writes.push(self.record.as_write());
        writes.extend(
            self.pointers
                .iter()
                .map_while(|(key, v)| v.map(|v| delete(key, v))),
        );
        writes
    }

    /// How many writes [`Self::as_writes`] holds.
    fn batched(&self) -> usize {
        self.pointers
            .iter()
            .take_while(|(_, v)| v.is_some())
            .count()
            .saturating_add(1)
    }
}

/// A binding found in storage, with its record's version.
pub(crate) type Found = (Rc<Binding>, u64);

/// Why [`BindingStore::consume`] wrote nothing.
pub(crate) enum Consume {
    /// The retry id is live on the server (another binding's, or being taken right now).
    RetryIdTaken,
    /// The record is no longer at the version read: another instance moved first.
    RecordMoved,
    /// The store failed, or the binding could not be written.
    Failed(GateError),
}

/// An alias version not known yet: a store never gives a present key version 0.
pub(crate) const UNKNOWN_VERSION: u64 = 0;

/// Where `id`'s pointer version sits in `binding.alias_versions` (`used_ids` after the
/// original, in order).
fn alias_index(binding: &Binding, id: &RequestId) -> Option<usize> {
    binding.used_ids.iter().skip(1).position(|used| used == id)
}

/// A delete of `key` at `version`.
fn delete(key: &str, version: u64) -> Write<'_> {
    Write {
        key,
        expected: version,
        value: None,
        ttl_ms: 0,
    }
}

/// A store that answered fewer entries than keys asked for.
pub(crate) fn short_read() -> GateError {
    GateError::Host(HostFault::StorageFailed(
        "the store returned fewer entries than keys".into(),
    ))
}
