//! Ids are per server: a response, a retry or a `finish` from another server finds none of
//! this server's bindings, and every server numbers its requests from 1 without colliding.

use crate::common::*;
use crate::flows::support::*;
use mrtr_gate_core::{CallerOutcome, Policy, ResponseVerdict, ServerIdentity, TerminalOutcome};
use serde_json::json;

fn other() -> ServerIdentity {
    ServerIdentity::origin(OTHER_SERVER).unwrap()
}

#[test]
fn responses_from_another_server_find_no_binding_and_the_binding_survives() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let d = assert_code(
        fx.accept_from(OTHER_SERVER, 1, input_required(json!({"a": form("A")}))),
        "no_live_request",
    );
    assert!(d.audited);
    let ev = fx.last_event();
    assert_eq!(ev["reason"], "no_live_request");
    assert_eq!(
        ev["server"],
        redacted("https://evil.example.net", "https://evil.example.net/mcp")
    );
    // Another server cannot end it either.
    assert_code(
        fx.accept_from(OTHER_SERVER, 1, complete()),
        "no_live_request",
    );
    assert_code(
        fx.gate.accept_response(
            &ServerIdentity::endpoint("stdio:weather").unwrap(),
            &response(1, complete()),
        ),
        "no_live_request",
    );
    // Same host, other path or scheme: other server.
    assert_code(
        fx.accept_from("https://mcp.example.com/other", 1, complete()),
        "no_live_request",
    );
    assert_code(
        fx.accept_from("http://mcp.example.com/mcp", 1, complete()),
        "no_live_request",
    );
    // The rightful server (spelled differently, same origin after normalisation) still works.
    fx.round(1, input_required(json!({"a": form("A")})));
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "decline"}}));
    assert_code(
        fx.accept_from(OTHER_SERVER, 2, complete()),
        "no_live_request",
    );
    assert_eq!(
        fx.accept_from("HTTPS://MCP.Example.COM:443/mcp", 2, complete())
            .unwrap(),
        ResponseVerdict::Complete
    );
    assert!(terminal_of(&fx, 1).len() == 1);
}

#[test]
fn two_servers_use_the_same_ids_without_colliding() {
    let mut fx = Fx::new();
    let params = tool_params("get_weather", json!({"location": "Paris"}));
    fx.register_tool(1);
    // SDK clients number requests per connection: id 1 to the other server is another request.
    let mut on_other = registration(n(1), &params, Policy::default());
    on_other.server = other();
    fx.gate.register(on_other.clone()).unwrap();
    // Still one binding per (server, id).
    assert_code(fx.gate.register(on_other), "request_id_in_use");
    assert_code(
        fx.register(n(1), &params, Policy::default()),
        "request_id_in_use",
    );

    // Each server's round reaches its own binding.
    fx.round(1, input_required(json!({"a": form("A")})));
    let theirs = fx
        .accept_from(
            OTHER_SERVER,
            1,
            input_required_state(json!({"b": form("B")}), "x"),
        )
        .unwrap();
    let ResponseVerdict::InputRequired(theirs) = theirs else {
        panic!("expected a round");
    };
    assert_eq!(theirs.input_keys, vec!["b".to_owned()]);

    // A retry names its server: the other server's round takes the other server's answers.
    let mut wrong = retry_request(n(1), n(2), &json!({"a": {"action": "decline"}}));
    wrong.server = other();
    assert_code(
        fx.gate.build_retry(wrong),
        "input_response_population_mismatch",
    );
    let mut theirs_retry = retry_request(n(1), n(2), &json!({"b": {"action": "decline"}}));
    theirs_retry.server = other();
    let retry = fx.gate.build_retry(theirs_retry).unwrap();
    assert_eq!(params_of(&retry.request_json)["requestState"], "x");

    // The retry id 2 is taken on the other server only: this server may use it too.
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "decline"}}));
    // And neither server's retry id can be registered on its own server again.
    assert_code(
        fx.register(n(2), &params, Policy::default()),
        "request_id_in_use",
    );

    // Each ends on its own: finishing id 2 on the other server leaves this one live.
    let mut finish = finish_request(n(2), CallerOutcome::Cancelled);
    finish.server = other();
    assert_eq!(fx.gate.finish(finish).unwrap(), TerminalOutcome::Cancelled);
    assert_eq!(fx.accept(2, complete()).unwrap(), ResponseVerdict::Complete);
    assert_eq!(fx.storage.len(), 0);
    fx.assert_chain();
}

#[test]
fn a_retry_or_finish_naming_another_server_finds_no_binding() {
    let mut fx = Fx::new();
    fx.register_tool(1);
    fx.round(1, input_required(json!({"a": form("A")})));
    let mut retry = retry_request(n(1), n(2), &json!({"a": {"action": "decline"}}));
    retry.server = other();
    let d = assert_code(fx.gate.build_retry(retry), "inactive_mrtr_round");
    assert!(d.audited);
    assert_eq!(
        fx.last_event()["server"],
        redacted("https://evil.example.net", "https://evil.example.net/mcp")
    );
    let mut finish = finish_request(n(1), CallerOutcome::Cancelled);
    finish.server = other();
    assert_code(fx.gate.finish(finish), "unknown_request");
    // The binding is untouched: its own server's retry goes out.
    fx.retry_ok(n(1), n(2), &json!({"a": {"action": "decline"}}));
}

/// A consent provider that answers every prompt with a grant for one remembered view (a UI
/// that reuses an approval it gave before).
#[derive(Clone)]
struct Remembered(std::rc::Rc<std::cell::RefCell<String>>);

impl mrtr_gate_core::host::Consent for Remembered {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_core::host::ConsentReceipt, mrtr_gate_core::host::HostError> {
        Ok(mrtr_gate_core::host::ConsentReceipt {
            receipt_id: "remembered".into(),
            decision: mrtr_gate_core::host::ConsentDecision::Granted,
            method: mrtr_gate_core::host::ConsentMethod::PresetAnswers,
            view_sha256: self.0.borrow().clone(),
            responses_sha256: prompt.responses_sha256.clone(),
        })
    }
}

/// Consent is bound to the endpoint it was given for (AISVS C10 10.4.10): the same request
/// to another endpoint (another host, or only another path on the same host) is another
/// view, naming that endpoint, and an approval given for the first endpoint's view is
/// refused there (`consent_mismatch`); it holds only where it was given.
#[test]
fn a_consent_given_for_one_endpoint_is_refused_for_the_same_request_at_another() {
    use mrtr_gate_core::Gate;
    use mrtr_gate_core::host::Services;
    let fx = Fx::new();
    let remembered = std::rc::Rc::new(std::cell::RefCell::new(String::new()));
    let mut gate = Gate::new(Services {
        clock: fx.clock.clone(),
        storage: fx.storage.clone(),
        consent: Remembered(remembered.clone()),
        audit: fx.audit.clone(),
    });
    let params = tool_params("t", json!({"to": "ada"}));
    let round = input_required(json!({"a": form("A")}));
    let view_at = |gate: &mut Gate<_>, at: &ServerIdentity| {
        let mut r = registration(n(1), &params, Policy::default());
        r.server = at.clone();
        gate.register(r).unwrap();
        match gate
            .accept_response(at, &response(1, round.clone()))
            .unwrap()
        {
            ResponseVerdict::InputRequired(v) => v,
            other => panic!("expected a round, got {other:?}"),
        }
    };
    let approved = view_at(&mut gate, &server());
    *remembered.borrow_mut() = approved.view_sha256.clone();
    let answers = json!({"a": {"action": "decline"}});
    for moved in [
        other(),
        ServerIdentity::origin("https://mcp.example.com/v2/mcp").unwrap(),
    ] {
        let view = view_at(&mut gate, &moved);
        assert_ne!(view.view_sha256, approved.view_sha256);
        assert_eq!(parse(&view.view_json)["server"], moved.display());
        let mut r = retry_request(n(1), n(2), &answers);
        r.server = moved.clone();
        let d = assert_code(gate.build_retry(r), "consent_mismatch");
        assert!(d.audited);
    }
    assert!(
        fx.events()
            .iter()
            .all(|e| e["event"] != "consented" && e["event"] != "submitted")
    );
    // Where it was given, the approval holds.
    let retry = gate
        .build_retry(retry_request(n(1), n(2), &answers))
        .unwrap();
    assert_eq!(retry.consent_receipt_id.as_deref(), Some("remembered"));
    fx.assert_chain();
}
