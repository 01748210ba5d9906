//! The interactive consent provider: it shows the view and the answers, and only `y` grants.

use crate::support;

use mrtr_gate_host::core::host::ConsentMethod;
use mrtr_gate_host::core::{
    Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_host::reference_hosts::TerminalConsent;
use mrtr_gate_host::{GateApi, HostServices};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::json;
use std::io::{Cursor, Write};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Write for Screen {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn round_with_typed_answer(typed: &str) -> (Result<(), String>, String) {
    let (result, shown, _) = round_with(typed, None);
    (result, shown)
}

/// One form round through the component with this terminal consent; returns the retry's
/// outcome, the screen and the trail.
fn round_with(
    typed: &str,
    method: Option<ConsentMethod>,
) -> (Result<(), String>, String, Vec<serde_json::Value>) {
    let screen = Screen::default();
    let mut consent = TerminalConsent::with_io(
        Box::new(Cursor::new(typed.as_bytes().to_vec())),
        Box::new(screen.clone()),
    );
    if let Some(method) = method {
        consent = consent.with_method(method);
    }
    let hosts = ScenarioHosts::new();
    let services = HostServices {
        consent: Arc::new(consent),
        ..hosts.services()
    };
    let mut gate = ComponentGate::new(support::runtime(), services);
    let server = ServerIdentity::origin("https://forms.example.com/mcp").unwrap();
    gate.register(Registration {
        request_id: RequestId::Number(1),
        server: server.clone(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: json!({"name": "signup", "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}).to_string(),
        policy: Policy::default(),
    })
    .unwrap();
    let round = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "inputRequests": {"who": {"method": "elicitation/create", "params": {"message": "Your e-mail?",
            "requestedSchema": {"type": "object", "properties": {"email": {"type": "string", "format": "email", "title": "E-mail"}}}}}}}});
    assert!(matches!(
        gate.accept_response(&server, &round.to_string()).unwrap(),
        ResponseVerdict::InputRequired(_)
    ));
    let r = gate.build_retry(RetryRequest {
        server: server.clone(),
        request_id: RequestId::Number(1),
        retry_id: RequestId::Number(2),
        user: "alice".into(),
        tenant: "acme".into(),
        responses_json:
            json!({"who": {"action": "accept", "content": {"email": "alice@example.com"}}})
                .to_string(),
    });
    let shown = String::from_utf8(screen.0.lock().unwrap().clone()).unwrap();
    let trail = hosts
        .audit
        .entries()
        .iter()
        .map(|e| serde_json::from_str(&e.line).unwrap())
        .collect();
    (r.map(|_| ()).map_err(|d| d.code.to_string()), shown, trail)
}

/// Through the component, the receipt's method reaches the trail: a person at the terminal
/// is `user_at_screen`; answers written ahead (`--answers`) are `preset_answers` even when
/// confirmed here.
#[test]
fn the_trail_names_how_the_terminal_decision_was_made() {
    for (method, name) in [
        (None, "user_at_screen"),
        (Some(ConsentMethod::PresetAnswers), "preset_answers"),
    ] {
        let (result, _, trail) = round_with("y\n", method);
        assert_eq!(result, Ok(()));
        let consented: Vec<_> = trail.iter().filter(|e| e["event"] == "consented").collect();
        assert_eq!(consented.len(), 1, "{trail:?}");
        assert_eq!(consented[0]["consent_method"], name);
        assert_eq!(consented[0]["schema"], "mrtr-gate/audit/v4");
    }
}

#[test]
fn y_grants_after_showing_the_server_the_field_and_the_answer() {
    let (result, shown) = round_with_typed_answer("y\n");
    assert_eq!(result, Ok(()));
    for expected in [
        "https://forms.example.com/mcp",
        "tools/call `signup`",
        "email",
        "E-mail",
        "alice@example.com",
        "[y/N]",
    ] {
        assert!(
            shown.contains(expected),
            "the prompt did not show `{expected}`:\n{shown}"
        );
    }
}

#[test]
fn anything_but_y_refuses() {
    for typed in ["n\n", "yes please\n", "\n", ""] {
        let (result, _) = round_with_typed_answer(typed);
        assert_eq!(result, Err("consent_refused".to_owned()), "typed {typed:?}");
    }
}
