//! [`ComponentGate`]: the policy inside the wasm sandbox, behind the same [`GateApi`] as the
//! native engine ([`mrtr_gate_host::NativeGate`]), so a caller or a test corpus can use either.

use crate::bindings::GatePlugin;
use crate::bindings::exports::mrtr::gate::gate as wit;
use crate::deadline::{GuestDeadline, on_epoch_deadline};
use crate::imports::HostState;
use crate::runtime::{CallBudget, GateRuntime};
use crate::trap::denial_of;
use mrtr_gate_core::{
    ClientRetry, FinishRequest, Registered, Registration, ResponseVerdict, Retry, RetryRequest,
    ServerIdentity, TerminalOutcome, Unbound,
};
use mrtr_gate_host::{GateApi, GateDenial, HostServices};
use wasmtime::{Store, StoreLimitsBuilder};

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
            let deadline = GuestDeadline::start(d, backstop);
            store.set_epoch_deadline(CallBudget::deadline_ticks(deadline.first_look()));
            store.data_mut().deadline = Some(deadline);
            Ok(())
        }
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

    /// How many `digest` import calls the live instance made (0 before the first call).
    pub fn digests_answered(&self) -> u64 {
        self.live
            .as_ref()
            .map_or(0, |live| live.store.data().digests)
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
            digests: 0,
        };
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| s as &mut dyn wasmtime::ResourceLimiter);
        if matches!(self.budget, CallBudget::Deadline(_)) {
            store.epoch_deadline_callback(on_epoch_deadline);
        }
        arm(&mut store, self.budget, limits.wall_backstop).map_err(denial_of)?;
        let plugin = self
            .runtime
            .pre
            .instantiate(&mut store)
            .map_err(denial_of)?;
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
            return Err(denial_of(wasmtime::Error::msg("no instance")));
        };
        arm(
            &mut live.store,
            self.budget,
            self.runtime.limits.wall_backstop,
        )
        .map_err(denial_of)?;
        match f(&live.plugin, &mut live.store) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => {
                self.live = None;
                self.traps = self.traps.saturating_add(1);
                Err(denial_of(e))
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
        let registration = wit::Registration::from(r);
        self.call(|p, s| p.mrtr_gate_gate().call_register(s, &registration))
            .map(Into::into)
    }

    fn accept_response(
        &mut self,
        server: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        let server = wit::ServerIdentity::from(server);
        self.call(|p, s| {
            p.mrtr_gate_gate()
                .call_accept_response(s, &server, response_json)
        })
        .map(Into::into)
    }

    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        let request = wit::RetryRequest::from(r);
        self.call(|p, s| p.mrtr_gate_gate().call_build_retry(s, &request))
            .map(Into::into)
    }

    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial> {
        let request = wit::ClientRetry::from(r);
        self.call(|p, s| p.mrtr_gate_gate().call_retry_from_client(s, &request))
            .map(Into::into)
    }

    fn refuse_unbound(
        &mut self,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
        refusal: &Unbound,
    ) -> GateDenial {
        let server = wit::ServerIdentity::from(server);
        let refusal = wit::UnboundRefusal::from(refusal);
        // The export returns the denial itself: carried as the error of a call that cannot
        // succeed, so a trap and a denial come back the same way.
        let refused = self.call(|p, s| {
            p.mrtr_gate_gate()
                .call_refuse_unbound(s, &server, user, tenant, &refusal)
                .map(Err::<std::convert::Infallible, _>)
        });
        match refused {
            Err(denial) => denial,
            Ok(never) => match never {},
        }
    }

    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        let request = wit::FinishRequest::from(r);
        self.call(|p, s| p.mrtr_gate_gate().call_finish(s, &request))
            .map(Into::into)
    }

    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        self.call(|p, s| p.mrtr_gate_gate().call_expire_stale(s))
    }
}
