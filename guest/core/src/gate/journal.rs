//! A store write and the audit line that records it, in one host call
//! ([`crate::host::journal`]; WIT `journal`): the round stored after its `received` line, the
//! round consumed after its `consented` line, the retry handed out after its `submitted` line,
//! the binding removed before its `terminal` line. Each call is defined as the two calls it
//! stands for, in order, so every rule the gate keeps about their order holds for a host that
//! makes them one by one as for one that makes them in one step; the gate relies on nothing
//! more (a host that cannot tell which step failed answers `err`, taken as the first step's).

use super::record::Binding;
use super::store::{BindingStore, Owned, storage_failed};
use super::{Gate, TerminalOutcome};
use crate::audit::{Event, append_failed};
use crate::error::GateError;
use crate::host::{Host, Journaled, Order, Write, journal};

/// What the writes of a journal call did: the versions applied, or the store's failure after
/// the line was confirmed.
pub(super) type Applied = Result<Vec<u64>, GateError>;

impl<H: Host> Gate<H> {
    /// `event` audited, then the writes `writes_for` makes for the entry's `seq`, in one
    /// journal call ([`Order::AppendThenWrite`]): the writes go only once the line is
    /// confirmed. Each time another writer's event gets in first, the record at `still`
    /// (its key and the version it must still be at), when given, is read again (a binding
    /// ended or changed meanwhile gets no line after its end: `inactive_mrtr_round` or
    /// `state_already_used`), and both are offered again on the new head. Returns the
    /// line's `seq` and what the writes did; `Err` when the line was not confirmed (nothing
    /// written).
    pub(super) fn audit_then_write(
        &mut self,
        event: Event,
        still: Option<(&str, u64)>,
        mut writes_for: impl FnMut(u64) -> Result<Vec<Owned>, GateError>,
    ) -> Result<(u64, Applied), GateError> {
        let now = self.now();
        let host = &self.host;
        let offered = self.chain.offer_while(
            event,
            now,
            || match still {
                Some((key, version)) => BindingStore::still_at(host.storage(), key, version),
                None => Ok(()),
            },
            |entry| {
                let owned = writes_for(entry.seq)?;
                let writes: Vec<Write<'_>> = owned.iter().map(Owned::as_write).collect();
                let j = journal(
                    host.storage(),
                    host.audit(),
                    Order::AppendThenWrite,
                    entry,
                    &writes,
                )
                .map_err(|e| append_failed(e.message))?;
                let Journaled {
                    applied,
                    appended,
                    failed,
                } = j;
                let appended =
                    appended.ok_or_else(|| append_failed("the journal offered no line".into()))?;
                if !appended.written && (!applied.is_empty() || failed.is_some()) {
                    return Err(append_failed(
                        "the journal wrote to the store without the line".into(),
                    ));
                }
                let applied = match failed {
                    Some(e) => Err(storage_failed(e)),
                    None => Ok(applied),
                };
                Ok(Some((appended, applied)))
            },
        )?;
        offered.ok_or_else(|| append_failed("the journal offered no line".into()))
    }

    /// `writes` (their first the atomic step), then `event` in the same journal call
    /// ([`Order::WriteThenAppend`]) when that first write applied; the line offered again on
    /// its own when another writer's event got in first. Returns what the writes applied
    /// (empty: nothing written, nothing audited) and whether the line was then confirmed;
    /// `Err` when the writes failed.
    pub(super) fn write_then_audit(
        &mut self,
        writes: &[Write<'_>],
        event: Event,
    ) -> Result<(Vec<u64>, Result<(), GateError>), GateError> {
        let now = self.now();
        let host = &self.host;
        let mut applied: Option<Result<Vec<u64>, GateError>> = None;
        let offered = self.chain.offer_while(
            event,
            now,
            || Ok(()),
            |entry| {
                if applied.is_some() {
                    let outcome = host
                        .audit()
                        .append(entry)
                        .map_err(|e| append_failed(e.message))?;
                    return Ok(Some((outcome, ())));
                }
                let j = match journal(
                    host.storage(),
                    host.audit(),
                    Order::WriteThenAppend,
                    entry,
                    writes,
                ) {
                    Ok(j) => j,
                    Err(e) => {
                        let e = storage_failed(e);
                        applied = Some(Err(e.clone()));
                        return Err(e);
                    }
                };
                let wrote = !j.applied.is_empty();
                applied = Some(Ok(j.applied));
                if !wrote {
                    return match j.appended {
                        None => Ok(None),
                        Some(_) => Err(append_failed(
                            "the journal offered the line after writes that did not apply".into(),
                        )),
                    };
                }
                if let Some(e) = j.failed {
                    return Err(append_failed(e.message));
                }
                let outcome = j
                    .appended
                    .ok_or_else(|| append_failed("the journal offered no line".into()))?;
                Ok(Some((outcome, ())))
            },
        );
        match applied {
            // Never offered: the writer refused first (a sink that lost lines writes no more).
            // The writes are made all the same: an ending stands whether or not its line can be.
            None => {
                let refused = offered
                    .err()
                    .unwrap_or_else(|| append_failed("the journal offered no line".into()));
                let applied = host.storage().write(writes).map_err(storage_failed)?;
                Ok((applied, Err(refused)))
            }
            Some(Err(e)) => Err(e),
            Some(Ok(applied)) => Ok((applied, offered.map(|_| ()))),
        }
    }

    /// After a journal call that failed as a whole (`err`): a host that makes both steps at
    /// once may have made them before it failed (a `WAIT` that fell short), so the writes of a
    /// step the gate denied may be in the store. The binding is read again and, when `left`
    /// finds it as those writes left it, ended with `code` (terminal `error`): nothing rests on
    /// a step the gate refused. A host that makes the two calls one by one never leaves it so
    /// (its writes follow a confirmed line): the read finds the binding as it was, or gone.
    pub(super) fn end_if_left(
        &mut self,
        binding: &Binding,
        code: &str,
        left: impl Fn(&Binding) -> bool,
    ) {
        let found = self.store.load(
            self.host.storage(),
            &binding.fixed.server,
            binding.fixed.server_key(),
            &binding.fixed.original_id,
        );
        if let Ok(Some((found, version))) = found
            && left(&found)
        {
            let _ = self.end(&found, version, TerminalOutcome::Error, Some(code));
        }
    }
}
