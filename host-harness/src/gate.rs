//! One API, two engines: [`ComponentGate`] runs the policy inside the wasm sandbox,
//! [`NativeGate`] runs the same core compiled natively (for differential tests and
//! benchmarks). Both speak the core's types, so a caller or a test corpus can use either.

use crate::bindings::GatePlugin;
use crate::bindings::exports::mrtr::gate::gate as wit;
use crate::deadline::{GuestDeadline, on_epoch_deadline};
use crate::imports::HostState;
use crate::runtime::{CallBudget, GateRuntime};
use crate::services::HostServices;
use mrtr_gate_core as core;
use mrtr_gate_core::{
    CallerOutcome, ErrorCause, FinishRequest, Registered, Registration, RequestId, ResponseVerdict,
    Retry, RetryRequest, ServerIdentity, TerminalOutcome,
};
use std::sync::Arc;
use wasmtime::{Store, StoreLimitsBuilder, Trap};

/// A denial as a host sees it: the gate's own, or the harness's when the guest trapped (then
/// the wasmtime error is its [`source`](std::error::Error::source)). Two denials are equal
/// when their code, cause, message and `audited` are.
#[derive(Clone, Debug)]
pub struct GateDenial {
    /// Stable snake_case code (the gate's, or `guest_trapped` / `guest_out_of_fuel`).
    pub code: String,
    /// Who is to blame.
    pub cause: ErrorCause,
    /// Lowercase, no secrets.
    pub message: String,
    /// Whether the denial reached the audit sink.
    pub audited: bool,
    /// The trap (or instantiation failure) behind a harness denial.
    trap: Option<Arc<wasmtime::Error>>,
}

impl PartialEq for GateDenial {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.cause == other.cause
            && self.message == other.message
            && self.audited == other.audited
    }
}

impl Eq for GateDenial {}

impl std::fmt::Display for GateDenial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "denied ({}): {}", self.code, self.message)
    }
}

impl std::error::Error for GateDenial {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.trap.as_deref().map(AsRef::as_ref)
    }
}

impl From<core::Denial> for GateDenial {
    fn from(d: core::Denial) -> Self {
        Self {
            code: d.error.code().to_owned(),
            cause: d.error.cause(),
            message: d.error.to_string(),
            audited: d.audited,
            trap: None,
        }
    }
}

/// The gate's operations. See the WIT `gate` interface for the semantics of each.
pub trait GateApi {
    /// Bind a request before it is sent.
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial>;
    /// Judge a JSON-RPC response text that arrived from `server`.
    fn accept_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, GateDenial>;
    /// Validate the answers, obtain consent, consume the round, return the retry.
    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial>;
    /// End a binding from the caller's side.
    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial>;
    /// End every binding whose lifetime has passed.
    fn expire_stale(&mut self) -> Result<u32, GateDenial>;
}

/// A boxed gate is a gate (a client that picks its engine at run time).
impl<G: GateApi + ?Sized> GateApi for Box<G> {
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial> {
        (**self).register(r)
    }
    fn accept_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        (**self).accept_response(server, response_json)
    }
    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        (**self).build_retry(r)
    }
    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        (**self).finish(r)
    }
    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        (**self).expire_stale()
    }
}

/// The core compiled natively, over the same services.
pub struct NativeGate {
    gate: core::Gate<HostServices>,
}

impl NativeGate {
    /// A native gate over `services`.
    pub fn new(services: HostServices) -> Self {
        Self {
            gate: core::Gate::new(services),
        }
    }
}

impl GateApi for NativeGate {
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial> {
        self.gate.register(r).map_err(Into::into)
    }
    fn accept_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        self.gate
            .accept_response(server, response_json)
            .map_err(Into::into)
    }
    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        self.gate.build_retry(r).map_err(Into::into)
    }
    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        self.gate.finish(r).map_err(Into::into)
    }
    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        self.gate.expire_stale().map_err(Into::into)
    }
}

struct Live {
    store: Store<HostState>,
    plugin: GatePlugin,
}

/// The gate inside the wasm sandbox. Holds one instance and replaces it after any trap: a
/// trapped instance is never entered again, and since every binding lives in the host's
/// storage, a fresh instance carries on where the old one stopped.
pub struct ComponentGate {
    runtime: GateRuntime,
    services: HostServices,
    live: Option<Live>,
    traps: u64,
    budget: CallBudget,
}

impl std::fmt::Debug for ComponentGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentGate")
            .field("traps", &self.traps)
            .finish()
    }
}

fn trapped(e: wasmtime::Error) -> GateDenial {
    let (code, message) = match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => (
            "guest_out_of_fuel",
            "the gate ran out of fuel; the call is denied and the instance replaced",
        ),
        Some(Trap::Interrupt) => (
            "guest_deadline_exceeded",
            "the gate ran past its deadline; the call is denied and the instance replaced",
        ),
        _ => (
            "guest_trapped",
            "the gate trapped; the call is denied and the instance replaced",
        ),
    };
    GateDenial {
        code: code.into(),
        cause: ErrorCause::Host,
        message: message.into(),
        audited: false,
        trap: Some(Arc::new(e)),
    }
}

/// [`ComponentGate::set_budget`] was given a kind of budget its engine cannot enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetKindMismatch;

impl std::fmt::Display for BudgetKindMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the runtime was loaded with the other kind of call budget (fuel or deadline)")
    }
}

impl std::error::Error for BudgetKindMismatch {}

/// Give `store` its budget for the next call (`backstop`: the wall-clock bound of a deadline).
fn arm(
    store: &mut Store<HostState>,
    budget: CallBudget,
    backstop: std::time::Duration,
) -> wasmtime::Result<()> {
    match budget {
        CallBudget::Fuel(fuel) => store.set_fuel(fuel),
        CallBudget::Deadline(d) => {
            store.data_mut().deadline = Some(GuestDeadline::start(d, backstop));
            // The guest's CPU time cannot outrun the wall clock: no budget runs out sooner.
            store.set_epoch_deadline(CallBudget::deadline_ticks(d.min(backstop)));
            Ok(())
        }
    }
}

fn from_wit(e: wit::GateError) -> GateDenial {
    GateDenial {
        code: e.code,
        cause: match e.cause {
            wit::ErrorCause::Peer => ErrorCause::Peer,
            wit::ErrorCause::Caller => ErrorCause::Caller,
            wit::ErrorCause::Host => ErrorCause::Host,
        },
        message: e.message,
        audited: e.audited,
        trap: None,
    }
}

fn wit_id(id: &RequestId) -> wit::RequestId {
    match id {
        RequestId::Number(n) => wit::RequestId::Number(*n),
        RequestId::Text(s) => wit::RequestId::Text(s.clone()),
    }
}

fn wit_server(s: &ServerIdentity) -> wit::ServerIdentity {
    match s {
        ServerIdentity::Origin(u) => wit::ServerIdentity::Origin(u.clone()),
        ServerIdentity::Endpoint(e) => wit::ServerIdentity::Endpoint(e.clone()),
    }
}

impl ComponentGate {
    /// A gate instance from `runtime` over `services` (instantiated on first use).
    pub fn new(runtime: &GateRuntime, services: HostServices) -> Self {
        Self {
            runtime: runtime.clone(),
            services,
            live: None,
            traps: 0,
            budget: runtime.limits.budget,
        }
    }

    /// Change what each call may spend (the runtime's limit is the default). The kind must
    /// be the runtime's: its engine was compiled either for fuel or for deadlines.
    pub fn set_budget(&mut self, budget: CallBudget) -> Result<(), BudgetKindMismatch> {
        let same_kind = matches!(
            (budget, self.runtime.limits.budget),
            (CallBudget::Fuel(_), CallBudget::Fuel(_))
                | (CallBudget::Deadline(_), CallBudget::Deadline(_))
        );
        if !same_kind {
            return Err(BudgetKindMismatch);
        }
        self.budget = budget;
        Ok(())
    }

    /// How many calls trapped so far.
    pub fn traps(&self) -> u64 {
        self.traps
    }

    /// Drop the instance; the next call gets a fresh one.
    pub fn reset(&mut self) {
        self.live = None;
    }

    /// The guest's linear memory size in bytes (0 before the first call).
    pub fn memory_bytes(&mut self) -> usize {
        self.live.as_mut().map_or(0, |live| {
            let store = &mut live.store;
            // The component's core memory is not exported through the WIT world, so count
            // what the limiter saw granted.
            store.data().limits_granted()
        })
    }

    fn instantiate(&self) -> Result<Live, GateDenial> {
        let limits = self.runtime.limits;
        let state = HostState {
            services: self.services.clone(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.max_memory_bytes)
                .instances(4)
                .tables(8)
                .memories(2)
                .trap_on_grow_failure(true)
                .build(),
            granted: 0,
            deadline: None,
        };
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| s as &mut dyn wasmtime::ResourceLimiter);
        if matches!(self.budget, CallBudget::Deadline(_)) {
            store.epoch_deadline_callback(on_epoch_deadline);
        }
        arm(&mut store, self.budget, limits.wall_backstop).map_err(trapped)?;
        let plugin = self.runtime.pre.instantiate(&mut store).map_err(trapped)?;
        Ok(Live { store, plugin })
    }

    fn call<T>(
        &mut self,
        f: impl FnOnce(
            &GatePlugin,
            &mut Store<HostState>,
        ) -> wasmtime::Result<Result<T, wit::GateError>>,
    ) -> Result<T, GateDenial> {
        if self.live.is_none() {
            self.live = Some(self.instantiate()?);
        }
        let Some(live) = self.live.as_mut() else {
            return Err(trapped(wasmtime::Error::msg("no instance")));
        };
        arm(
            &mut live.store,
            self.budget,
            self.runtime.limits.wall_backstop,
        )
        .map_err(trapped)?;
        match f(&live.plugin, &mut live.store) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(from_wit(e)),
            Err(e) => {
                self.live = None;
                self.traps = self.traps.saturating_add(1);
                Err(trapped(e))
            }
        }
    }

    /// Replace the instance with a fresh one now (benchmarks time this; calls do it lazily).
    pub fn instantiate_now(&mut self) -> Result<(), GateDenial> {
        self.live = Some(self.instantiate()?);
        Ok(())
    }

    /// Fuel the last call left unused (for benchmarks and the fuel budget).
    pub fn fuel_left(&self) -> Option<u64> {
        self.live.as_ref().and_then(|l| l.store.get_fuel().ok())
    }
}

impl GateApi for ComponentGate {
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial> {
        let registration = wit::Registration {
            request_id: wit_id(&r.request_id),
            server: wit_server(&r.server),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            params_json: r.params_json,
            policy: wit::Policy {
                round_trip_lifetime_ms: r.policy.round_trip_lifetime_ms,
                max_request_state_bytes: r.policy.max_request_state_bytes,
                max_rounds: r.policy.max_rounds,
                allowed_deprecated: r
                    .policy
                    .allowed_deprecated
                    .iter()
                    .map(|m| match m {
                        core::DeprecatedMethod::RootsList => wit::DeprecatedMethod::RootsList,
                        core::DeprecatedMethod::SamplingCreateMessage => {
                            wit::DeprecatedMethod::SamplingCreateMessage
                        }
                    })
                    .collect(),
                policy_version: r.policy.policy_version,
            },
        };
        self.call(|p, s| p.mrtr_gate_gate().call_register(s, &registration))
            .map(|ok| Registered {
                request_json: ok.request_json,
                params_sha256: ok.params_sha256,
                expires_at_ms: ok.expires_at_ms,
            })
    }

    fn accept_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        let server = wit_server(server);
        self.call(|p, s| {
            p.mrtr_gate_gate()
                .call_accept_response(s, &server, response_json)
        })
        .map(|v| match v {
            wit::ResponseVerdict::InputRequired(v) => {
                ResponseVerdict::InputRequired(core::ConsentView {
                    view_json: v.view_json,
                    view_sha256: v.view_sha256,
                    round: v.round,
                    input_keys: v.input_keys,
                    request_state_sha256: v.request_state_sha256,
                })
            }
            wit::ResponseVerdict::Complete => ResponseVerdict::Complete,
            wit::ResponseVerdict::Error(code) => ResponseVerdict::Error(code),
        })
    }

    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        let request = wit::RetryRequest {
            server: wit_server(&r.server),
            request_id: wit_id(&r.request_id),
            retry_id: wit_id(&r.retry_id),
            user: r.user,
            tenant: r.tenant,
            responses_json: r.responses_json,
        };
        self.call(|p, s| p.mrtr_gate_gate().call_build_retry(s, &request))
            .map(|ok| Retry {
                request_json: ok.request_json,
                round: ok.round,
                consent_receipt_id: ok.consent_receipt_id,
            })
    }

    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        let request = wit::FinishRequest {
            server: wit_server(&r.server),
            request_id: wit_id(&r.request_id),
            user: r.user,
            tenant: r.tenant,
            outcome: match r.outcome {
                CallerOutcome::Cancelled => wit::CallerOutcome::Cancelled,
                CallerOutcome::Error(reason) => wit::CallerOutcome::Error(reason),
            },
        };
        self.call(|p, s| p.mrtr_gate_gate().call_finish(s, &request))
            .map(|t| match t {
                wit::TerminalOutcome::Complete => TerminalOutcome::Complete,
                wit::TerminalOutcome::Error => TerminalOutcome::Error,
                wit::TerminalOutcome::Cancelled => TerminalOutcome::Cancelled,
                wit::TerminalOutcome::Expired => TerminalOutcome::Expired,
            })
    }

    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        self.call(|p, s| p.mrtr_gate_gate().call_expire_stale(s))
    }
}
