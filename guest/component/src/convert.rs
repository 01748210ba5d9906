//! Every conversion between the WIT's types (as wit-bindgen writes them) and the core's.
//! The core's host types take the WIT's own encodings (version 0 for "absent", the flat
//! append record), so each conversion only moves fields; no policy lives here.

use crate::bindings::exports::mrtr::gate::gate as wit;
use crate::bindings::mrtr::gate::{audit, consent, journal, storage};
use mrtr_gate_core as core;
use mrtr_gate_core::host::{
    AppendOutcome, AuditEntry, ConsentDecision, ConsentMethod, ConsentPrompt, ConsentReceipt,
    DuePage, HostError, Journaled, ReadKey, Versioned, Write,
};
use std::cell::RefCell;

// ---- imports: core -> WIT for what the gate sends, WIT -> core for what it gets back -------

impl<'a> From<&ReadKey<'a>> for storage::ReadKey<'a> {
    fn from(k: &ReadKey<'a>) -> Self {
        Self {
            key: k.key,
            have: k.have,
        }
    }
}

impl From<storage::Entry> for Versioned {
    fn from(e: storage::Entry) -> Self {
        Self {
            value: e.value,
            version: e.version,
        }
    }
}

impl<'a> From<&Write<'a>> for storage::WriteOp<'a> {
    fn from(w: &Write<'a>) -> Self {
        Self {
            key: w.key,
            expected: w.expected,
            value: w.value,
            ttl_ms: w.ttl_ms,
        }
    }
}

impl From<storage::DuePage> for DuePage {
    fn from(p: storage::DuePage) -> Self {
        Self {
            keys: p.keys,
            next: p.next,
        }
    }
}

impl<'a> From<&'a ConsentPrompt> for consent::ConsentPrompt<'a> {
    fn from(p: &'a ConsentPrompt) -> Self {
        Self {
            view_json: &p.view_json,
            view_sha256: &p.view_sha256,
            responses_json: &p.responses_json,
            responses_sha256: &p.responses_sha256,
        }
    }
}

impl From<consent::ConsentDecision> for ConsentDecision {
    fn from(d: consent::ConsentDecision) -> Self {
        match d {
            consent::ConsentDecision::Granted => Self::Granted,
            consent::ConsentDecision::Refused => Self::Refused,
        }
    }
}

impl From<consent::ConsentMethod> for ConsentMethod {
    fn from(m: consent::ConsentMethod) -> Self {
        match m {
            consent::ConsentMethod::UserAtScreen => Self::UserAtScreen,
            consent::ConsentMethod::PresetAnswers => Self::PresetAnswers,
            consent::ConsentMethod::DelegatedToClient => Self::DelegatedToClient,
            consent::ConsentMethod::PolicyHook => Self::PolicyHook,
        }
    }
}

impl From<consent::ConsentReceipt> for ConsentReceipt {
    fn from(r: consent::ConsentReceipt) -> Self {
        Self {
            receipt_id: r.receipt_id,
            decision: r.decision.into(),
            method: r.method.into(),
            view_sha256: r.view_sha256,
            responses_sha256: r.responses_sha256,
        }
    }
}

impl<'a> From<&'a AuditEntry> for audit::AuditEntry<'a> {
    fn from(e: &'a AuditEntry) -> Self {
        Self {
            shard: &e.shard,
            seq: e.seq,
            prev_sha256: &e.prev_sha256,
            event_sha256: &e.event_sha256,
            line: &e.line,
        }
    }
}

impl From<audit::AppendOutcome> for AppendOutcome {
    fn from(o: audit::AppendOutcome) -> Self {
        Self {
            written: o.written,
            stored: o.stored,
            head_seq: o.head_seq,
            head_sha256: o.head_sha256,
        }
    }
}

impl From<journal::Journaled> for Journaled {
    fn from(j: journal::Journaled) -> Self {
        Self {
            applied: j.applied,
            appended: j.appended.map(Into::into),
            failed: j.failed.map(HostError::new),
        }
    }
}

// ---- exports: WIT -> core for what a caller passes in, core -> WIT for what it gets --------

impl From<wit::RequestId> for core::RequestId {
    fn from(id: wit::RequestId) -> Self {
        match id {
            wit::RequestId::Number(n) => Self::Number(n),
            wit::RequestId::Text(s) => Self::Text(s),
        }
    }
}

thread_local! {
    /// The last origin normalised (the core's memo; its invariant is stated there).
    static ORIGINS: RefCell<core::OriginMemo> = RefCell::new(core::OriginMemo::default());
}

impl TryFrom<wit::ServerIdentity> for core::ServerIdentity {
    type Error = core::GateError;

    fn try_from(s: wit::ServerIdentity) -> Result<Self, Self::Error> {
        match s {
            wit::ServerIdentity::Origin(url) => ORIGINS.with(|memo| match memo.try_borrow_mut() {
                Ok(mut memo) => memo.origin(url),
                Err(_) => Self::origin(&url),
            }),
            wit::ServerIdentity::Endpoint(id) => Self::endpoint(&id),
        }
    }
}

impl From<wit::DeprecatedMethod> for core::DeprecatedMethod {
    fn from(m: wit::DeprecatedMethod) -> Self {
        match m {
            wit::DeprecatedMethod::RootsList => Self::RootsList,
            wit::DeprecatedMethod::SamplingCreateMessage => Self::SamplingCreateMessage,
        }
    }
}

impl From<wit::Policy> for core::Policy {
    fn from(p: wit::Policy) -> Self {
        Self {
            round_trip_lifetime_ms: p.round_trip_lifetime_ms,
            max_request_state_bytes: p.max_request_state_bytes,
            max_rounds: p.max_rounds,
            allowed_deprecated: p.allowed_deprecated.into_iter().map(Into::into).collect(),
            policy_version: p.policy_version,
        }
    }
}

impl TryFrom<wit::Registration> for core::Registration {
    type Error = core::GateError;

    fn try_from(r: wit::Registration) -> Result<Self, Self::Error> {
        Ok(Self {
            server: r.server.try_into()?,
            request_id: r.request_id.into(),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            params_json: r.params_json,
            policy: r.policy.into(),
        })
    }
}

impl TryFrom<wit::RetryRequest> for core::RetryRequest {
    type Error = core::GateError;

    fn try_from(r: wit::RetryRequest) -> Result<Self, Self::Error> {
        Ok(Self {
            server: r.server.try_into()?,
            request_id: r.request_id.into(),
            retry_id: r.retry_id.into(),
            user: r.user,
            tenant: r.tenant,
            responses_json: r.responses_json,
        })
    }
}

impl TryFrom<wit::ClientRetry> for core::ClientRetry {
    type Error = core::GateError;

    fn try_from(r: wit::ClientRetry) -> Result<Self, Self::Error> {
        Ok(Self {
            server: r.server.try_into()?,
            request_id: r.request_id.map(Into::into),
            retry_id: r.retry_id.into(),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            params_json: r.params_json,
        })
    }
}

impl From<wit::CallerOutcome> for core::CallerOutcome {
    fn from(o: wit::CallerOutcome) -> Self {
        match o {
            wit::CallerOutcome::Cancelled => Self::Cancelled,
            wit::CallerOutcome::Error(reason) => Self::Error(reason),
            wit::CallerOutcome::PolicyDenied(id) => Self::PolicyDenied(id),
        }
    }
}

impl From<wit::UnboundRefusal> for core::Unbound {
    fn from(r: wit::UnboundRefusal) -> Self {
        match r {
            wit::UnboundRefusal::ServerRequest(method) => Self::ServerRequest(method),
            wit::UnboundRefusal::InputRequired => Self::InputRequired,
            wit::UnboundRefusal::InputRequestsNotified => Self::InputRequestsNotified,
            wit::UnboundRefusal::InputResponses => Self::InputResponses,
        }
    }
}

impl TryFrom<wit::FinishRequest> for core::FinishRequest {
    type Error = core::GateError;

    fn try_from(r: wit::FinishRequest) -> Result<Self, Self::Error> {
        Ok(Self {
            server: r.server.try_into()?,
            request_id: r.request_id.into(),
            user: r.user,
            tenant: r.tenant,
            outcome: r.outcome.into(),
        })
    }
}

impl From<core::ErrorCause> for wit::ErrorCause {
    fn from(c: core::ErrorCause) -> Self {
        match c {
            core::ErrorCause::Peer => Self::Peer,
            core::ErrorCause::Caller => Self::Caller,
            core::ErrorCause::Host => Self::Host,
        }
    }
}

impl From<core::Denial> for wit::GateError {
    fn from(d: core::Denial) -> Self {
        Self {
            code: d.error.code().to_owned(),
            cause: d.error.cause().into(),
            message: d.error.to_string(),
            audited: d.audited,
        }
    }
}

impl From<core::GateError> for wit::GateError {
    fn from(e: core::GateError) -> Self {
        core::Denial::unaudited(e).into()
    }
}

impl From<core::Registered> for wit::Registered {
    fn from(r: core::Registered) -> Self {
        Self {
            request_json: r.request_json,
            params_sha256: r.params_sha256,
            expires_at_ms: r.expires_at_ms,
        }
    }
}

impl From<core::AcceptedRound> for wit::ConsentView {
    fn from(v: core::AcceptedRound) -> Self {
        Self {
            view_json: v.view_json,
            view_sha256: v.view_sha256,
            round: v.round,
            input_keys: v.input_keys,
            request_state_sha256: v.request_state_sha256,
        }
    }
}

impl From<core::ResponseVerdict> for wit::ResponseVerdict {
    fn from(v: core::ResponseVerdict) -> Self {
        match v {
            core::ResponseVerdict::InputRequired(round) => Self::InputRequired(round.into()),
            core::ResponseVerdict::Complete => Self::Complete,
            core::ResponseVerdict::Error(code) => Self::Error(code),
        }
    }
}

impl From<core::Retry> for wit::Retry {
    fn from(r: core::Retry) -> Self {
        Self {
            request_json: r.request_json,
            round: r.round,
            consent_receipt_id: r.consent_receipt_id,
        }
    }
}

impl From<core::TerminalOutcome> for wit::TerminalOutcome {
    fn from(t: core::TerminalOutcome) -> Self {
        match t {
            core::TerminalOutcome::Complete => Self::Complete,
            core::TerminalOutcome::Error => Self::Error,
            core::TerminalOutcome::Cancelled => Self::Cancelled,
            core::TerminalOutcome::Expired => Self::Expired,
        }
    }
}
