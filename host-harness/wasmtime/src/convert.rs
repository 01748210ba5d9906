//! Every conversion between the WIT's types (as wasmtime's bindgen writes them) and the
//! core's, for the imports the host serves ([`crate::imports`]) and the exports it calls
//! ([`crate::ComponentGate`]). The core's host types take the WIT's own encodings (version 0 for
//! "absent", the flat append record), so each conversion only moves fields. A denial's text
//! code becomes its typed code here, once.

use crate::bindings::exports::mrtr::gate::gate as wit;
use crate::bindings::mrtr::gate::{audit, consent, journal, storage};
use mrtr_gate_core as core;
use mrtr_gate_core::host::{
    AppendOutcome, AuditEntry, ConsentDecision, ConsentMethod, ConsentPrompt, ConsentReceipt,
    DuePage, Journaled, ReadKey, Versioned, Write,
};
use mrtr_gate_host::{DenialCode, GateDenial};

// ---- imports: WIT -> core for what the guest asks, core -> WIT for what the host answers ---

impl<'a> From<&'a storage::ReadKey> for ReadKey<'a> {
    fn from(k: &'a storage::ReadKey) -> Self {
        Self {
            key: &k.key,
            have: k.have,
        }
    }
}

impl From<Versioned> for storage::Entry {
    fn from(v: Versioned) -> Self {
        Self {
            version: v.version,
            value: v.value,
        }
    }
}

impl<'a> From<&'a storage::WriteOp> for Write<'a> {
    fn from(w: &'a storage::WriteOp) -> Self {
        Self {
            key: &w.key,
            expected: w.expected,
            value: w.value.as_deref(),
            ttl_ms: w.ttl_ms,
        }
    }
}

impl From<DuePage> for storage::DuePage {
    fn from(p: DuePage) -> Self {
        Self {
            keys: p.keys,
            next: p.next,
        }
    }
}

impl From<consent::ConsentPrompt> for ConsentPrompt {
    fn from(p: consent::ConsentPrompt) -> Self {
        Self {
            view_json: p.view_json,
            view_sha256: p.view_sha256,
            responses_json: p.responses_json,
            responses_sha256: p.responses_sha256,
        }
    }
}

impl From<ConsentDecision> for consent::ConsentDecision {
    fn from(d: ConsentDecision) -> Self {
        match d {
            ConsentDecision::Granted => Self::Granted,
            ConsentDecision::Refused => Self::Refused,
        }
    }
}

impl From<ConsentMethod> for consent::ConsentMethod {
    fn from(m: ConsentMethod) -> Self {
        match m {
            ConsentMethod::UserAtScreen => Self::UserAtScreen,
            ConsentMethod::PresetAnswers => Self::PresetAnswers,
            ConsentMethod::DelegatedToClient => Self::DelegatedToClient,
            ConsentMethod::PolicyHook => Self::PolicyHook,
        }
    }
}

impl From<ConsentReceipt> for consent::ConsentReceipt {
    fn from(r: ConsentReceipt) -> Self {
        Self {
            receipt_id: r.receipt_id,
            decision: r.decision.into(),
            method: r.method.into(),
            view_sha256: r.view_sha256,
            responses_sha256: r.responses_sha256,
        }
    }
}

impl From<audit::AuditEntry> for AuditEntry {
    fn from(e: audit::AuditEntry) -> Self {
        Self {
            shard: e.shard,
            seq: e.seq,
            prev_sha256: e.prev_sha256,
            event_sha256: e.event_sha256,
            line: e.line,
        }
    }
}

/// What a journal call did, its append's head filled as [`audit::AppendOutcome`]'s is.
impl From<(Journaled, AuditEntry)> for journal::Journaled {
    fn from((j, entry): (Journaled, AuditEntry)) -> Self {
        Self {
            applied: j.applied,
            appended: j.appended.map(|o| (o, entry).into()),
            failed: j.failed.map(Into::into),
        }
    }
}

/// What appending `entry` did. A written entry is the head: its digest is taken from the
/// entry when the sink left it out ([`AppendOutcome::written`]), so the WIT's record always
/// names the head.
impl From<(AppendOutcome, AuditEntry)> for audit::AppendOutcome {
    fn from((o, entry): (AppendOutcome, AuditEntry)) -> Self {
        let head_sha256 = if o.written && o.head_sha256.is_empty() {
            entry.event_sha256
        } else {
            o.head_sha256
        };
        Self {
            written: o.written,
            stored: o.stored,
            head_seq: o.head_seq,
            head_sha256,
        }
    }
}

// ---- exports: core -> WIT for what a caller passes in, WIT -> core for what it gets --------

impl From<&core::RequestId> for wit::RequestId {
    fn from(id: &core::RequestId) -> Self {
        match id {
            core::RequestId::Number(n) => Self::Number(*n),
            core::RequestId::Text(s) => Self::Text(s.clone()),
        }
    }
}

impl From<&core::ServerIdentity> for wit::ServerIdentity {
    fn from(s: &core::ServerIdentity) -> Self {
        match s {
            core::ServerIdentity::Origin(u) => Self::Origin(u.clone()),
            core::ServerIdentity::Endpoint(e) => Self::Endpoint(e.clone()),
        }
    }
}

impl From<core::DeprecatedMethod> for wit::DeprecatedMethod {
    fn from(m: core::DeprecatedMethod) -> Self {
        match m {
            core::DeprecatedMethod::RootsList => Self::RootsList,
            core::DeprecatedMethod::SamplingCreateMessage => Self::SamplingCreateMessage,
        }
    }
}

impl From<core::Policy> for wit::Policy {
    fn from(p: core::Policy) -> Self {
        Self {
            round_trip_lifetime_ms: p.round_trip_lifetime_ms,
            max_request_state_bytes: p.max_request_state_bytes,
            max_rounds: p.max_rounds,
            allowed_deprecated: p.allowed_deprecated.into_iter().map(Into::into).collect(),
            policy_version: p.policy_version,
        }
    }
}

impl From<core::Registration> for wit::Registration {
    fn from(r: core::Registration) -> Self {
        Self {
            request_id: (&r.request_id).into(),
            server: (&r.server).into(),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            params_json: r.params_json,
            policy: r.policy.into(),
        }
    }
}

impl From<core::RetryRequest> for wit::RetryRequest {
    fn from(r: core::RetryRequest) -> Self {
        Self {
            server: (&r.server).into(),
            request_id: (&r.request_id).into(),
            retry_id: (&r.retry_id).into(),
            user: r.user,
            tenant: r.tenant,
            responses_json: r.responses_json,
        }
    }
}

impl From<core::ClientRetry> for wit::ClientRetry {
    fn from(r: core::ClientRetry) -> Self {
        Self {
            server: (&r.server).into(),
            request_id: r.request_id.as_ref().map(Into::into),
            retry_id: (&r.retry_id).into(),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            params_json: r.params_json,
        }
    }
}

impl From<core::CallerOutcome> for wit::CallerOutcome {
    fn from(o: core::CallerOutcome) -> Self {
        match o {
            core::CallerOutcome::Cancelled => Self::Cancelled,
            core::CallerOutcome::Error(reason) => Self::Error(reason),
            core::CallerOutcome::PolicyDenied(id) => Self::PolicyDenied(id),
        }
    }
}

impl From<&core::Unbound> for wit::UnboundRefusal {
    fn from(r: &core::Unbound) -> Self {
        match r {
            core::Unbound::ServerRequest(method) => Self::ServerRequest(method.clone()),
            core::Unbound::InputRequired => Self::InputRequired,
            core::Unbound::InputRequestsNotified => Self::InputRequestsNotified,
            core::Unbound::InputResponses => Self::InputResponses,
        }
    }
}

impl From<core::FinishRequest> for wit::FinishRequest {
    fn from(r: core::FinishRequest) -> Self {
        Self {
            server: (&r.server).into(),
            request_id: (&r.request_id).into(),
            user: r.user,
            tenant: r.tenant,
            outcome: r.outcome.into(),
        }
    }
}

impl From<wit::Registered> for core::Registered {
    fn from(r: wit::Registered) -> Self {
        Self {
            request_json: r.request_json,
            params_sha256: r.params_sha256,
            expires_at_ms: r.expires_at_ms,
        }
    }
}

impl From<wit::ConsentView> for core::AcceptedRound {
    fn from(v: wit::ConsentView) -> Self {
        Self {
            view_json: v.view_json,
            view_sha256: v.view_sha256,
            round: v.round,
            input_keys: v.input_keys,
            request_state_sha256: v.request_state_sha256,
        }
    }
}

impl From<wit::ResponseVerdict> for core::ResponseVerdict {
    fn from(v: wit::ResponseVerdict) -> Self {
        match v {
            wit::ResponseVerdict::InputRequired(round) => Self::InputRequired(round.into()),
            wit::ResponseVerdict::Complete => Self::Complete,
            wit::ResponseVerdict::Error(code) => Self::Error(code),
        }
    }
}

impl From<wit::Retry> for core::Retry {
    fn from(r: wit::Retry) -> Self {
        Self {
            request_json: r.request_json,
            round: r.round,
            consent_receipt_id: r.consent_receipt_id,
        }
    }
}

impl From<wit::TerminalOutcome> for core::TerminalOutcome {
    fn from(t: wit::TerminalOutcome) -> Self {
        match t {
            wit::TerminalOutcome::Complete => Self::Complete,
            wit::TerminalOutcome::Error => Self::Error,
            wit::TerminalOutcome::Cancelled => Self::Cancelled,
            wit::TerminalOutcome::Expired => Self::Expired,
        }
    }
}

impl From<wit::ErrorCause> for core::ErrorCause {
    fn from(c: wit::ErrorCause) -> Self {
        match c {
            wit::ErrorCause::Peer => Self::Peer,
            wit::ErrorCause::Caller => Self::Caller,
            wit::ErrorCause::Host => Self::Host,
        }
    }
}

impl From<wit::GateError> for GateDenial {
    /// The component's text code turned back into the typed code, once.
    fn from(e: wit::GateError) -> Self {
        let (code, message) = match core::ErrorCode::from_code(&e.code) {
            Some(code) => (DenialCode::Gate(code), e.message),
            None => (
                DenialCode::Unrecognised,
                format!(
                    "the gate denied with the unknown code `{}`: {}",
                    e.code, e.message
                ),
            ),
        };
        Self::new(code, e.cause.into(), message, e.audited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A code that crossed the boundary as text is the typed code again; one this host does
    /// not know is kept in the message, never taken for another.
    #[test]
    fn a_text_code_becomes_its_typed_code_once() {
        let denied = |code: &str| {
            GateDenial::from(wit::GateError {
                code: code.into(),
                cause: wit::ErrorCause::Caller,
                message: "m".into(),
                audited: true,
            })
        };
        let refused = denied("consent_refused");
        assert_eq!(
            refused.code,
            DenialCode::Gate(core::ErrorCode::ConsentRefused)
        );
        assert!(refused.user_refused() && refused.audited);
        assert_eq!(refused.message, "m");
        let unknown = denied("consent_refused_v9");
        assert_eq!(unknown.code, DenialCode::Unrecognised);
        assert_eq!(unknown.code, "unrecognised_code");
        assert!(
            unknown.message.contains("`consent_refused_v9`"),
            "{}",
            unknown.message
        );
        assert!(!unknown.user_refused());
    }
}
