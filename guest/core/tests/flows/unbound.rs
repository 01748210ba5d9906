//! `refuse-unbound`: what a relay refuses with no binding behind it (a server's own request
//! outside any round, an ungated answer or notification asking for input, a client's answers
//! no round asked for), on record in the trail with nothing of either side's free text.

use crate::common::*;
use mrtr_gate_core::memory::AuditFault;
use mrtr_gate_core::{ErrorCause, LEGACY_SERVER_REQUESTS, ServerIdentity, Unbound};
use serde_json::Value;

#[test]
fn each_legacy_request_is_refused_and_audited_with_its_method() {
    let mut fx = Fx::new();
    for method in LEGACY_SERVER_REQUESTS {
        let d = fx.gate.refuse_unbound(
            &server(),
            USER,
            TENANT,
            &Unbound::ServerRequest(method.into()),
        );
        assert_eq!(d.error.code(), "legacy_server_request");
        assert_eq!(d.error.cause(), ErrorCause::Peer);
        assert!(d.audited);
        let e = fx.last_event();
        assert_eq!(e["event"], "rejected");
        assert_eq!(e["reason"], "legacy_server_request");
        assert_eq!(e["cause"], "peer");
        assert_eq!(e["method"], method);
        assert_eq!(e["request_id"], Value::Null);
        let audited_server = e["server"].as_str().unwrap_or_default();
        assert!(audited_server.starts_with("https://mcp.example.com#sha256:"));
    }
    // The same principal digests as a binding of this user and tenant records.
    fx.register_tool(1);
    fx.round(1, state_only("s"));
    let received = fx.events_of(1)[0].clone();
    let refused = &fx.events()[0];
    for field in ["server", "user_sha256", "tenant_sha256"] {
        assert_eq!(refused[field], received[field], "{field}");
    }
    let r = fx.reconciled();
    assert_eq!(r.refused["legacy_server_request"].len(), 3);
    fx.assert_chain();
}

#[test]
fn another_method_is_refused_without_its_text_reaching_the_trail() {
    let mut fx = Fx::new();
    let method = "tools/SECRET-\u{202e}call";
    let d = fx.gate.refuse_unbound(
        &server(),
        USER,
        TENANT,
        &Unbound::ServerRequest(method.into()),
    );
    assert_eq!(d.error.code(), "legacy_server_request");
    assert!(d.audited);
    assert_eq!(fx.last_event()["method"], Value::Null);
    assert!(
        fx.audit
            .entries()
            .iter()
            .all(|e| !e.line.contains("SECRET"))
    );
    let d = fx.gate.refuse_unbound(
        &ServerIdentity::Endpoint("stdio:demo".into()),
        "",
        "",
        &Unbound::ServerRequest("x".repeat(1 << 20)),
    );
    assert!(
        d.audited,
        "an empty principal or a long method is refused all the same"
    );
    assert!(
        d.to_string().len() < 400,
        "the message quotes a bounded method"
    );
}

#[test]
fn a_failing_sink_or_clock_leaves_the_refusal_unaudited() {
    let mut fx = Fx::new();
    fx.audit.set_fault(AuditFault::FailAppend);
    let d = fx.gate.refuse_unbound(
        &server(),
        USER,
        TENANT,
        &Unbound::ServerRequest("roots/list".into()),
    );
    assert_eq!(d.error.code(), "legacy_server_request");
    assert!(!d.audited);
    fx.audit.set_fault(AuditFault::None);
    fx.clock.set(u64::MAX);
    let d = fx.gate.refuse_unbound(
        &server(),
        USER,
        TENANT,
        &Unbound::ServerRequest("roots/list".into()),
    );
    assert_eq!(d.error.code(), "clock_out_of_range");
    assert!(!d.audited);
    assert!(fx.events().is_empty());
}

#[test]
fn each_input_channel_outside_a_round_is_refused_and_audited_under_its_own_code() {
    let mut fx = Fx::new();
    let cases = [
        (
            Unbound::InputRequired,
            "input_required_not_allowed",
            ErrorCause::Peer,
        ),
        (
            Unbound::InputRequestsNotified,
            "input_requests_not_bound",
            ErrorCause::Peer,
        ),
        (
            Unbound::InputResponses,
            "input_responses_not_bound",
            ErrorCause::Caller,
        ),
    ];
    for (refusal, code, cause) in &cases {
        let (code, cause) = (*code, *cause);
        let d = fx.gate.refuse_unbound(&server(), USER, TENANT, refusal);
        assert_eq!(d.error.code(), code);
        assert_eq!(d.error.cause(), cause);
        assert!(d.audited, "{code}");
        let e = fx.last_event();
        assert_eq!(e["event"], "rejected");
        assert_eq!(e["reason"], code);
        assert_eq!(e["cause"], cause.as_str());
        assert_eq!(e["method"], Value::Null);
        assert_eq!(e["request_id"], Value::Null);
    }
    let r = fx.reconciled();
    for (_, code, _) in cases {
        assert_eq!(r.refused[code].len(), 1, "{code}");
    }
    fx.assert_chain();
}
