//! Which principal opened which protocol session (2025-era `Mcp-Session-Id`), when the proxy
//! names each caller from trusted headers: a session belongs to the client that opened it,
//! and a request of anyone else's naming it (a POST, a GET stream, a DELETE that would end
//! its open rounds) is answered as the specification answers an unknown session, 404, which
//! tells the caller nothing about whose it is.

use crate::engine::Principal;
use std::collections::{HashMap, VecDeque};

/// How many sessions are remembered; past it the oldest is forgotten (a session the proxy
/// does not know is the upstream's to judge, as one opened before the proxy started is).
pub const MAX_SESSIONS: usize = 65_536;

/// The owner of every session opened through this proxy.
#[derive(Debug, Default)]
pub struct Sessions {
    owners: HashMap<String, Principal>,
    order: VecDeque<String>,
}

impl Sessions {
    /// `owner` opened `session`.
    pub fn opened(&mut self, session: &str, owner: &Principal) {
        if self
            .owners
            .insert(session.to_owned(), owner.clone())
            .is_none()
        {
            self.order.push_back(session.to_owned());
        }
        while self.order.len() > MAX_SESSIONS {
            if let Some(oldest) = self.order.pop_front() {
                self.owners.remove(&oldest);
            }
        }
    }

    /// Whether `who` may name `session`: its owner, or anyone for a session this proxy did
    /// not see opened.
    pub fn may_use(&self, session: &str, who: &Principal) -> bool {
        self.owners.get(session).is_none_or(|owner| owner == who)
    }

    /// How many sessions `who` holds.
    pub fn held_by(&self, who: &Principal) -> usize {
        self.owners.values().filter(|owner| *owner == who).count()
    }

    /// `session` ended.
    pub fn closed(&mut self, session: &str) {
        if self.owners.remove(session).is_some() {
            self.order.retain(|s| s != session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(user: &str) -> Principal {
        Principal {
            user: user.into(),
            tenant: "acme".into(),
        }
    }

    #[test]
    fn a_session_is_its_openers_alone_until_it_ends() {
        let mut s = Sessions::default();
        s.opened("s1", &who("alice"));
        assert!(s.may_use("s1", &who("alice")));
        assert!(!s.may_use("s1", &who("bob")));
        assert!(s.may_use("unknown", &who("bob")));
        s.closed("s1");
        assert!(s.may_use("s1", &who("bob")));
    }

    #[test]
    fn the_oldest_is_forgotten_past_the_cap() {
        let mut s = Sessions::default();
        for n in 0..=MAX_SESSIONS {
            s.opened(&n.to_string(), &who("alice"));
        }
        assert!(s.may_use("0", &who("bob")), "forgotten");
        assert!(!s.may_use("1", &who("bob")));
        assert_eq!(s.owners.len(), MAX_SESSIONS);
    }
}
