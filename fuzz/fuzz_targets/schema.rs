//! libFuzzer harness for the `schema` body (fuzz/src/bodies.rs), shared with the stable replay test.
#![no_main]

#[path = "../src/bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::run_schema(data));
