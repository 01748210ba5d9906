//! How bindings end on request: `finish` (the caller's side) and `expire-stale` (the
//! lifetime passed). The steps every ending shares are [`super::lifecycle`]'s.

use super::record::{Binding, ID_PREFIX, is_record};
use super::store::{EXPIRY_GRACE_MS, short_read, storage_failed};
use super::{CallerOutcome, FinishRequest, Gate, TerminalOutcome};
use crate::audit::{EventKind, Field};
use crate::error::{CallerMisuse, Denial, GateError, HostFault};
use crate::host::{Host, HostError, ReadKey, Versioned};
use crate::policy::limits;
use std::rc::Rc;

/// How many due keys `expire-stale` asks for in one `list-due` page (and reads in one call).
pub const EXPIRE_PAGE: u32 = 64;

/// How many `list-due` pages one `expire-stale` call goes through at most (so at most
/// `EXPIRE_PAGE * EXPIRE_MAX_PAGES` due keys a call, records and retry pointers alike, each
/// ending a write and an audit append: within the call's deadline on a remote store); what
/// is still due after them is left to the next call, which starts the listing afresh.
pub const EXPIRE_MAX_PAGES: u32 = 32;

/// The longest reason code a caller may give for ending a binding.
const MAX_REASON_BYTES: usize = 64;

/// The `terminal` reason of a binding a host's policy refused (`finish(policy-denied)`).
const POLICY_DENIED: &str = "policy_denied";

/// The binding as `finish` ends it: one the caller ends with an error is audited even when
/// it saw no round (a plain request otherwise leaves no trail), so the trail says why a
/// request ended abnormally, e.g. a host adapter that refused the server's first answer
/// (docs/adapters.md).
fn on_record_if_error(
    binding: &Binding,
    terminal: TerminalOutcome,
) -> std::borrow::Cow<'_, Binding> {
    if terminal == TerminalOutcome::Error && !binding.audited {
        let mut marked = binding.clone();
        marked.audited = true;
        std::borrow::Cow::Owned(marked)
    } else {
        std::borrow::Cow::Borrowed(binding)
    }
}

impl<H: Host> Gate<H> {
    pub(super) fn finish_binding(&mut self, r: FinishRequest) -> Result<TerminalOutcome, Denial> {
        let server_key = self.principals.server(&r.server).key;
        // The binding this instance holds, ended with no read first when its record is still
        // the one held (the removal's compare-and-swap says so); anything else is decided on
        // what storage holds now.
        if let Some((binding, version)) = self.store.current(&r.server, &server_key, &r.request_id)
            && binding.fixed.user == r.user
            && binding.fixed.tenant == r.tenant
            && !self.is_clock_behind(&binding)
        {
            let (terminal, reason, policy) = self.finish_outcome(&binding, &r.outcome);
            let binding = on_record_if_error(&binding, terminal);
            match self.end_if_current(
                &binding,
                version,
                terminal,
                reason.as_deref(),
                policy.as_deref(),
            ) {
                Ok(true) => return Ok(terminal),
                Ok(false) => {}
                Err(e) => return Err(Denial::unaudited(e)),
            }
        }
        let (binding, version) = self
            .store
            .load(self.host.storage(), &r.server, &server_key, &r.request_id)
            .map_err(Denial::unaudited)?
            .ok_or_else(|| Denial::unaudited(GateError::from(CallerMisuse::UnknownRequest)))?;
        if binding.fixed.user != r.user || binding.fixed.tenant != r.tenant {
            // Only the binding's own principal may end it: the attempt is audited, the
            // binding left as it was (not even expired on another user's behalf).
            let event = binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, r.request_id.to_json());
            return Err(self.deny(
                GateError::from(CallerMisuse::IdentityOrArgumentMismatch),
                event,
            ));
        }
        let rejected = || {
            binding
                .event(EventKind::Rejected)
                .set(Field::LiveId, r.request_id.to_json())
        };
        if let Some(denied) = self.clock_behind(&binding, rejected) {
            return Err(denied);
        }
        let (terminal, reason, policy) = self.finish_outcome(&binding, &r.outcome);
        let binding = on_record_if_error(&binding, terminal);
        let ended = self
            .end_if_current(
                &binding,
                version,
                terminal,
                reason.as_deref(),
                policy.as_deref(),
            )
            .map_err(Denial::unaudited)?;
        if !ended {
            return Err(Denial::unaudited(GateError::Host(
                HostFault::StateAlreadyUsed,
            )));
        }
        Ok(terminal)
    }

    /// How `finish` ends `binding`, the reason it records, and the refusing policy's receipt
    /// id.
    fn finish_outcome(
        &self,
        binding: &Binding,
        outcome: &CallerOutcome,
    ) -> (TerminalOutcome, Option<String>, Option<String>) {
        if self.expired(binding) {
            return (TerminalOutcome::Expired, None, None);
        }
        match outcome {
            CallerOutcome::Cancelled => (TerminalOutcome::Cancelled, None, None),
            CallerOutcome::PolicyDenied(id) => {
                // The same rule as a consent receipt's id: what the trail may hold of it.
                let is_id = !id.is_empty()
                    && id.len() <= limits::MAX_RECEIPT_ID_BYTES
                    && id.bytes().all(|b| b.is_ascii_graphic());
                (
                    TerminalOutcome::Error,
                    Some(POLICY_DENIED.to_owned()),
                    is_id.then(|| id.clone()),
                )
            }
            CallerOutcome::Error(code) => {
                // The reason goes into the audit trail: codes only, never caller text.
                let is_code = !code.is_empty()
                    && code.len() <= MAX_REASON_BYTES
                    && code
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                let reason = if is_code {
                    code.clone()
                } else {
                    "caller_error".to_owned()
                };
                (TerminalOutcome::Error, Some(reason), None)
            }
        }
    }

    /// End every binding past its lifetime. Only what storage lists as due is read: a
    /// binding's record lives until `expires_at + EXPIRY_GRACE_MS` (its TTL, store.rs), so
    /// the records due by `now + EXPIRY_GRACE_MS` are exactly those whose lifetime has passed
    /// (`expired`). The listing comes a page of at most [`EXPIRE_PAGE`] keys at a time, each
    /// page read in one call; at most [`EXPIRE_MAX_PAGES`] pages a call, the rest left to the
    /// next call. A store that lists more than asked, or hands back the cursor it was given
    /// (it would page forever), is a storage fault: denied.
    pub(super) fn expire_bindings(&mut self) -> Result<u32, Denial> {
        let due_by = self.now().saturating_add(EXPIRY_GRACE_MS);
        let fault = |m: &str| Denial::unaudited(storage_failed(HostError::new(m)));
        let mut ended = 0u32;
        let mut cursor: Option<String> = None;
        for _ in 0..EXPIRE_MAX_PAGES {
            let page = self
                .host
                .storage()
                .list_due(due_by, cursor.as_deref(), EXPIRE_PAGE)
                .map_err(|e| Denial::unaudited(storage_failed(e)))?;
            if page.keys.len() > EXPIRE_PAGE as usize {
                return Err(fault("storage listed more due keys than asked for"));
            }
            if page.next.is_some() && page.next == cursor {
                return Err(fault("storage returned the same list-due cursor twice"));
            }
            // Only the gate's own keys (a shared store may list others).
            let keys: Vec<&str> = page
                .keys
                .iter()
                .map(String::as_str)
                .filter(|k| k.starts_with(ID_PREFIX))
                .collect();
            if !keys.is_empty() {
                let refs: Vec<ReadKey<'_>> = keys.iter().map(|&k| ReadKey::from(k)).collect();
                let entries = self
                    .host
                    .storage()
                    .read(&refs)
                    .map_err(|e| Denial::unaudited(storage_failed(e)))?;
                if entries.len() != keys.len() {
                    return Err(Denial::unaudited(short_read()));
                }
                for (key, found) in keys.into_iter().zip(entries) {
                    let Some(found) = found.present() else {
                        continue;
                    };
                    if self.expire_one(key, found)? {
                        ended = ended.saturating_add(1);
                    }
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        Ok(ended)
    }

    /// End the binding stored under `key` if it is a record past its lifetime; true when
    /// this call ended it.
    fn expire_one(&mut self, key: &str, found: Versioned) -> Result<bool, Denial> {
        // Pointers are skipped: their record is listed under its own key.
        if !is_record(&found.value) {
            return Ok(false);
        }
        // Only what `load` would accept: this format, under its own original id's key.
        let Ok(binding) = Binding::decode_at(&found.value, found.version) else {
            return Ok(false);
        };
        if binding.key() != key || !self.expired(&binding) {
            return Ok(false);
        }
        // This instance's copy at the same version may know more (its pointers' versions:
        // deleted with no read first).
        let (server, original) = (&binding.fixed.server, &binding.fixed.original_id);
        let binding = match self
            .store
            .current(server, binding.fixed.server_key(), original)
        {
            Some((held, version)) if version == found.version => held,
            _ => Rc::new(binding),
        };
        match self.end(&binding, found.version, TerminalOutcome::Expired, None) {
            Ok(()) => Ok(true),
            // Someone else ended or changed it meanwhile: theirs is the last word.
            Err(GateError::Host(HostFault::StateAlreadyUsed)) => Ok(false),
            Err(e) => Err(Denial::unaudited(e)),
        }
    }
}
