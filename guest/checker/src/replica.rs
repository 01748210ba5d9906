//! Asynchronous replication, as Redis Cluster does it: a master applies each write at once; its
//! replica takes the master's writes later, in the order applied, one per replication step
//! ([`crate::world::Fault::Replicate`], placed anywhere by the scheduler), so it lags by any
//! number of writes; a promotion makes what the replica holds the master's, and every write it
//! did not hold yet is lost. When the host confirms a write to the gate is the rule under test
//! ([`Confirm`]).

use std::collections::{BTreeSet, VecDeque};

/// When the host tells the gate a write (a storage batch, an audit append) succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirm {
    /// As soon as the master applied it: one server's behaviour, and a Cluster's before the
    /// rule (a write confirmed may still be lost by a promotion).
    Unconfirmed,
    /// Only once the replica holds it (`WAIT 1` in the same round trip, host-harness/redis):
    /// a write the replica does not hold when the WAIT ends (a promotion lost it, or the WAIT
    /// timed out) is a host error for the call, though the master applied it.
    WaitForReplica,
}

/// Which services of the world run as a master with a replica, and the host's rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replication {
    /// The store is replicated.
    pub store: bool,
    /// The audit sink is replicated.
    pub sink: bool,
    /// When a write to a replicated service is confirmed.
    pub confirm: Confirm,
}

impl Replication {
    /// One server each, as every configuration before replication was modelled.
    pub const NONE: Self = Self {
        store: false,
        sink: false,
        confirm: Confirm::Unconfirmed,
    };

    /// Store and sink replicated, writes confirmed as `confirm` says.
    pub fn both(confirm: Confirm) -> Self {
        Self {
            store: true,
            sink: true,
            confirm,
        }
    }
}

/// A replicated service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// The store.
    Store,
    /// The audit sink.
    Sink,
}

/// Where one write stands, as a WAIT on it would find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The replica holds it.
    Held,
    /// Only the master holds it so far.
    Pending,
    /// A promotion lost it.
    Lost,
}

/// One service's replica: what it holds (`S`) and the writes (`W`) the master applied that it
/// does not hold yet, each numbered in the order the master applied them.
#[derive(Debug)]
pub struct Replica<S, W> {
    held: S,
    pending: VecDeque<(u64, W)>,
    /// How many writes the master applied: their numbers are 1 to this.
    numbered: u64,
    /// The numbers a promotion lost.
    lost: BTreeSet<u64>,
}

impl<S: Clone, W> Replica<S, W> {
    /// A replica holding `held`, nothing pending.
    pub fn new(held: S) -> Self {
        Self {
            held,
            pending: VecDeque::new(),
            numbered: 0,
            lost: BTreeSet::new(),
        }
    }

    /// The replica holds `master` and nothing is pending: a full copy (the start of a run, and
    /// the new replica after a promotion).
    pub fn settle(&mut self, master: S) {
        self.held = master;
        self.pending.clear();
    }

    /// The master applied `write`: its number, for the WAIT on it.
    pub fn applied(&mut self, write: W) -> u64 {
        self.numbered = self.numbered.saturating_add(1);
        self.pending.push_back((self.numbered, write));
        self.numbered
    }

    /// One replication step: the replica takes the oldest write it does not hold. Its number,
    /// or `None` when it held every write already.
    pub fn take_one(&mut self, apply: impl Fn(&mut S, W)) -> Option<u64> {
        let (number, write) = self.pending.pop_front()?;
        apply(&mut self.held, write);
        Some(number)
    }

    /// The replica takes every write up to `number` (a WAIT that ends in time: the replica
    /// acknowledges an offset, so every earlier write with it).
    pub fn take_through(&mut self, number: u64, apply: impl Fn(&mut S, W)) {
        while self.pending.front().is_some_and(|(n, _)| *n <= number) {
            self.take_one(&apply);
        }
    }

    /// Where write `number` stands.
    pub fn held(&self, number: u64) -> Held {
        if self.lost.contains(&number) {
            Held::Lost
        } else if self.pending.iter().any(|(n, _)| *n == number) {
            Held::Pending
        } else {
            Held::Held
        }
    }

    /// The replica is promoted: what it holds becomes the master's (returned), every write it
    /// did not hold is lost (how many: the second value). The caller settles the new replica.
    pub fn promote(&mut self) -> (S, usize) {
        let lost = self.pending.len();
        self.lost.extend(self.pending.drain(..).map(|(n, _)| n));
        (self.held.clone(), lost)
    }

    /// Every write still pending, oldest first (a store fault that changes every copy changes
    /// them too).
    pub fn pending_mut(&mut self) -> impl Iterator<Item = &mut W> {
        self.pending.iter_mut().map(|(_, w)| w)
    }

    /// What the replica holds, to change in place (a fault that acts on every copy).
    pub fn held_mut(&mut self) -> &mut S {
        &mut self.held
    }

    /// Drop the newest pending write, if any (lost before it reached the replica).
    pub fn drop_newest_pending(&mut self) -> bool {
        match self.pending.pop_back() {
            Some((n, _)) => {
                self.lost.insert(n);
                true
            }
            None => false,
        }
    }
}
