//! The `mrtr:gate` component: a thin adapter between the WIT world `gate-plugin` and
//! `mrtr-gate-core`. No policy lives here; only type conversions and the one instance of
//! the core that the component holds (its caches survive between calls, its bindings do not
//! need to: they live in the host's storage).

// The generated bindings need `unsafe`; the policy core does not.
#![allow(unsafe_code)]
#![allow(missing_docs)]

mod bindings {
    wit_bindgen::generate!({
        world: "gate-plugin",
        path: "../../wit",
        // Records passed to imports borrow their strings: an audit line or a consent view
        // goes to the host without a copy made only to be dropped after the call.
        ownership: Borrowing {
            duplicate_if_necessary: false
        },
    });
}

use bindings::exports::mrtr::gate::gate as wit;
use bindings::mrtr::gate::{audit, clock, consent, storage};
use mrtr_gate_core as core;
use mrtr_gate_core::host::{
    AppendOutcome, AuditEntry, ChainHead, ConsentDecision, ConsentMethod, ConsentPrompt,
    ConsentReceipt, HostError, ReadKey, Versioned, Write,
};
use std::cell::RefCell;

/// The host services, reached through the component's imports.
struct Imports;

impl core::host::Clock for Imports {
    fn now_ms(&self) -> u64 {
        clock::now_ms()
    }
}

impl core::host::Storage for Imports {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Option<Versioned>>, HostError> {
        let keys: Vec<storage::ReadKey<'_>> = keys
            .iter()
            .map(|k| storage::ReadKey {
                key: k.key,
                have: k.have.unwrap_or(0),
            })
            .collect();
        storage::read(&keys)
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|e| {
                        // Version 0 is the WIT's "absent" (a present key's is never 0).
                        (e.version != 0).then_some(Versioned {
                            value: e.value,
                            version: e.version,
                        })
                    })
                    .collect()
            })
            .map_err(HostError::new)
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let writes: Vec<storage::WriteOp<'_>> = writes
            .iter()
            .map(|w| storage::WriteOp {
                key: w.key,
                expected: w.expected.unwrap_or(0),
                value: w.value,
                ttl_ms: w.ttl_ms,
            })
            .collect();
        storage::write(&writes).map_err(HostError::new)
    }

    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<core::host::DuePage, HostError> {
        storage::list_due(due_by_ms, cursor, limit)
            .map(|p| core::host::DuePage {
                keys: p.keys,
                next: p.next,
            })
            .map_err(HostError::new)
    }
}

impl core::host::Consent for Imports {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let wit_prompt = consent::ConsentPrompt {
            view_json: &prompt.view_json,
            view_sha256: &prompt.view_sha256,
            responses_json: &prompt.responses_json,
            responses_sha256: &prompt.responses_sha256,
        };
        consent::request_consent(wit_prompt)
            .map(|r| ConsentReceipt {
                receipt_id: r.receipt_id,
                decision: match r.decision {
                    consent::ConsentDecision::Granted => ConsentDecision::Granted,
                    consent::ConsentDecision::Refused => ConsentDecision::Refused,
                },
                method: match r.method {
                    consent::ConsentMethod::UserAtScreen => ConsentMethod::UserAtScreen,
                    consent::ConsentMethod::PresetAnswers => ConsentMethod::PresetAnswers,
                    consent::ConsentMethod::DelegatedToClient => ConsentMethod::DelegatedToClient,
                    consent::ConsentMethod::PolicyHook => ConsentMethod::PolicyHook,
                },
                view_sha256: r.view_sha256,
                responses_sha256: r.responses_sha256,
            })
            .map_err(HostError::new)
    }
}

impl core::host::Audit for Imports {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        let wit_entry = audit::AuditEntry {
            seq: entry.seq,
            prev_sha256: &entry.prev_sha256,
            event_sha256: &entry.event_sha256,
            line: &entry.line,
        };
        let outcome = audit::append(wit_entry).map_err(HostError::new)?;
        Ok(if outcome.written {
            AppendOutcome::Written {
                stored: outcome.stored,
            }
        } else {
            AppendOutcome::HeadMoved(ChainHead {
                seq: outcome.head_seq,
                event_sha256: outcome.head_sha256,
            })
        })
    }
}

/// The services bundle the core runs over.
type Host = core::host::Services<Imports, Imports, Imports, Imports>;

thread_local! {
    static GATE: RefCell<core::Gate<Host>> = RefCell::new(core::Gate::new(core::host::Services {
        clock: Imports,
        storage: Imports,
        consent: Imports,
        audit: Imports,
    }));
}

fn with_gate<T>(f: impl FnOnce(&mut core::Gate<Host>) -> T) -> T {
    GATE.with(|g| f(&mut g.borrow_mut()))
}

// ---- conversions ---------------------------------------------------------------------------

fn request_id(id: wit::RequestId) -> core::RequestId {
    match id {
        wit::RequestId::Number(n) => core::RequestId::Number(n),
        wit::RequestId::Text(s) => core::RequestId::Text(s),
    }
}

thread_local! {
    /// The last origin normalised (the core's memo; its invariant is stated there).
    static ORIGINS: RefCell<core::OriginMemo> = RefCell::new(core::OriginMemo::default());
}

fn server(s: wit::ServerIdentity) -> Result<core::ServerIdentity, core::GateError> {
    match s {
        wit::ServerIdentity::Origin(url) => ORIGINS.with(|memo| match memo.try_borrow_mut() {
            Ok(mut memo) => memo.origin(url),
            Err(_) => core::ServerIdentity::origin(&url),
        }),
        wit::ServerIdentity::Endpoint(id) => core::ServerIdentity::endpoint(&id),
    }
}

fn policy(p: wit::Policy) -> core::Policy {
    core::Policy {
        round_trip_lifetime_ms: p.round_trip_lifetime_ms,
        max_request_state_bytes: p.max_request_state_bytes,
        max_rounds: p.max_rounds,
        allowed_deprecated: p
            .allowed_deprecated
            .into_iter()
            .map(|m| match m {
                wit::DeprecatedMethod::RootsList => core::DeprecatedMethod::RootsList,
                wit::DeprecatedMethod::SamplingCreateMessage => {
                    core::DeprecatedMethod::SamplingCreateMessage
                }
            })
            .collect(),
        policy_version: p.policy_version,
    }
}

fn denial(d: core::Denial) -> wit::GateError {
    wit::GateError {
        code: d.error.code().to_owned(),
        cause: match d.error.cause() {
            core::ErrorCause::Peer => wit::ErrorCause::Peer,
            core::ErrorCause::Caller => wit::ErrorCause::Caller,
            core::ErrorCause::Host => wit::ErrorCause::Host,
        },
        message: d.error.to_string(),
        audited: d.audited,
    }
}

fn view(v: core::ConsentView) -> wit::ConsentView {
    wit::ConsentView {
        view_json: v.view_json,
        view_sha256: v.view_sha256,
        round: v.round,
        input_keys: v.input_keys,
        request_state_sha256: v.request_state_sha256,
    }
}

fn terminal(t: core::TerminalOutcome) -> wit::TerminalOutcome {
    match t {
        core::TerminalOutcome::Complete => wit::TerminalOutcome::Complete,
        core::TerminalOutcome::Error => wit::TerminalOutcome::Error,
        core::TerminalOutcome::Cancelled => wit::TerminalOutcome::Cancelled,
        core::TerminalOutcome::Expired => wit::TerminalOutcome::Expired,
    }
}

struct Component;

impl wit::Guest for Component {
    fn register(r: wit::Registration) -> Result<wit::Registered, wit::GateError> {
        let server = server(r.server).map_err(|e| denial(e.into()))?;
        let registration = core::Registration {
            request_id: request_id(r.request_id),
            server,
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            params_json: r.params_json,
            policy: policy(r.policy),
        };
        with_gate(|g| g.register(registration))
            .map(|ok| wit::Registered {
                request_json: ok.request_json,
                params_sha256: ok.params_sha256,
                expires_at_ms: ok.expires_at_ms,
            })
            .map_err(denial)
    }

    fn accept_response(
        s: wit::ServerIdentity,
        response_json: String,
    ) -> Result<wit::ResponseVerdict, wit::GateError> {
        let s = server(s).map_err(|e| denial(e.into()))?;
        with_gate(|g| g.accept_response(&s, &response_json))
            .map(|v| match v {
                core::ResponseVerdict::InputRequired(v) => {
                    wit::ResponseVerdict::InputRequired(view(v))
                }
                core::ResponseVerdict::Complete => wit::ResponseVerdict::Complete,
                core::ResponseVerdict::Error(code) => wit::ResponseVerdict::Error(code),
            })
            .map_err(denial)
    }

    fn build_retry(r: wit::RetryRequest) -> Result<wit::Retry, wit::GateError> {
        let request = core::RetryRequest {
            server: server(r.server).map_err(|e| denial(e.into()))?,
            request_id: request_id(r.request_id),
            retry_id: request_id(r.retry_id),
            user: r.user,
            tenant: r.tenant,
            responses_json: r.responses_json,
        };
        with_gate(|g| g.build_retry(request))
            .map(|ok| wit::Retry {
                request_json: ok.request_json,
                round: ok.round,
                consent_receipt_id: ok.consent_receipt_id,
            })
            .map_err(denial)
    }

    fn finish(r: wit::FinishRequest) -> Result<wit::TerminalOutcome, wit::GateError> {
        let request = core::FinishRequest {
            server: server(r.server).map_err(|e| denial(e.into()))?,
            request_id: request_id(r.request_id),
            user: r.user,
            tenant: r.tenant,
            outcome: match r.outcome {
                wit::CallerOutcome::Cancelled => core::CallerOutcome::Cancelled,
                wit::CallerOutcome::Error(reason) => core::CallerOutcome::Error(reason),
            },
        };
        with_gate(|g| g.finish(request))
            .map(terminal)
            .map_err(denial)
    }

    fn expire_stale() -> Result<u32, wit::GateError> {
        with_gate(core::Gate::expire_stale).map_err(denial)
    }
}

bindings::export!(Component with_types_in bindings);
