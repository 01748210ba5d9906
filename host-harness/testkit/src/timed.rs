//! Stopwatches around a gate and a transport, for the benchmarks that time a real round trip
//! (bench-client, bench-proxy): what part of a call was spent inside the gate (or its
//! stand-in), and inside the transport.

use mrtr_gate_client::transport::{Outgoing, Transport, TransportError, Waiting};
use mrtr_gate_host::core::{
    ClientRetry, FinishRequest, Registered, Registration, ResponseVerdict, Retry, RetryRequest,
    ServerIdentity, TerminalOutcome, Unbound,
};
use mrtr_gate_host::{GateApi, GateDenial};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Time spent in whatever it is given to: the total, and each lap (microseconds). Clones share
/// it, across threads (a transport must be `Send`).
#[derive(Clone, Debug, Default)]
pub struct Stopwatch(Arc<Laps>);

#[derive(Debug, Default)]
struct Laps {
    total_ns: AtomicU64,
    laps_us: Mutex<Vec<f64>>,
}

impl Stopwatch {
    /// Run `f`, its time added to the total and kept as a lap.
    pub fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        let spent = started.elapsed();
        let ns = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.0.total_ns.fetch_add(ns, Ordering::Relaxed);
        self.0
            .laps_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(spent.as_secs_f64() * 1e6);
        out
    }

    /// The total since the last reset (microseconds).
    pub fn total_us(&self) -> f64 {
        // A benchmark's total stays far below 2^53 ns (104 days).
        #[allow(clippy::cast_precision_loss)]
        let ns = self.0.total_ns.load(Ordering::Relaxed) as f64;
        ns / 1e3
    }

    /// Each lap since the last reset (microseconds).
    pub fn laps_us(&self) -> Vec<f64> {
        self.0
            .laps_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Start again from nothing.
    pub fn reset(&self) {
        self.0.total_ns.store(0, Ordering::Relaxed);
        self.0
            .laps_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// A gate whose every call is timed.
pub struct TimedGate<G> {
    /// The gate.
    pub gate: G,
    /// Where its time goes.
    pub watch: Stopwatch,
}

impl<G: GateApi> GateApi for TimedGate<G> {
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial> {
        self.watch.time(|| self.gate.register(r))
    }
    fn accept_response(
        &mut self,
        s: &ServerIdentity,
        t: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        self.watch.time(|| self.gate.accept_response(s, t))
    }
    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        self.watch.time(|| self.gate.build_retry(r))
    }
    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial> {
        self.watch.time(|| self.gate.retry_from_client(r))
    }
    fn refuse_unbound(&mut self, s: &ServerIdentity, u: &str, t: &str, r: &Unbound) -> GateDenial {
        self.watch.time(|| self.gate.refuse_unbound(s, u, t, r))
    }
    fn finish(&mut self, r: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        self.watch.time(|| self.gate.finish(r))
    }
    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        self.watch.time(|| self.gate.expire_stale())
    }
}

/// A transport whose every request is timed (sending, the server, receiving).
pub struct TimedTransport<T> {
    /// The transport.
    pub inner: T,
    /// Where its time goes.
    pub watch: Stopwatch,
}

impl<T: Transport> Transport for TimedTransport<T> {
    fn server(&self) -> &ServerIdentity {
        self.inner.server()
    }
    fn request(
        &mut self,
        request: Outgoing<'_>,
        waiting: &mut dyn Waiting,
    ) -> Result<String, TransportError> {
        self.watch.time(|| self.inner.request(request, waiting))
    }
    fn notify(&mut self, method: &str, json: &str) -> Result<(), TransportError> {
        self.inner.notify(method, json)
    }
}

/// The `p` quantile of `xs` (0 to 1) by nearest rank, `xs` sorted in place; NaN when empty.
pub fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let last = xs.len().saturating_sub(1);
    // Nearest rank; the cast is of a fraction of a length.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let at = ((last as f64) * p).round() as usize;
    xs.get(at).copied().unwrap_or(f64::NAN)
}
