//! Reference host services. The in-memory ones come from the core (so native tests use the
//! very same code); this module adds the durable audit file ([`FileAudit`]), the terminal
//! prompt ([`TerminalConsent`]), decisions recorded ahead of the prompt ([`DecidedConsent`])
//! and, for its tests, a pseudo-terminal (`PseudoTerminal`).

mod decided_consent;
mod file_audit;
pub(crate) mod group_sync;
#[cfg(unix)]
mod pseudo_terminal;
mod receipt_ids;
mod terminal_consent;

pub use decided_consent::DecidedConsent;
pub use file_audit::{FileAudit, FileAuditError, create_private_dir};
pub use mrtr_gate_core::memory::{
    AuditFault, ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
    SystemClock,
};
#[cfg(unix)]
pub use pseudo_terminal::PseudoTerminal;
pub use receipt_ids::ReceiptIds;
pub use terminal_consent::TerminalConsent;
#[cfg(unix)]
pub use terminal_consent::discard_typed_ahead;
