//! The end-to-end tests of mrtr-gate: the built component through the wasmtime host, and the
//! shared corpus through the component and the native core. One test binary, one module per
//! topic, so wasmtime is linked (and the component compiled) once.

#![cfg(test)]

mod anchored_trail;
mod component;
mod consent_view_golden;
mod consent_view_model;
mod corpus;
mod decided_consent;
mod doc_links;
mod error_docs;
mod file_audit;
mod host_key_vectors;
mod host_keys;
mod import_calls;
mod large_results;
mod packaging;
mod seed_verification;
mod shown_vectors;
mod storage_rollback;
mod support;
mod terminal_consent;
mod traceability;
mod trail_vectors;
