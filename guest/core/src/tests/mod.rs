//! Tests that need the gate's internals (differential tests of its own validator and
//! canonical writer). Tests of the public API live in `guest/core/tests/`.

mod oracle;
