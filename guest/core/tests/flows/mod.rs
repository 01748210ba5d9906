//! Native end-to-end flows of the gate (AID-H-028.007 G001/G002 independent verification):
//! every denial is asserted by its stable code.

mod support;

mod audit_content;
mod audit_faults;
mod client_retry;
mod clock;
mod consent;
mod cross_server;
mod deprecated_and_capabilities;
mod exact_json;
mod foreign_storage;
mod form_url_state;
mod identity_replay_expiry;
mod journal;
mod parser_refusals;
mod population_and_schema;
mod reconcile_orderings;
mod registration_refusals;
mod rounds;
mod spec_legal;
mod storage_calls;
mod storage_faults;
mod storage_versions;
mod unbound;
mod wire_casing;
