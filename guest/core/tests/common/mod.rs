//! Shared fixture for the integration tests: a gate over the in-memory hosts, request and
//! response builders, and audit helpers.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use mrtr_gate_core::audit::verify_chain;
use mrtr_gate_core::host::Services;
use mrtr_gate_core::memory::{
    ManualClock, MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent,
};
use mrtr_gate_core::{
    AcceptedRound, CallerOutcome, Denial, FinishRequest, Gate, Policy, Registered, Registration,
    RequestId, ResponseVerdict, Retry, RetryRequest, ServerIdentity,
};
use serde_json::{Value, json};
use std::sync::Arc;

pub type Host = Services<Arc<ManualClock>, MemoryStorage, ScriptedConsent, MemoryAudit>;
pub type TestGate = Gate<Host>;

pub const T0: u64 = 1_700_000_000_000;
pub const USER: &str = "alice@example.com";
pub const TENANT: &str = "tenant-a";
pub const SERVER: &str = "https://mcp.example.com/mcp";
pub const OTHER_SERVER: &str = "https://evil.example.net/mcp";
pub const PROTOCOL: &str = "2026-07-28";

/// Everything one test needs: the gate and handles on the hosts it shares.
pub struct Fx {
    pub gate: TestGate,
    pub clock: Arc<ManualClock>,
    pub storage: MemoryStorage,
    pub consent: ScriptedConsent,
    pub audit: MemoryAudit,
}

impl Fx {
    pub fn new() -> Self {
        let clock = Arc::new(ManualClock::new(T0));
        let storage = MemoryStorage::new(clock.clone());
        let consent = ScriptedConsent::new(ScriptedAnswer::Grant);
        let audit = MemoryAudit::new();
        let gate = gate_over(&clock, &storage, &consent, &audit);
        Self {
            gate,
            clock,
            storage,
            consent,
            audit,
        }
    }

    /// A second gate instance over the very same hosts.
    pub fn second_gate(&self) -> TestGate {
        gate_over(&self.clock, &self.storage, &self.consent, &self.audit)
    }

    pub fn register(
        &mut self,
        id: RequestId,
        params: &Value,
        policy: Policy,
    ) -> Result<Registered, Denial> {
        self.gate.register(registration(id, params, policy))
    }

    /// Register a `tools/call` with the default capabilities and the default policy.
    pub fn register_tool(&mut self, id: i64) -> Registered {
        self.register(
            RequestId::Number(id),
            &tool_params("get_weather", json!({"location": "Paris"})),
            Policy::default(),
        )
        .unwrap_or_else(|d| panic!("register {id}: {d}"))
    }

    pub fn accept(
        &mut self,
        id: impl Into<Value>,
        result: Value,
    ) -> Result<ResponseVerdict, Denial> {
        let verdict = self.gate.accept_response(&server(), &response(id, result));
        if let Ok(ResponseVerdict::InputRequired(view)) = &verdict {
            assert_view_is_canonical(view);
        }
        verdict
    }

    pub fn accept_from(
        &mut self,
        from: &str,
        id: impl Into<Value>,
        result: Value,
    ) -> Result<ResponseVerdict, Denial> {
        let verdict = self.gate.accept_response(
            &ServerIdentity::origin(from).unwrap(),
            &response(id, result),
        );
        if let Ok(ResponseVerdict::InputRequired(view)) = &verdict {
            assert_view_is_canonical(view);
        }
        verdict
    }

    pub fn accept_text(&mut self, text: &str) -> Result<ResponseVerdict, Denial> {
        self.gate.accept_response(&server(), text)
    }

    /// Accept and expect an `input_required` round.
    ///
    /// Every view the fixture sees is checked to be canonical JSON with the digest given.
    pub fn round(&mut self, id: impl Into<Value>, result: Value) -> AcceptedRound {
        match self.accept(id, result) {
            Ok(ResponseVerdict::InputRequired(v)) => v,
            other => panic!("expected a round, got {other:?}"),
        }
    }

    pub fn retry(
        &mut self,
        request_id: RequestId,
        retry_id: RequestId,
        responses: &Value,
    ) -> Result<Retry, Denial> {
        self.gate
            .build_retry(retry_request(request_id, retry_id, responses))
    }

    pub fn retry_ok(
        &mut self,
        request_id: RequestId,
        retry_id: RequestId,
        responses: &Value,
    ) -> Retry {
        self.retry(request_id, retry_id, responses)
            .unwrap_or_else(|d| panic!("retry: {d}"))
    }

    /// Every audit event, parsed.
    pub fn events(&self) -> Vec<Value> {
        self.audit.events()
    }

    /// The events of one binding (by original request id), oldest first.
    pub fn events_of(&self, original: impl Into<Value>) -> Vec<Value> {
        let id = original.into();
        self.events()
            .into_iter()
            .filter(|e| e["request_id"] == id)
            .collect()
    }

    /// What `reconcile` makes of the trail.
    pub fn reconciled(&self) -> mrtr_gate_core::reconcile::Reconciliation {
        let lines: Vec<String> = self.audit.entries().into_iter().map(|e| e.line).collect();
        mrtr_gate_core::reconcile::reconcile(lines.iter().map(String::as_str))
    }

    /// The chain verifies and the trail reconciles.
    pub fn assert_reconciles(&self) {
        self.assert_chain();
        let r = self.reconciled();
        assert!(r.consistent(), "{}", r.to_json());
    }

    pub fn last_event(&self) -> Value {
        self.events().last().cloned().expect("an audit event")
    }

    pub fn assert_chain(&self) {
        let entries = self.audit.entries();
        let n = verify_chain(entries.iter().map(|e| e.line.as_str()))
            .unwrap_or_else(|b| panic!("audit chain broken: {b:?}"));
        assert_eq!(n, entries.len() as u64);
        for e in &entries {
            let parsed: Value = serde_json::from_str(&e.line).unwrap();
            assert_eq!(
                mrtr_gate_core::canonical::to_canonical(&parsed),
                e.line,
                "every audit line is canonical JSON"
            );
        }
    }
}

impl Default for Fx {
    fn default() -> Self {
        Self::new()
    }
}

pub fn gate_over(
    clock: &Arc<ManualClock>,
    storage: &MemoryStorage,
    consent: &ScriptedConsent,
    audit: &MemoryAudit,
) -> TestGate {
    Gate::new(Services {
        clock: clock.clone(),
        storage: storage.clone(),
        consent: consent.clone(),
        audit: audit.clone(),
    })
}

pub fn server() -> ServerIdentity {
    ServerIdentity::origin(SERVER).unwrap()
}

/// The `_meta` every 2026-07-28 request carries, with form and url elicitation declared.
pub fn meta() -> Value {
    meta_with(json!({"elicitation": {"form": {}, "url": {}}}))
}

pub fn meta_with(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

pub fn tool_params(name: &str, arguments: Value) -> Value {
    json!({"_meta": meta(), "name": name, "arguments": arguments})
}

pub fn tool_params_caps(name: &str, arguments: Value, capabilities: Value) -> Value {
    json!({"_meta": meta_with(capabilities), "name": name, "arguments": arguments})
}

pub fn registration(id: RequestId, params: &Value, policy: Policy) -> Registration {
    Registration {
        request_id: id,
        server: server(),
        user: USER.into(),
        tenant: TENANT.into(),
        method: "tools/call".into(),
        params_json: params.to_string(),
        policy,
    }
}

pub fn retry_request(
    request_id: RequestId,
    retry_id: RequestId,
    responses: &Value,
) -> RetryRequest {
    RetryRequest {
        server: server(),
        request_id,
        retry_id,
        user: USER.into(),
        tenant: TENANT.into(),
        responses_json: responses.to_string(),
    }
}

/// `finish` on behalf of the fixture's user and tenant.
pub fn finish_request(request_id: RequestId, outcome: CallerOutcome) -> FinishRequest {
    FinishRequest {
        server: server(),
        request_id,
        user: USER.into(),
        tenant: TENANT.into(),
        outcome,
    }
}

/// `{"jsonrpc":"2.0","id":..,"result":..}` as text.
pub fn response(id: impl Into<Value>, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id.into(), "result": result}).to_string()
}

pub fn error_response(id: impl Into<Value>, code: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id.into(), "error": {"code": code, "message": "boom"}})
        .to_string()
}

/// A flat form schema with three fields: a required string, an integer and a boolean.
pub fn form_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "login": {"type": "string", "title": "GitHub login", "minLength": 1, "maxLength": 39},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "confirm": {"type": "boolean", "description": "Really?"}
        },
        "required": ["login"]
    })
}

pub fn form_content() -> Value {
    json!({"login": "octocat", "count": 3, "confirm": true})
}

/// An `elicitation/create` in form mode; `mode: None` omits the field.
pub fn form_request(mode: Option<&str>, message: &str, schema: Value) -> Value {
    let mut params = json!({"message": message, "requestedSchema": schema});
    if let Some(m) = mode {
        params["mode"] = json!(m);
    }
    json!({"method": "elicitation/create", "params": params})
}

pub fn form(message: &str) -> Value {
    form_request(None, message, form_schema())
}

pub fn url_request(url: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": url}})
}

pub fn input_required(requests: Value) -> Value {
    json!({"resultType": "input_required", "inputRequests": requests})
}

pub fn input_required_state(requests: Value, state: &str) -> Value {
    json!({"resultType": "input_required", "inputRequests": requests, "requestState": state})
}

pub fn state_only(state: &str) -> Value {
    json!({"resultType": "input_required", "requestState": state})
}

pub fn complete() -> Value {
    json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]})
}

pub fn accept_with(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not json ({e}): {text}"))
}

pub fn code(d: &Denial) -> &'static str {
    d.error.code()
}

/// Assert a result is a denial with exactly `expected` as its code.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(r: Result<T, Denial>, expected: &str) -> Denial {
    match r {
        Ok(v) => panic!("expected `{expected}`, got Ok({v:?})"),
        Err(d) => {
            assert_eq!(d.error.code(), expected, "wrong code: {d}");
            d
        }
    }
}

/// The gate writes the consent view directly as text: it must be exactly the canonical JSON
/// (RFC 8785) of what it says, read back whole by the typed [`ConsentView`] the hosts use,
/// and `view_sha256` the digest of that text.
pub fn assert_view_is_canonical(view: &AcceptedRound) {
    let parsed: Value = serde_json::from_str(&view.view_json).unwrap();
    assert_eq!(
        mrtr_gate_core::canonical::to_canonical(&parsed),
        view.view_json,
        "the consent view is not canonical json"
    );
    let typed = mrtr_gate_core::ConsentView::parse(&view.view_json)
        .unwrap_or_else(|e| panic!("{e}: {}", view.view_json));
    assert_eq!(typed.to_canonical_json(), view.view_json);
    assert_eq!(typed.round, view.round);
    let keys: Vec<&str> = typed.inputs.iter().map(|i| i.key()).collect();
    assert_eq!(keys, view.input_keys);
    assert_eq!(
        mrtr_gate_core::digest::sha256_hex(view.view_json.as_bytes()),
        view.view_sha256
    );
}
