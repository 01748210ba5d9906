//! The fuzz target bodies, one `run_<target>` per entry point that takes untrusted data.
//!
//! Shared by the libFuzzer harness (`fuzz/fuzz_targets/*.rs`, nightly) and the stable replay
//! test (`guest/core/tests/fuzz_replay.rs`), so the corpus and every regression run through the
//! very same code on both toolchains. Each body asserts more than "no panic": a denial's code is
//! one of `ALL_CODES`, the audit chain still verifies after every call, and what the gate hands
//! back to send (a request, a retry) is JSON carrying the registered method and the caller's id.
#![allow(
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
use mrtr_gate_core::reconcile::reconcile;
use mrtr_gate_core::{
    ALL_CODES, Denial, Gate, GateError, Policy, Registration, RequestId, ResponseVerdict,
    RetryRequest, ServerIdentity,
};
use serde_json::{Value, json};
use std::sync::Arc;

type Host = Services<Arc<ManualClock>, MemoryStorage, ScriptedConsent, MemoryAudit>;

const T0: u64 = 1_700_000_000_000;
const SERVER: &str = "https://mcp.example.com/mcp";
const USER: &str = "alice@example.com";
const TENANT: &str = "tenant-a";
const METHOD: &str = "tools/call";

/// A gate over fresh in-memory hosts, granting every consent prompt.
struct Fx {
    gate: Gate<Host>,
    audit: MemoryAudit,
}

impl Fx {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(T0));
        let storage = MemoryStorage::new(clock.clone());
        let consent = ScriptedConsent::new(ScriptedAnswer::Grant);
        let audit = MemoryAudit::new();
        let gate = Gate::new(Services {
            clock,
            storage,
            consent,
            audit: audit.clone(),
        });
        Self { gate, audit }
    }

    /// Every line the gate wrote must still form one verified chain, whatever it was fed.
    fn assert_chain(&self) {
        let entries = self.audit.entries();
        let n = verify_chain(entries.iter().map(|e| e.line.as_str()))
            .unwrap_or_else(|b| panic!("audit chain broken: {b:?}"));
        assert_eq!(n, entries.len() as u64, "every line is in the chain");
    }

    /// Register the fuzz targets' request: a `tools/call` with form and url elicitation declared.
    fn register_tool(&mut self, id: i64) {
        let params = json!({
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
            },
            "name": "get_weather",
            "arguments": {"location": "Paris"},
        });
        let r = self.gate.register(Registration {
            request_id: RequestId::Number(id),
            server: server(),
            user: USER.into(),
            tenant: TENANT.into(),
            method: METHOD.into(),
            params_json: params.to_string(),
            policy: Policy::default(),
        });
        if let Err(d) = r {
            panic!("the fixed registration is refused: {d}");
        }
        self.assert_chain();
    }

    fn accept(&mut self, text: &str) -> Result<ResponseVerdict, Denial> {
        let verdict = self.gate.accept_response(&server(), text);
        check(&verdict);
        self.assert_chain();
        verdict
    }

    /// A retry of `id` answered with `responses_json`; a retry returned must be sendable.
    fn retry(&mut self, id: i64, retry_id: i64, responses_json: String) {
        let r = self.gate.build_retry(RetryRequest {
            server: server(),
            request_id: RequestId::Number(id),
            retry_id: RequestId::Number(retry_id),
            user: USER.into(),
            tenant: TENANT.into(),
            responses_json,
        });
        check(&r);
        if let Ok(retry) = &r {
            let v = assert_request(&retry.request_json, METHOD);
            assert_eq!(v["id"], json!(retry_id), "the retry goes out on the new id");
            assert!(
                v["params"]["inputResponses"].is_object()
                    || v["params"].get("requestState").is_some(),
                "a retry carries answers or state: {}",
                retry.request_json
            );
        }
        self.assert_chain();
    }
}

fn server() -> ServerIdentity {
    ServerIdentity::origin(SERVER).unwrap()
}

fn assert_code(e: &GateError) {
    let code = e.code();
    assert!(ALL_CODES.contains(&code), "unknown denial code {code}");
}

fn check<T>(r: &Result<T, Denial>) {
    if let Err(d) = r {
        assert_code(&d.error);
    }
}

/// The request text the gate hands back is a JSON-RPC request with the method it was given.
fn assert_request(text: &str, method: &str) -> Value {
    let v: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("the gate returned a request that is not JSON ({e}): {text}"));
    assert_eq!(v["jsonrpc"], "2.0", "{text}");
    assert_eq!(v["method"], method, "{text}");
    v
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// Split at the first NUL byte (no JSON text holds a raw NUL): the second part may be absent.
fn split_nul(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    }
}

fn form_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "login": {"type": "string", "title": "GitHub login", "minLength": 1, "maxLength": 39},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "email": {"type": "string", "format": "email"},
            "color": {"type": "string", "enum": ["red", "green"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "confirm": {"type": "boolean", "description": "Really?"}
        },
        "required": ["login"]
    })
}

fn round_result() -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": {
            "form": {"method": "elicitation/create", "params": {"message": "Who?", "requestedSchema": form_schema()}},
            "link": {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://auth.example.com/login?x=1", "elicitationId": "e-1"}}
        },
        "requestState": "opaque-state-1"
    })
}

fn envelope(id: i64, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// `response`: the raw text of a server message, to a fresh binding and to one with a round open.
pub fn run_response(data: &[u8]) {
    let msg = text(data);
    let mut fx = Fx::new();
    fx.register_tool(1);
    let _ = fx.accept(&msg);

    let mut fx = Fx::new();
    fx.register_tool(1);
    let open = fx.accept(&envelope(1, &round_result()));
    assert!(
        matches!(open, Ok(ResponseVerdict::InputRequired(_))),
        "the fixed round is refused: {open:?}"
    );
    // A round arrives on the retry's id; the message may also name the original id.
    fx.retry(
        1,
        2,
        json!({"form": {"action": "accept", "content": {"login": "octocat"}}, "link": {"action": "accept"}})
            .to_string(),
    );
    let _ = fx.accept(&msg);
}

/// `answers`: the `inputResponses` text for an open form and URL round.
pub fn run_answers(data: &[u8]) {
    let mut fx = Fx::new();
    fx.register_tool(1);
    let open = fx.accept(&envelope(1, &round_result()));
    assert!(
        matches!(open, Ok(ResponseVerdict::InputRequired(_))),
        "{open:?}"
    );
    fx.retry(1, 2, text(data));
}

/// `schema`: a `requestedSchema` (before the first NUL) embedded in an otherwise valid round,
/// then an accepted answer whose content is what follows the NUL.
pub fn run_schema(data: &[u8]) {
    let (schema, content) = split_nul(data);
    let mut fx = Fx::new();
    fx.register_tool(1);
    let msg = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"input_required","inputRequests":{{"q":{{"method":"elicitation/create","params":{{"message":"m","requestedSchema":{}}}}}}}}}}}"#,
        text(schema)
    );
    let verdict = fx.accept(&msg);
    if let (Ok(ResponseVerdict::InputRequired(_)), Some(content)) = (verdict, content) {
        fx.retry(
            1,
            2,
            format!(
                r#"{{"q":{{"action":"accept","content":{}}}}}"#,
                text(content)
            ),
        );
    }
}

/// `url`: the `url` of a URL-mode elicitation, then its acceptance; the same text as a server
/// origin and an endpoint id.
pub fn run_url(data: &[u8]) {
    let url = text(data);
    if let Err(e) = ServerIdentity::origin(&url) {
        assert_code(&e);
    }
    if let Err(e) = ServerIdentity::endpoint(&url) {
        assert_code(&e);
    }
    let mut fx = Fx::new();
    fx.register_tool(1);
    let result = json!({
        "resultType": "input_required",
        "inputRequests": {"link": {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": url, "elicitationId": "e-1"}}}
    });
    if let Ok(ResponseVerdict::InputRequired(view)) = fx.accept(&envelope(1, &result)) {
        let v: Value = serde_json::from_str(&view.view_json).unwrap();
        assert!(v.is_object(), "{}", view.view_json);
        fx.retry(1, 2, json!({"link": {"action": "accept"}}).to_string());
    }
}

/// `register`: NUL-separated method, params text, user, tenant, id and server.
pub fn run_register(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0).map(text);
    let method = parts.next().unwrap_or_default();
    let params = parts.next().unwrap_or_default();
    let user = parts.next().unwrap_or_else(|| USER.into());
    let tenant = parts.next().unwrap_or_else(|| TENANT.into());
    let id = parts
        .next()
        .map_or(RequestId::Number(1), |s| match s.parse::<i64>() {
            Ok(n) => RequestId::Number(n),
            Err(_) => RequestId::Text(s),
        });
    let server = match parts.next() {
        None => server(),
        Some(s) => match ServerIdentity::origin(&s).or_else(|_| ServerIdentity::endpoint(&s)) {
            Ok(server) => server,
            Err(e) => {
                assert_code(&e);
                return;
            }
        },
    };
    let mut fx = Fx::new();
    let r = fx.gate.register(Registration {
        request_id: id.clone(),
        server: server.clone(),
        user,
        tenant,
        method: method.clone(),
        params_json: params,
        policy: Policy::default(),
    });
    check(&r);
    fx.assert_chain();
    if let Ok(reg) = r {
        let v = assert_request(&reg.request_json, &method);
        assert_eq!(v["id"], id.to_json(), "the request goes out on its id");
        // The binding is live: a complete result for it ends it.
        let done = fx.gate.accept_response(
            &server,
            &json!({"jsonrpc": "2.0", "id": id.to_json(), "result": {"resultType": "complete", "content": []}})
                .to_string(),
        );
        check(&done);
        fx.assert_chain();
    }
}

/// `trail`: audit trail text read back by a host. The first byte picks the mode: 0 verifies the
/// rest as the whole trail; otherwise a real trail is produced and the rest replaces one of its
/// lines (picked by the first byte), so the fuzzer starts from chains that verify.
pub fn run_trail(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let rest = text(rest);
    let mut lines: Vec<String> = if mode == 0 {
        rest.split('\n').map(str::to_owned).collect()
    } else {
        let mut fx = Fx::new();
        fx.register_tool(1);
        let _ = fx.accept(&envelope(1, &round_result()));
        fx.retry(
            1,
            2,
            json!({"form": {"action": "accept", "content": {"login": "octocat"}}, "link": {"action": "decline"}})
                .to_string(),
        );
        let _ = fx.accept(&envelope(
            2,
            &json!({"resultType": "complete", "content": []}),
        ));
        let mut lines: Vec<String> = fx.audit.entries().into_iter().map(|e| e.line).collect();
        let clean = reconcile(lines.iter().map(String::as_str));
        assert!(
            clean.consistent(),
            "the gate's own trail reconciles: {}",
            clean.to_json()
        );
        let i = usize::from(mode) % (lines.len() + 1);
        if i == lines.len() {
            lines.push(rest);
        } else {
            lines[i] = rest;
        }
        lines
    };
    if lines.len() > 4096 {
        lines.truncate(4096);
    }
    let refs = lines.iter().map(String::as_str);
    if let Ok(n) = verify_chain(refs.clone()) {
        assert_eq!(n, lines.len() as u64, "a verified chain counts every line");
    }
    let r = reconcile(refs);
    let _ = r.consistent();
    let _ = r.to_json().to_string();
}
