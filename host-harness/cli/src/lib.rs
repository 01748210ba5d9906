//! # mrtr-gate-cli
//!
//! What the `mrtr-gate` command a user runs does over the wasmtime host ([`mrtr_gate_host`]),
//! kept out of the embedding crate's API: a call through the gate ([`call`]), the conformance
//! suite's client ([`conformance`]), the demo ([`demo`]), the host keys ([`keys`]), the flags and glue of `mrtr-gate proxy` ([`proxy`]) and of `mrtr-gate probe` ([`probe`]) and the host services a command's gates
//! run over ([`services`], shared with `mrtr-gate proxy`) and a consistent read of a trail
//! being written ([`trail`]). The
//! benchmarks, the corpus runner, the race worker and their fixtures are the test kit
//! (`mrtr-gate-testkit`), which depends on this crate and never the other way round.

pub mod call;
pub mod conformance;
pub mod demo;
pub mod keys;
pub mod probe;
pub mod proxy;
pub mod services;
pub mod trail;

/// An error and its sources, one after the other: `outer: cause: root cause`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
