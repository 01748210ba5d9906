//! What one principal may hold of the proxy at once over HTTP: protocol sessions, requests in
//! flight, and bytes queued for its event streams. Clients of one listener are each other's
//! neighbours; without these a single client could take every session slot (and with them the
//! others' ownership), every connection's worth of calls, or the memory of events queued for a
//! reader that never reads. Each cap is per principal (the one named by trusted headers, or
//! the configured one every client shares), and each is a typed refusal or, for queued bytes,
//! the upstream's reader waiting (nothing of the server's is dropped).

use super::answer::ProxyBody;
use crate::engine::Principal;
use crate::errors::Refusal;
use crate::ids::MAX_MESSAGE_BYTES;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tokio::sync::Semaphore;

/// The caps ([`super::HttpOptions::caps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Protocol sessions (2025-era `Mcp-Session-Id`) a principal may hold open; one more is
    /// refused `too_many_sessions` (HTTP 429), and the upstream's new session is deleted.
    pub sessions: usize,
    /// Requests (POSTs) of a principal's in flight at once, streamed answers until their
    /// stream ends; one more is refused `too_many_in_flight` (HTTP 429).
    pub in_flight: usize,
    /// Bytes queued for a principal's event streams (GET streams and streamed answers) that
    /// its clients have not read yet; past it the upstream's readers wait.
    pub queued_bytes: usize,
}

/// Sessions a principal may hold by default: more than any one client opens.
pub const DEFAULT_SESSIONS: usize = 64;
/// Requests a principal may have in flight by default.
pub const DEFAULT_IN_FLIGHT: usize = 256;
/// Bytes queued by default: two messages at their cap.
pub const DEFAULT_QUEUED_BYTES: usize = 2 * MAX_MESSAGE_BYTES;

impl Default for Caps {
    fn default() -> Self {
        Self {
            sessions: DEFAULT_SESSIONS,
            in_flight: DEFAULT_IN_FLIGHT,
            queued_bytes: DEFAULT_QUEUED_BYTES,
        }
    }
}

/// Whom a cap counts against: the named principal, or (`None`) the configured one.
type Who = Option<Principal>;

/// The running counts behind [`Caps`].
#[derive(Debug)]
pub struct Allowances {
    caps: Caps,
    in_flight: Mutex<HashMap<Who, usize>>,
    queued: Mutex<HashMap<Who, Arc<Semaphore>>>,
}

impl Allowances {
    /// Counts against `caps`.
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self {
            caps,
            in_flight: Mutex::default(),
            queued: Mutex::default(),
        })
    }

    /// The caps counted against.
    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// A request of `who`'s starts: counted until the guard is dropped, or refused when
    /// `who` has [`Caps::in_flight`] already.
    pub fn enter(self: &Arc<Self>, who: &Who) -> Result<InFlight, Refusal> {
        let mut counts = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry(who.clone()).or_default();
        if *n >= self.caps.in_flight {
            return Err(Refusal::message(
                "too_many_in_flight",
                format!(
                    "{} requests of this principal are in flight already",
                    self.caps.in_flight
                ),
            ));
        }
        *n += 1;
        Ok(InFlight {
            allowances: Arc::clone(self),
            who: who.clone(),
        })
    }

    /// The bytes `who` may have queued for its event streams.
    pub fn queue(&self, who: &Who) -> Arc<Semaphore> {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        // Let go of the allowances nobody holds or uses (all their bytes back), so the map
        // keeps only the principals with a stream open.
        if queued.len() > 1024 {
            let full = self.caps.queued_bytes;
            queued.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < full);
        }
        Arc::clone(
            queued
                .entry(who.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(self.caps.queued_bytes))),
        )
    }

    #[cfg(test)]
    fn counted(&self, who: &Who) -> usize {
        let counts = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.get(who).copied().unwrap_or(0)
    }
}

/// A request counted in flight until dropped.
#[derive(Debug)]
pub struct InFlight {
    allowances: Arc<Allowances>,
    who: Who,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self
            .allowances
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.who) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.who);
            }
        }
    }
}

impl InFlight {
    /// `body`, with the request counted in flight until the client has read it whole (or
    /// gone): a streamed answer is in flight for as long as it streams.
    pub fn holding(self, body: ProxyBody) -> ProxyBody {
        Holding { body, _held: self }.boxed()
    }
}

struct Holding {
    body: ProxyBody,
    _held: InFlight,
}

impl Body for Holding {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(user: &str) -> Who {
        Some(Principal {
            user: user.into(),
            tenant: "acme".into(),
        })
    }

    #[test]
    fn requests_in_flight_are_counted_per_principal_and_freed_when_done() {
        let a = Allowances::new(Caps {
            in_flight: 2,
            ..Caps::default()
        });
        let first = a.enter(&who("alice")).unwrap();
        let _second = a.enter(&who("alice")).unwrap();
        let refused = a.enter(&who("alice")).unwrap_err();
        assert_eq!(refused.code, "too_many_in_flight");
        // Another principal, and the shared one, have their own count.
        let _bob = a.enter(&who("bob")).unwrap();
        let _shared = a.enter(&None).unwrap();
        drop(first);
        assert_eq!(a.counted(&who("alice")), 1);
        assert!(a.enter(&who("alice")).is_ok());
    }

    #[test]
    fn each_principal_has_its_own_queue_allowance() {
        let a = Allowances::new(Caps {
            queued_bytes: 10,
            ..Caps::default()
        });
        let alice = a.queue(&who("alice"));
        let held = alice.clone().try_acquire_many_owned(10).unwrap();
        assert!(a.queue(&who("alice")).try_acquire_many(1).is_err());
        assert!(a.queue(&who("bob")).try_acquire_many(10).is_ok());
        drop(held);
        assert_eq!(a.queue(&who("alice")).available_permits(), 10);
    }
}
