//! # mrtr-gate-testkit
//!
//! What the tests, the benchmarks and the profilers run around the gate, kept apart from the
//! product (`mrtr-gate-cli`, which does not depend on this crate): the shared scenario corpus
//! and its runner ([`corpus`]), the benchmark rounds ([`bench`], [`bench_client`],
//! [`bench_expire`], [`bench_redis`]), the multi-process race worker ([`race`]) and the
//! in-memory hosts they run over ([`fixture`]). The `mrtr-gate-testkit` command runs them for
//! `scripts/bench`, `scripts/instructions` and the race tests; the end-to-end tests and the
//! criterion benches use the library.

pub mod bench;
pub mod bench_client;
pub mod bench_expire;
pub mod bench_policy;
pub mod bench_proxy;
pub mod bench_redis;
pub mod corpus;
pub mod fixture;
pub mod race;
pub mod reference;
pub mod side_by_side;
pub mod timed;

pub use mrtr_gate_cli::error_chain;
