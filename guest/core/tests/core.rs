//! The core's integration tests, natively, in one binary: the end-to-end flows (`flows/`, a
//! module per topic), the differential model (`model/`), and the property tests
//! (`properties/`), over the shared fixture (`common/`). The fuzz corpus replay is
//! `fuzz_replay.rs`.

#![cfg(test)]

mod common;
mod flows;
mod model;
mod properties;
