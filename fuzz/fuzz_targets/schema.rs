//! libFuzzer harness for the `schema` body (fuzz/bodies), shared with the stable replay test.
#![no_main]

use mrtr_gate_fuzz_bodies as bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::run_schema(data));
