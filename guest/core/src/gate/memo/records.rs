//! The records this instance last read or wrote, each with the exact storage version it had
//! (the invariant that makes them safe to use is stated in the parent module).

use crate::gate::record::Binding;
use crate::host::Versioned;
use crate::ids::{RequestId, ServerIdentity};
use std::collections::VecDeque;
use std::rc::Rc;

/// How many parsed records the cache keeps.
const RECORD_CACHE_SIZE: usize = 32;

/// Parsed records by version. A cached binding may know more than its record: the version of
/// a retry id's pointer written in the same call as the record
/// ([`crate::gate::store::BindingStore::consume`]); nothing else differs. An entry is found
/// by its binding's original id and server key (the parts of its storage key): comparing ids
/// first makes a miss cost a few instructions, where comparing the long keys of one server
/// did not.
#[derive(Default)]
pub(crate) struct RecordCache {
    entries: VecDeque<(u64, Rc<Binding>)>,
}

/// Whether `binding` is the one whose record lives under (`server_key`, `original`).
fn stored_under(binding: &Binding, server_key: &str, original: &RequestId) -> bool {
    binding.fixed.original_id == *original && &**binding.fixed.server_key() == server_key
}

impl RecordCache {
    /// The cached binding for the record of (`server_key`, `original`) as `stored` reports
    /// it: only when the store withheld the value at the version held. A value sent is
    /// judged as sent (a store that sends one at the version the gate holds broke the read
    /// contract, or a host wrapper chose to let the gate read it again), never stood in for
    /// by the copy held.
    #[inline]
    pub(crate) fn withheld(
        &self,
        server_key: &str,
        original: &RequestId,
        stored: &Versioned,
    ) -> Option<Rc<Binding>> {
        self.entries
            .iter()
            .find(|(v, b)| {
                *v == stored.version
                    && stored.value.is_empty()
                    && stored_under(b, server_key, original)
            })
            .map(|(_, b)| Rc::clone(b))
    }

    /// The version of the record of (`server_key`, `original`) this instance holds (0: none,
    /// the storage import's encoding): what a read tells the store it holds.
    #[inline]
    pub(crate) fn held(&self, server_key: &str, original: &RequestId) -> u64 {
        self.entries
            .iter()
            .rev()
            .find(|(_, b)| stored_under(b, server_key, original))
            .map_or(0, |(v, _)| *v)
    }

    /// Remember `binding`, read or written at `version`: only a binding whose record lives
    /// under its own original id's key (checked by the caller).
    pub(crate) fn remember(&mut self, version: u64, binding: Rc<Binding>) {
        self.forget(&binding);
        if self.entries.len() >= RECORD_CACHE_SIZE {
            self.entries.pop_front();
        }
        self.entries.push_back((version, binding));
    }

    pub(crate) fn forget(&mut self, binding: &Binding) {
        let (server_key, original) = (binding.fixed.server_key(), &binding.fixed.original_id);
        self.entries
            .retain(|(_, b)| !stored_under(b, server_key, original));
    }

    /// The binding on `server` this instance last read or wrote that uses `id`, with the
    /// version it had then, without asking storage: it may be out of date. Only for an
    /// operation whose one effect is a compare-and-swap on that version (which fails if it
    /// is out of date, and the operation then starts again from a read).
    #[inline]
    pub(crate) fn current(
        &self,
        server: &ServerIdentity,
        server_key: &str,
        id: &RequestId,
    ) -> Option<(Rc<Binding>, u64)> {
        self.entries
            .iter()
            .rev()
            .find(|(_, b)| &**b.fixed.server_key() == server_key && b.used_ids.contains(id))
            // The whole server, not only its key part (a truncated digest).
            .filter(|(_, b)| b.fixed.server == *server)
            .map(|(v, b)| (Rc::clone(b), *v))
    }

    /// The original id of the cached binding that uses `id` as a retry id: a guess at the
    /// record a pointer read will name (the pointer still decides).
    #[inline]
    pub(crate) fn original_of_retry_id(
        &self,
        server_key: &str,
        id: &RequestId,
    ) -> Option<RequestId> {
        self.entries
            .iter()
            .rev()
            .map(|(_, b)| b)
            .find(|b| {
                b.fixed.original_id != *id
                    && &**b.fixed.server_key() == server_key
                    && b.used_ids.contains(id)
            })
            .map(|b| b.fixed.original_id.clone())
    }

    /// Set alias version `at` of `binding` to `v` in the cached copy (changed in place when
    /// the cache then holds the only copy), and give the cached copy back; `binding` as it
    /// was when it is not cached.
    pub(crate) fn set_alias_version(
        &mut self,
        binding: Rc<Binding>,
        at: usize,
        v: u64,
    ) -> Rc<Binding> {
        let Some((_, cached)) = self
            .entries
            .iter_mut()
            .find(|(_, b)| Rc::ptr_eq(b, &binding))
        else {
            return binding;
        };
        drop(binding);
        if let Some(known) = Rc::make_mut(cached).alias_versions.get_mut(at) {
            *known = v;
        }
        Rc::clone(cached)
    }
}
