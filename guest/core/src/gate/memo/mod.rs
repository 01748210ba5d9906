//! What the gate remembers to go faster, all in one place. No memo decides anything: each
//! stands in only for a value it can prove unchanged, so an instance with every memo empty
//! (a fresh one) gives the same verdicts, events and storage effects, only slower. The
//! invariant each one relies on, stated once:
//!
//! - [`RecordCache`], the records this instance last read or wrote, each with its storage
//!   version. A store never gives a key the same version twice, not even after it lost its
//!   data or its counter (versions carry the store's life: the `storage` contract in
//!   `wit/gate.wit`). So a record the store reports still at the version held, withholding
//!   its value, is the one cached; a value the store sends is judged as sent. Where an
//!   operation's one effect is a compare-and-swap on the version held
//!   ([`RecordCache::current`]), the swap itself proves the cached record current.
//! - [`SchemaCache`], form schemas checked before: the check is a pure function of the
//!   schema's value, and an entry answers only for an equal value.
//! - [`PrincipalDigests`], the last user, tenant and server digested: pure functions of
//!   their text.
//! - [`OriginMemo`], the last server URL normalised (kept by the component, where the URL
//!   arrives): a pure function of the URL's text.
//! - [`Derived`], a binding's or an open round's event fields, rendered on first use: they
//!   are computed from fields that never change once the binding or the round exists.
//! - [`CallClock`], the time of the current call, read once: a call waits on nothing but
//!   the user, and the clock is read again after the user ([`CallClock::resume`]).
//!
//! What each is worth in a form round is measured with the memo turned off, counted as
//! `./scripts/instructions` counts (docs/performance.md, "What each memo is worth"). One
//! worth less than 2% of a round is not kept, except [`CallClock`], which is also what makes
//! a call judge everything at one time.

mod records;
mod schemas;

pub(crate) use records::RecordCache;
#[cfg(test)]
pub use schemas::SCHEMA_CACHE_ENTRIES;
pub use schemas::SchemaCache;

use super::MAX_TIME_MS;
use crate::digest;
use crate::error::{GateError, HostFault};
use crate::host::Clock;
use crate::ids::ServerIdentity;
use std::cell::{Cell, OnceCell};
use std::rc::Rc;

/// The time of the current call, read from the clock once per call (each import call
/// costs, most on hosts such as jco and wasmtime-py).
#[derive(Default)]
pub(crate) struct CallClock(Cell<Option<u64>>);

impl CallClock {
    /// A call starts: the clock is read, and a time no JSON number or JavaScript host carries
    /// exactly is refused (a host that returned -1 through an unchecked binding would
    /// otherwise set every expiry at the end of time).
    #[inline]
    pub(crate) fn begin(&self, clock: &dyn Clock) -> Result<(), GateError> {
        let now = clock.now_ms();
        if now > MAX_TIME_MS {
            self.0.set(None);
            return Err(GateError::Host(HostFault::ClockOutOfRange(now)));
        }
        self.0.set(Some(now));
        Ok(())
    }

    /// The call goes on after waiting on the user: the clock is read again. Refused as
    /// [`Self::begin`], keeping the time the call began.
    #[inline]
    pub(crate) fn resume(&self, clock: &dyn Clock) -> Result<(), GateError> {
        let began = self.0.get();
        self.begin(clock).inspect_err(|_| self.0.set(began))
    }

    /// The time of the current call (were it missing, the end of the range makes everything
    /// expired: fail closed).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.0.get().unwrap_or(MAX_TIME_MS)
    }
}

/// A value derived from fields that never change once set, computed on first use.
#[derive(Clone, Debug)]
pub(crate) struct Derived<T>(OnceCell<T>);

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Derived<T> {
    /// Not computed yet.
    #[inline]
    pub(crate) fn new() -> Self {
        Self(OnceCell::new())
    }

    /// Already known (computed by a memo that has it).
    #[inline]
    pub(crate) fn known(value: T) -> Self {
        Self(OnceCell::from(value))
    }

    /// Known from now on, unless it already was (the same value: it is derived).
    #[inline]
    pub(crate) fn set(&self, value: T) {
        let _ = self.0.set(value);
    }

    /// The value, computed by `f` the first time.
    #[inline]
    pub(crate) fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(f)
    }
}

/// The last user and tenant digested, each with its digest, and the last server with what
/// the gate derives from it: a client registers request after request for the same ones.
#[derive(Default)]
pub(crate) struct PrincipalDigests {
    user: Option<(String, String)>,
    tenant: Option<(String, String)>,
    server: Option<(ServerIdentity, ServerDigests)>,
}

/// What the gate derives from a server by hashing it.
#[derive(Clone)]
pub(crate) struct ServerDigests {
    /// Its redacted form, as the trail records it (canonical JSON text).
    pub(crate) audited: Rc<str>,
    /// Its part of the storage keys ([`ServerIdentity::key_part`]).
    pub(crate) key: Rc<str>,
}

impl PrincipalDigests {
    #[inline]
    pub(crate) fn user(&mut self, user: &str) -> String {
        remembered(&mut self.user, user)
    }

    #[inline]
    pub(crate) fn tenant(&mut self, tenant: &str) -> String {
        remembered(&mut self.tenant, tenant)
    }

    /// The server's redacted form and key part.
    #[inline]
    pub(crate) fn server(&mut self, server: &ServerIdentity) -> ServerDigests {
        if let Some((s, digests)) = self.server.as_ref()
            && s == server
        {
            return digests.clone();
        }
        let digests = ServerDigests {
            audited: super::record::json_string(&server.audited()),
            key: Rc::from(server.key_part()),
        };
        self.server = Some((server.clone(), digests.clone()));
        digests
    }
}

/// `digest::digest_str(text)`, from `last` when it is the text digested last time.
fn remembered(last: &mut Option<(String, String)>, text: &str) -> String {
    if let Some((t, digest)) = last.as_ref()
        && t == text
    {
        return digest.clone();
    }
    let digest = digest::digest_str(text);
    *last = Some((text.to_owned(), digest.clone()));
    digest
}

/// The last server URL normalised, with its result: a client talks to one server for many
/// calls, and normalising parses the URL. Kept by a host binding (the component), where the
/// URL arrives as text.
#[derive(Debug, Default)]
pub struct OriginMemo(Option<(String, ServerIdentity)>);

impl OriginMemo {
    /// [`ServerIdentity::origin`] of `url`, from the memo when it is the URL normalised last.
    pub fn origin(&mut self, url: String) -> Result<ServerIdentity, GateError> {
        if let Some((raw, normal)) = &self.0
            && *raw == url
        {
            return Ok(normal.clone());
        }
        let normal = ServerIdentity::origin(&url)?;
        self.0 = Some((url, normal.clone()));
        Ok(normal)
    }
}
