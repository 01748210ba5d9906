//! What every operation asks of a live binding, and how any binding ends: expired or not,
//! a clock gone back before it, the end itself (remove, then the `terminal` event), and the
//! end that follows a denial.

use super::record::Binding;
use super::store::BindingStore;
use super::{CLOCK_SKEW_TOLERANCE_MS, Gate, TerminalOutcome};
use crate::audit::{Event, EventKind, Field};
use crate::error::{Denial, GateError, HostFault};
use crate::host::{ConsentMethod, Host};
use std::rc::Rc;

impl<H: Host> Gate<H> {
    /// End a binding: remove it, then audit the terminal event (when the binding had
    /// audited anything: plain requests that never saw a round leave no trail).
    pub(super) fn end(
        &mut self,
        binding: &Binding,
        version: u64,
        outcome: TerminalOutcome,
        reason: Option<&str>,
    ) -> Result<(), GateError> {
        match self.end_if_current(binding, version, outcome, reason, None)? {
            true => Ok(()),
            false => Err(GateError::Host(HostFault::StateAlreadyUsed)),
        }
    }

    /// [`Self::end`]; false, with nothing removed or audited, when the record is no longer
    /// at `version`. `policy` is the receipt id of the host's policy that refused the round
    /// (`finish(policy-denied)`), recorded with method `policy_hook`.
    pub(super) fn end_if_current(
        &mut self,
        binding: &Binding,
        version: u64,
        outcome: TerminalOutcome,
        reason: Option<&str>,
        policy: Option<&str>,
    ) -> Result<bool, GateError> {
        if !binding.audited {
            return self
                .store
                .remove_if_current(self.host.storage(), binding, version);
        }
        let mut e = binding
            .event(EventKind::Terminal)
            .set_str(Field::Outcome, outcome.as_str());
        if let Some(r) = reason {
            e = e.set(Field::Reason, r);
        }
        if let Some(id) = policy {
            e = e
                .set_str(Field::ConsentMethod, ConsentMethod::PolicyHook.as_str())
                .set(Field::ConsentReceiptId, id);
        }
        // Removed, then audited, in one journal call: only the removal's winner audits.
        let removal = self.store.removal(binding, version);
        let (applied, audited) = self.write_then_audit(&removal.as_writes(), e)?;
        if !BindingStore::removed(self.host.storage(), binding, &removal, applied.len())? {
            return Ok(false);
        }
        audited.map(|()| true)
    }

    /// Deny, and end the binding: the bound server misbehaved, or the binding expired
    /// (fail closed). The terminal event's reason is the denial's code.
    pub(super) fn fail_binding(
        &mut self,
        binding: Rc<Binding>,
        version: u64,
        error: GateError,
        outcome: TerminalOutcome,
    ) -> Denial {
        let event = binding.event(EventKind::Rejected);
        let denial = self.deny(error, event);
        let mut binding = self.store.take(binding);
        binding.audited = true;
        let code = denial.error.code();
        let _ = self.end(&binding, version, outcome, Some(code));
        denial
    }

    pub(super) fn expired(&self, binding: &Binding) -> bool {
        self.now() >= binding.fixed.expires_at_ms
    }

    /// The denial for a clock that reads more than the skew tolerance before `binding` was
    /// registered, if it does. The binding is left as it is (the clock, not the binding, is
    /// wrong) and the refusal is audited with the time the clock gave.
    pub(super) fn clock_behind(
        &mut self,
        binding: &Binding,
        event: impl FnOnce() -> Event,
    ) -> Option<Denial> {
        let now = self.now();
        self.is_clock_behind(binding)
            .then(|| self.deny(GateError::Host(HostFault::ClockBehindBinding(now)), event()))
    }

    /// Whether the clock reads more than the skew tolerance before `binding` was registered.
    pub(super) fn is_clock_behind(&self, binding: &Binding) -> bool {
        self.now().saturating_add(CLOCK_SKEW_TOLERANCE_MS) < binding.fixed.created_at_ms
    }
}
