//! One API, two engines: the [`GateApi`] trait, and [`NativeGate`], the core compiled
//! natively over the host's services. The sandboxed engine, `ComponentGate`, is in the
//! `mrtr-gate-wasmtime` crate; both speak the core's types, so a caller or a test corpus can
//! use either.

use crate::denial::GateDenial;
use crate::services::HostServices;
use mrtr_gate_core as core;
use mrtr_gate_core::{
    ClientRetry, FinishRequest, Registered, Registration, ResponseVerdict, Retry, RetryRequest,
    ServerIdentity, TerminalOutcome, Unbound,
};

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
    /// Hold a client's own retry to its round, then build it as `build_retry` does with the
    /// client's answers (a relay's path: `mrtr-gate proxy`).
    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial>;
    /// Record a relay's refusal of a message no binding judges (a server's request outside
    /// any round, an ungated answer or notification asking for input, a client's answers no
    /// round asked for): the audited denial.
    fn refuse_unbound(
        &mut self,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
        refusal: &Unbound,
    ) -> GateDenial;
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
    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial> {
        (**self).retry_from_client(r)
    }
    fn refuse_unbound(
        &mut self,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
        refusal: &Unbound,
    ) -> GateDenial {
        (**self).refuse_unbound(server, user, tenant, refusal)
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
    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial> {
        self.gate.retry_from_client(r).map_err(Into::into)
    }
    fn refuse_unbound(
        &mut self,
        server: &ServerIdentity,
        user: &str,
        tenant: &str,
        refusal: &Unbound,
    ) -> GateDenial {
        self.gate
            .refuse_unbound(server, user, tenant, refusal)
            .into()
    }
    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        self.gate.finish(r).map_err(Into::into)
    }
    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        self.gate.expire_stale().map_err(Into::into)
    }
}
