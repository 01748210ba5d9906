//! The four services a gate runs over, shared by the component ([`crate::ComponentGate`],
//! through the wasmtime imports) and the native core ([`crate::NativeGate`]).

use mrtr_gate_core::host::{Audit, Clock, Consent, Storage};
use std::sync::Arc;

/// A clock usable from any thread.
pub type SharedClock = Arc<dyn Clock + Send + Sync>;
/// A store usable from any thread.
pub type SharedStorage = Arc<dyn Storage + Send + Sync>;
/// A consent provider usable from any thread.
pub type SharedConsent = Arc<dyn Consent + Send + Sync>;
/// An audit sink usable from any thread.
pub type SharedAudit = Arc<dyn Audit + Send + Sync>;

/// The four services a gate runs over. Cloning shares them (they are `Arc`s): gates built
/// over clones of one `HostServices` see one store, one audit chain and one clock.
#[derive(Clone)]
pub struct HostServices {
    /// Milliseconds since the Unix epoch: when a binding was registered, when its round
    /// trips expire, and the time stamped on every audit event.
    pub clock: SharedClock,
    /// Where every live binding is kept, with its TTL; the gate consumes a round with a
    /// compare-and-swap on it. Share one store between instances (or processes) that must
    /// see each other's rounds: that is what stops two of them retrying one round.
    pub storage: SharedStorage,
    /// Shows the user the consent view and the answers about to be sent, and returns a
    /// receipt bound to both; a retry that carries the user's answers is built only on a
    /// granted receipt.
    pub consent: SharedConsent,
    /// The append-only sink of the hash-chained audit trail. Each event is appended only
    /// if it extends the sink's head and is read back before anything rests on it.
    pub audit: SharedAudit,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostServices")
    }
}

impl mrtr_gate_core::host::Host for HostServices {
    fn clock(&self) -> &dyn Clock {
        &*self.clock
    }
    fn storage(&self) -> &dyn Storage {
        &*self.storage
    }
    fn consent(&self) -> &dyn Consent {
        &*self.consent
    }
    fn audit(&self) -> &dyn Audit {
        &*self.audit
    }
}
