//! # mrtr-gate-cli
//!
//! What the `mrtr-gate` command runs over the wasmtime host ([`mrtr_gate_host`]), kept out of
//! the embedding crate's API: the shared scenario corpus and its runner ([`corpus`]), the
//! benchmark rounds ([`bench`]), the demo ([`demo`]), and the in-memory hosts all of them
//! run over ([`fixture`]). The end-to-end tests and the criterion benches use them too.

pub mod bench;
pub mod bench_client;
pub mod bench_expire;
pub mod bench_redis;
pub mod call;
pub mod conformance;
pub mod corpus;
pub mod demo;
pub mod fixture;
pub mod keys;
pub mod race;

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
