//! Differential test: a small executable model of the gate's rules, written from the rules
//! (docs/errors.md, the control's G001/G002, the MRTR notes), not from the gate's code. Random
//! operation sequences run through the real gate (two instances over one in-memory store)
//! and through the model; for every operation both must allow with the same visible result,
//! or deny with the same code. See docs/testing.md for what it covers and leaves out.

#![cfg(test)]

#[path = "../common/mod.rs"]
mod common;
mod driver;
mod ops;
mod rules;

use driver::*;
use ops::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        // Next to this file (the default would be `tests/proptest-regressions/main.txt`,
        // a name every `tests/*/main.rs` shares).
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "tests/model/main.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    /// For every operation, the gate and the model agree: allowed with the same visible
    /// result, or denied with the same code.
    #[test]
    fn gate_agrees_with_the_model(ops in prop::collection::vec(arb_op(), 1..60)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
        }
    }
}
