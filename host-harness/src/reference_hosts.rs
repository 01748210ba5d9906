//! Reference host services. The in-memory ones come from the core (so native tests use the
//! very same code); this module adds the durable audit file ([`FileAudit`]) and the terminal
//! prompt ([`TerminalConsent`]).

mod file_audit;
mod terminal_consent;

pub use file_audit::{FileAudit, FileAuditError};
pub use mrtr_gate_core::memory::{
    AuditFault, ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
    SystemClock,
};
pub use terminal_consent::TerminalConsent;
