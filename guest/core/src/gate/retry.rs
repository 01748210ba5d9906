//! `build-retry`: validate the user's answers ([`super::responses`]), check the new id is
//! free, obtain consent for exactly the view and the answers, reserve the id and consume the
//! round in one storage call, audit it, and write the retry from the registered params.
//! `retry-from-client` takes the same path once the client's own retry is found to be the
//! round's request again ([`super::client_retry`]).

use super::client_retry::ClientParams;
use super::record::{Binding, OpenRound, id_key};
use super::responses;
use super::store::{Consume, ConsumeWrites, Owned, UNKNOWN_VERSION, storage_failed};
use super::{Gate, Retry, RetryRequest, TerminalOutcome, request_text};
use crate::audit::{Event, EventKind, Field};
use crate::canonical;
use crate::digest;
use crate::error::{CallerMisuse, Denial, GateError, HostFault};
use crate::host::{ConsentDecision, ConsentPrompt, Host};
use crate::ids::{RequestId, ServerIdentity};
use crate::json::{self, JsonError};
use crate::policy::limits;
use serde_json::Value;

/// A retry checked, its id free and its consent given; the round not yet consumed.
struct Prepared {
    retry_id: RequestId,
    receipt_id: Option<String>,
    /// The `consented` event of the receipt, audited with the consume (none in a state-only
    /// round, which asks nobody).
    consented: Option<Event>,
    /// The retry's params, canonical JSON: the registered ones with the answers (none in a
    /// state-only round) and the state (when the server sent one).
    params: String,
}

/// Who asks for a retry of which round, as the caller claims it.
pub(super) struct Claim<'a> {
    pub(super) server: &'a ServerIdentity,
    pub(super) request_id: &'a RequestId,
    pub(super) retry_id: &'a RequestId,
    pub(super) user: &'a str,
    pub(super) tenant: &'a str,
}

/// Where a retry's answers come from.
pub(super) enum Answers<'a> {
    /// `build-retry`: the caller's `inputResponses`, JSON text.
    Given(&'a str),
    /// `retry-from-client`: the client's method and whole params, held to the binding's
    /// before its answers are read.
    Client {
        method: &'a str,
        params_json: &'a str,
    },
}

impl<H: Host> Gate<H> {
    pub(super) fn retry_round(&mut self, r: RetryRequest) -> Result<Retry, Denial> {
        let claim = Claim {
            server: &r.server,
            request_id: &r.request_id,
            retry_id: &r.retry_id,
            user: &r.user,
            tenant: &r.tenant,
        };
        self.retry_claimed(&claim, Answers::Given(&r.responses_json))
    }

    /// The retry path of both exports: the binding loaded, the claim and the answers
    /// checked, consent obtained, the round consumed and the retry written.
    pub(super) fn retry_claimed(
        &mut self,
        r: &Claim<'_>,
        answers: Answers<'_>,
    ) -> Result<Retry, Denial> {
        let request_id = r
            .request_id
            .clone()
            .validated()
            .map_err(Denial::unaudited)?;
        let server_key = self.principals.server(r.server).key;
        // Whether the retry id is live on the server is read with the binding (one storage
        // call); the reservation itself comes with the consume, below.
        let retry_key = r
            .retry_id
            .clone()
            .validated()
            .ok()
            .map(|id| id_key(&server_key, &id));
        let (binding, version, retry_id_free) = match self.store.load_and_probe(
            self.host.storage(),
            r.server,
            &server_key,
            &request_id,
            retry_key.as_deref(),
        ) {
            Ok((Some((binding, version)), probed)) => (binding, version, probed == Some(false)),
            Ok((None, _)) => {
                let event = self.unbound_event(Some(&request_id), r.server, r.user, r.tenant);
                return Err(self.deny(GateError::from(CallerMisuse::InactiveRound), event));
            }
            Err(e) => {
                let event = self.unbound_event(Some(&request_id), r.server, r.user, r.tenant);
                return Err(self.deny(e, event));
            }
        };
        let rejected = |b: &Binding| {
            b.event(EventKind::Rejected)
                .set(Field::LiveId, request_id.to_json())
                .set(Field::RetryId, r.retry_id.to_json())
        };
        if let Some(denied) = self.clock_behind(&binding, || rejected(&binding)) {
            return Err(denied);
        }
        if self.expired(&binding) {
            return Err(self.fail_binding(
                binding,
                version,
                GateError::from(CallerMisuse::InactiveRound),
                TerminalOutcome::Expired,
            ));
        }
        let prepared = match self.prepare_retry(&binding, r, answers, retry_id_free) {
            Ok(p) => p,
            Err(e) => {
                let event = rejected(&binding);
                return Err(self.deny(e, event));
            }
        };
        let Prepared {
            retry_id,
            receipt_id,
            consented,
            params,
        } = prepared;
        let submitted = binding
            .event(EventKind::Submitted)
            .set_str(Field::Outcome, "accepted")
            .set(Field::ConsentReceiptId, receipt_id.clone())
            .set(Field::RetryId, retry_id.to_json());

        // Single use: reserve the retry id against every live binding on the server and
        // consume the round with a compare-and-swap on the version read, in one storage call.
        let mut next = self.store.take(binding);
        let Some(open) = next.open.take() else {
            return Err(self.deny(
                GateError::from(CallerMisuse::InactiveRound),
                rejected(&next),
            ));
        };
        next.live_id = retry_id.clone();
        // Not handed out until `submitted` is confirmed: no response for it is taken before.
        next.sent = false;
        next.used_ids.push(retry_id.clone());
        next.alias_versions.push(UNKNOWN_VERSION);
        let now = self.now();
        let consumed = match ConsumeWrites::new(&next, now, version, &retry_id) {
            Err(e) => Err((Consume::Failed(e), Box::new(next))),
            // The consent's line, then the consume, in one journal call: a round is consumed
            // only once its consent is in the trail.
            Ok(writes) => match consented {
                Some(consented) => {
                    // As when it was its own append: no read again on a refusal (the consume's
                    // compare-and-swap finds a record that moved).
                    let written = self.audit_then_write(consented, None, |_| Ok(writes.owned()));
                    match written {
                        Ok((_, applied)) => self.store.consumed(
                            self.host.storage(),
                            next,
                            &retry_id,
                            &writes,
                            applied,
                        ),
                        Err(e) => {
                            // A host that made both steps at once may have consumed the round:
                            // that binding, whose retry no one holds, is ended.
                            self.end_if_left(&next, e.code(), |b| b.live_id == retry_id && !b.sent);
                            Err((Consume::Failed(e), Box::new(next)))
                        }
                    }
                }
                None => {
                    let applied = self
                        .host
                        .storage()
                        .write(&writes.as_writes())
                        .map_err(storage_failed);
                    self.store
                        .consumed(self.host.storage(), next, &retry_id, &writes, applied)
                }
            },
        };
        let (next, new_version) = match consumed {
            Ok(stored) => stored,
            Err((why, mut back)) => {
                // The event names the binding as it was: the round it failed to consume.
                back.open = Some(open);
                back.live_id = request_id.clone();
                let event = rejected(&back);
                let e = match why {
                    // Taken since it was read (the consent was audited for a retry that
                    // does not go out; the `rejected` event after it says why).
                    Consume::RetryIdTaken => GateError::from(CallerMisuse::RetryIdNotNew),
                    Consume::RecordMoved => GateError::Host(HostFault::StateAlreadyUsed),
                    Consume::Failed(e) => e,
                };
                return Err(self.deny(e, event));
            }
        };
        // `submitted`, then the retry handed out, in one journal call: from the write on, a
        // response for the retry id is the server's answer to it, so none is taken before
        // `submitted` is confirmed. Each time another writer's event gets in first, the record
        // is read again: a binding ended meanwhile (a concurrent `finish` or `expire-stale`
        // removes it, then audits `terminal`) gets no `submitted` after its end and no retry.
        let now = self.now();
        let mut released = self.store.take(next);
        released.sent = true;
        let handed_out = match Owned::store(&released, now, new_version) {
            Ok(w) => w,
            Err(e) => {
                let _ = self.end(
                    &released,
                    new_version,
                    TerminalOutcome::Error,
                    Some(e.code()),
                );
                return Err(Denial::unaudited(e));
            }
        };
        let key = released.key();
        let written = self.audit_then_write(submitted, Some((&key, new_version)), |_| {
            Ok(vec![handed_out.clone()])
        });
        let applied = match written {
            Ok((_, applied)) => applied,
            Err(
                e @ (GateError::Caller(CallerMisuse::InactiveRound)
                | GateError::Host(HostFault::StateAlreadyUsed)),
            ) => {
                // Ended or changed by another: theirs is the last word (nothing to end here).
                released.sent = false;
                let event = rejected(&released);
                return Err(self.deny(e, event));
            }
            Err(e) => {
                // The round is consumed but the trail does not show it: the retry must not go
                // out. Moved on: a host that made both steps at once marked it handed out, its
                // line unconfirmed; that binding is ended instead.
                released.sent = false;
                if self
                    .end(
                        &released,
                        new_version,
                        TerminalOutcome::Error,
                        Some(e.code()),
                    )
                    .is_err()
                {
                    self.end_if_left(&released, e.code(), |b| b.live_id == retry_id && b.sent);
                }
                return Err(Denial::unaudited(e));
            }
        };
        let next = match self.store.stored(released, applied) {
            Ok((next, _)) => next,
            Err((e, mut back)) => {
                // Ended since `submitted` (its `terminal` follows that event: a retry for a
                // call already ended is not handed out), or a store that failed: a retry no
                // response can be taken for is not handed out either.
                back.sent = false;
                let e = match e {
                    // Only an ending removes a record whose retry is not handed out.
                    GateError::Host(HostFault::StateAlreadyUsed) => {
                        GateError::from(CallerMisuse::InactiveRound)
                    }
                    other => {
                        let code = other.code();
                        let _ = self.end(&back, new_version, TerminalOutcome::Error, Some(code));
                        other
                    }
                };
                let event = rejected(&back);
                return Err(self.deny(e, event));
            }
        };

        Ok(Retry {
            request_json: request_text(&retry_id, &next.fixed.method, &params),
            round: open.number,
            consent_receipt_id: receipt_id,
        })
    }

    /// The `rejected` event of a retry for no binding: what the caller claimed, digested
    /// (no live id: the host found no open round for a client's retry).
    pub(super) fn unbound_event(
        &mut self,
        request_id: Option<&RequestId>,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
    ) -> Event {
        let digests = self.principals.server(server);
        Event::new(EventKind::Rejected, digests.key)
            .set_raw(Field::Server, digests.audited)
            .set(Field::LiveId, request_id.map(RequestId::to_json))
            .set(Field::UserSha256, self.principals.user(user))
            .set(Field::TenantSha256, self.principals.tenant(tenant))
    }

    /// Everything a retry needs before the round is consumed: the checks, the answers, the
    /// retry id found free (`retry_id_free`, read with the binding) and the consent obtained.
    fn prepare_retry(
        &mut self,
        binding: &Binding,
        r: &Claim<'_>,
        answers: Answers<'_>,
        retry_id_free: bool,
    ) -> Result<Prepared, GateError> {
        let open = match (&binding.open, binding.live_id == *r.request_id) {
            (Some(open), true) => open,
            _ => return Err(GateError::from(CallerMisuse::InactiveRound)),
        };
        if open.received_seq == 0 {
            // The gate stores a round only after its `received` event is confirmed: a round
            // without one was not written by this gate.
            return Err(GateError::Host(HostFault::StorageCorrupted));
        }
        let retry_id = r
            .retry_id
            .clone()
            .validated()
            .map_err(|_| GateError::from(CallerMisuse::RetryIdNotNew))?;
        if binding.used_ids.contains(&retry_id) {
            return Err(GateError::from(CallerMisuse::RetryIdNotNew));
        }
        // The params a retry is rebuilt from must be the ones registered: a record read from
        // storage may have been rewritten behind the gate. (A binding this instance registered
        // and still holds in its cache is the one it hashed; the cache is keyed by version.)
        let params_changed = !binding.params_hashed_here
            && (digest::text_sha256_hex(binding.fixed.params_json.get())
                != binding.fixed.params_sha256
                || !sent_form_holds(&binding.fixed));
        if binding.fixed.user != r.user || binding.fixed.tenant != r.tenant || params_changed {
            return Err(GateError::from(CallerMisuse::IdentityOrArgumentMismatch));
        }
        // Read before anything is reserved or asked, so a corrupt record can never leave a
        // `consented` or `submitted` event for a retry that does not go out.
        let registered = canonical::CanonicalObject::parse(binding.fixed.params_json.get())
            .ok_or(GateError::Host(HostFault::StorageCorrupted))?;
        // What the retry is built on: the same members, the client's number digits.
        let params = canonical::CanonicalObject::parse(binding.fixed.sent_params())
            .ok_or(GateError::Host(HostFault::StorageCorrupted))?;
        let responses = match answers {
            Answers::Given(text) => parse_responses(text)?,
            Answers::Client {
                method,
                params_json,
            } => ClientParams::parse(params_json)?.matched(method, binding, open, &registered)?,
        };
        responses::check_responses(&responses, &open.inputs)?;

        // A retry id live on the server (another binding's record or pointer) is refused
        // before consent, so the user is never asked about a retry that cannot go out. (Only
        // an id taken between that read and the consume gets past this: the consume refuses
        // it.)
        if !retry_id_free {
            return Err(GateError::from(CallerMisuse::RetryIdNotNew));
        }

        // Consent: exactly this view, exactly these answers. A state-only round sends
        // nothing of the user's (the spec lets the client retry at once): no prompt.
        let (receipt_id, consented, responses_json) = if open.inputs.is_empty() {
            (None, None, None)
        } else {
            let responses = Value::Object(responses);
            let consented = canonical::to_canonical(&responses);
            match self.consent(binding, open, &consented, &retry_id) {
                // The binding may have expired while the user decided: no retry then. The
                // consent given is on record all the same.
                Ok((_, event)) if self.expired(binding) => {
                    self.audit(event)?;
                    return Err(GateError::from(CallerMisuse::InactiveRound));
                }
                // Sent as consented, each number with the digits it was given (the canonical
                // layout writes an integer past 21 digits with an exponent, which a server
                // reads as a float): the same members in the same order, the same values.
                Ok((id, event)) => (
                    Some(id),
                    Some(event),
                    Some(canonical::to_sent_form(&responses)),
                ),
                Err(e) => return Err(e),
            }
        };

        // Built from the registered params: nothing of an earlier round can be carried along.
        let mut added: Vec<(&str, &str)> = Vec::with_capacity(2);
        if let Some(responses_json) = &responses_json {
            added.push(("inputResponses", responses_json));
        }
        let state_json = open.state.as_deref().map(|state| {
            let mut out = String::with_capacity(state.len().saturating_add(2));
            canonical::write_string(&mut out, state);
            out
        });
        if let Some(state_json) = &state_json {
            added.push(("requestState", state_json));
        }
        let Some(params) = params.with(&added) else {
            // Registration refuses params that carry either key: only a corrupt record can.
            if let Some(event) = consented {
                self.audit(event)?;
            }
            return Err(GateError::Host(HostFault::StorageCorrupted));
        };
        Ok(Prepared {
            retry_id,
            receipt_id,
            consented,
            params,
        })
    }

    /// Ask the consent import about exactly this view and these answers and check the
    /// receipt. Returns the receipt id and its `consented` event (audited with the consume).
    fn consent(
        &mut self,
        binding: &Binding,
        open: &OpenRound,
        responses_json: &str,
        retry_id: &RequestId,
    ) -> Result<(String, Event), GateError> {
        let prompt = ConsentPrompt {
            view_json: open.view_json.clone(),
            view_sha256: open.view_sha256.clone(),
            responses_sha256: digest::text_sha256_hex(responses_json),
            responses_json: responses_json.to_owned(),
        };
        let receipt = self.host.consent().request_consent(&prompt);
        // The user may have taken minutes: what follows happens now, not when the call began.
        // (A clock gone out of range denies; the denial keeps the time the call began.)
        self.clock.resume(self.host.clock())?;
        let receipt =
            receipt.map_err(|e| GateError::Host(HostFault::ConsentUnavailable(e.message)))?;
        let id_ok = !receipt.receipt_id.is_empty()
            && receipt.receipt_id.len() <= limits::MAX_RECEIPT_ID_BYTES
            && receipt.receipt_id.bytes().all(|b| b.is_ascii_graphic());
        if !id_ok {
            return Err(GateError::Host(HostFault::ConsentUnavailable(format!(
                "the receipt id must be 1 to {} printable ascii bytes",
                limits::MAX_RECEIPT_ID_BYTES
            ))));
        }
        if receipt.decision != ConsentDecision::Granted {
            return Err(GateError::from(CallerMisuse::ConsentRefused));
        }
        let same = |a: &str, b: &str| digest::bytes_equal(a.as_bytes(), b.as_bytes());
        if !same(&receipt.view_sha256, &prompt.view_sha256)
            || !same(&receipt.responses_sha256, &prompt.responses_sha256)
        {
            return Err(GateError::from(CallerMisuse::ConsentMismatch));
        }
        let consented = binding
            .event(EventKind::Consented)
            .set_str(Field::Outcome, "granted")
            .set_str(Field::ConsentMethod, receipt.method.as_str())
            .set(Field::ConsentReceiptId, receipt.receipt_id.clone())
            .set(Field::RetryId, retry_id.to_json());
        Ok((receipt.receipt_id, consented))
    }
}

/// Whether a binding's params as sent are its canonical params but for number digits: a
/// record rewritten behind the gate must not send other arguments than the ones registered.
fn sent_form_holds(fixed: &super::record::Fixed) -> bool {
    match &fixed.params_sent {
        None => true,
        Some(sent) => json::parse_strict(sent.get(), limits::PARAMS)
            .is_ok_and(|v| canonical::to_canonical(&v) == fixed.params_json.get()),
    }
}

/// The canonical text of `build-retry`'s `inputResponses` (`responses_json`): the consent
/// prompt's `responses_json` (the retry carries the same members in the same order, each number
/// with the digits it was given). Hosts that record a decision
/// before the gate asks (`DecidedConsent`) digest the answers they will send with this, so
/// the host and the gate cannot differ on it.
pub fn canonical_responses(responses_json: &str) -> Result<String, GateError> {
    parse_responses(responses_json).map(|m| canonical::to_canonical(&Value::Object(m)))
}

/// `build-retry`'s `inputResponses` text as an object.
fn parse_responses(text: &str) -> Result<serde_json::Map<String, Value>, GateError> {
    match json::parse_strict(text, limits::RESPONSES) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(GateError::from(CallerMisuse::InvalidInputResponse(
            "`inputResponses` must be an object".into(),
        ))),
        Err(e) => Err(GateError::from(CallerMisuse::InvalidInputResponse(
            match e {
                JsonError::Syntax(w) | JsonError::Limit(w) => w,
                JsonError::DuplicateKey(k) => format!("the key `{k}` appears twice"),
            },
        ))),
    }
}
