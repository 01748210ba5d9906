//! The seed's "Independent verification" list (AID-H-028.007) and the additions,
//! one named test each, run against the built component through the wasmtime host. Each
//! test runs the corpus scenarios that pin the behaviour (so other hosts run the same data).

use crate::support;

use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::host::{Storage, Write};
use mrtr_gate_host::core::{Policy, Registration, RequestId, RetryRequest, ServerIdentity};
use mrtr_gate_testkit::corpus::{self, run_scenario};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::json;

fn run(names: &[&str]) {
    for name in names {
        let scenario = corpus::scenario(name).unwrap_or_else(|e| panic!("{e}"));
        let hosts = ScenarioHosts::new();
        let mut gate = ComponentGate::new(support::runtime(), hosts.services());
        run_scenario(&scenario, &mut gate, &hosts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(gate.traps(), 0, "{name}: the component trapped");
    }
}

// ---- the seed's list ------------------------------------------------------------------

#[test]
fn seed_form_mode_with_omitted_mode() {
    run(&["form_omitted_mode"]);
}

#[test]
fn seed_form_mode_with_explicit_mode() {
    run(&["form_explicit_mode"]);
}

#[test]
fn seed_url_mode() {
    run(&[
        "url_mode_accept",
        "url_mode_http_refused",
        "url_mode_userinfo_refused",
        "url_mode_punycode_host",
    ]);
}

#[test]
fn seed_request_state_only_results() {
    run(&[
        "request_state_only",
        "request_state_byte_exact",
        "state_only_needs_no_consent",
    ]);
}

#[test]
fn seed_combined_requests_and_state() {
    run(&["combined_requests_and_state"]);
}

#[test]
fn seed_a_new_retry_id() {
    run(&["retry_id_must_be_new"]);
}

#[test]
fn seed_exact_wire_casing() {
    run(&["exact_wire_casing"]);
}

#[test]
fn seed_replay() {
    run(&[
        "replay_same_round",
        "replay_cross_user_and_late_submissions",
    ]);
}

#[test]
fn seed_expiry() {
    run(&[
        "expiry_late_response",
        "expiry_late_retry",
        "expiry_boundary",
        "expire_stale_sweep",
    ]);
}

#[test]
fn seed_unapproved_roots_and_sampling_requests() {
    run(&[
        "unapproved_roots_refused",
        "unapproved_sampling_refused",
        "approved_roots",
        "approved_sampling",
    ]);
}

/// Changed arguments: the caller cannot pass params to a retry at all (the retry is rebuilt
/// from the registered params), so the attack left is a changed binding in storage. The gate
/// checks the stored params against the digest taken at registration.
#[test]
fn seed_changed_arguments() {
    run(&["changed_arguments_cannot_reach_retry"]);
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(support::runtime(), hosts.services());
    let server = ServerIdentity::origin("https://server.example/mcp").unwrap();
    let params = json!({"name": "transfer", "arguments": {"to": "alice", "amount": 10},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    gate.register(Registration {
        request_id: RequestId::Number(1),
        server: server.clone(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: params.to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "requestState": "s"}});
    gate.accept_response(&server, &round.to_string()).unwrap();
    // Rewrite the stored arguments behind the gate's back.
    let key = hosts
        .storage
        .live_keys(mrtr_gate_host::core::ID_PREFIX)
        .pop()
        .unwrap();
    let stored = hosts
        .storage
        .read(&[key.as_str().into()])
        .unwrap()
        .remove(0)
        .present()
        .unwrap();
    let text = stored.value;
    assert!(text.contains("alice"));
    let forged = text.replace("\"to\":\"alice\"", "\"to\":\"mallory\"");
    assert_ne!(forged, text);
    let applied = hosts
        .storage
        .write(&[Write {
            key: &key,
            expected: stored.version,
            value: Some(&forged),
            ttl_ms: 60_000,
        }])
        .unwrap();
    assert_eq!(applied.len(), 1);
    let denied = gate
        .build_retry(RetryRequest {
            server: server.clone(),
            request_id: RequestId::Number(1),
            retry_id: RequestId::Number(2),
            user: "alice".into(),
            tenant: "acme".into(),
            responses_json: "{}".into(),
        })
        .unwrap_err();
    assert_eq!(denied.code, "mrtr_identity_or_argument_mismatch");
}

// ---- the additions ------------------------------------------------------------

#[test]
fn cross_server_response_is_refused() {
    run(&["cross_server_response", "endpoint_server_identity"]);
}

#[test]
fn cross_user_retry_is_refused() {
    run(&["cross_user_retry"]);
}

#[test]
fn cross_tenant_retry_is_refused() {
    run(&["cross_tenant_retry"]);
}

#[test]
fn extra_and_missing_keys_are_refused() {
    run(&["extra_and_missing_keys"]);
}

#[test]
fn external_ref_and_non_primitive_schemas_are_refused() {
    run(&[
        "schema_external_ref_refused",
        "schema_internal_ref_refused",
        "schema_nested_object_refused",
        "schema_pattern_refused",
    ]);
}

#[test]
fn schema_invalid_content_is_refused() {
    run(&[
        "content_schema_mismatch",
        "non_accept_with_content",
        "unknown_action",
    ]);
}

#[test]
fn multi_round_up_to_and_past_the_limit() {
    run(&["two_rounds_fresh_fields", "round_limit_exceeded"]);
}

#[test]
fn consent_refused_mismatched_or_unavailable_denies() {
    run(&["consent_refused", "consent_mismatch", "consent_unavailable"]);
}

#[test]
fn audit_append_and_readback_failures_deny() {
    run(&[
        "audit_fail_append_denies_retry",
        "audit_corrupt_readback_denies_retry",
        "audit_lose_writes_denies_retry",
        "audit_fail_readback_denies_retry",
        "audit_fault_on_round_ends_binding",
        "audit_fault_state_only_round_ends_binding",
    ]);
}

#[test]
fn storage_cas_failure_denies() {
    run(&["storage_lose_cas", "storage_fail"]);
}

#[test]
fn no_secret_value_ever_reaches_the_audit_sink() {
    run(&[
        "secrets_never_reach_audit",
        "resources_read_bound",
        "url_mode_accept",
    ]);
}

#[test]
fn undeclared_capabilities_are_refused() {
    run(&[
        "url_mode_undeclared",
        "no_capabilities_declared",
        "deprecated_approved_but_undeclared",
    ]);
}
