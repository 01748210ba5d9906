//! `mrtr-gate demo`: realistic rounds end to end through the component, with embedded
//! defaults (no services): what the consent screen shows, each verdict, each retry sent,
//! and the audit trail.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use mrtr_gate_core::host::{Consent, ConsentPrompt, ConsentReceipt, HostError};
use mrtr_gate_core::{
    CallerOutcome, FinishRequest, Policy, Registration, RequestId, ResponseVerdict, RetryRequest,
    ServerIdentity,
};
use mrtr_gate_host::consent_screen::{render_answers, render_view_text};
use mrtr_gate_host::reference_hosts::{
    FileAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent, SystemClock,
};
use mrtr_gate_host::{GateApi, GateDenial, HostServices};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, PoisonError};

/// A consent provider that prints what the screen shows, then lets `inner` decide.
struct ShowingConsent {
    inner: ScriptedConsent,
    log: Arc<Mutex<Vec<String>>>,
}

impl Consent for ShowingConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let receipt = self.inner.request_consent(prompt)?;
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.push(render_view_text(&prompt.view_json).0);
        log.push(format!(
            "  answers:\n{}\n  user: {:?} (receipt {})",
            render_answers(&prompt.responses_json),
            receipt.decision,
            receipt.receipt_id
        ));
        Ok(receipt)
    }
}

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

fn response(id: &RequestId, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id.to_json(), "result": result}).to_string()
}

struct Demo {
    gate: ComponentGate,
    consent: ScriptedConsent,
    log: Arc<Mutex<Vec<String>>>,
    out: String,
    server: ServerIdentity,
    next_id: i64,
}

impl Demo {
    fn say(&mut self, line: impl AsRef<str>) {
        self.out.push_str(line.as_ref());
        self.out.push('\n');
    }

    fn flush_consent(&mut self) {
        let lines: Vec<String> =
            std::mem::take(&mut *self.log.lock().unwrap_or_else(PoisonError::into_inner));
        for l in lines {
            self.say(l);
        }
    }

    fn id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId::Number(self.next_id)
    }

    fn register(
        &mut self,
        name: &str,
        args: Value,
        caps: Value,
        policy: Policy,
    ) -> Result<RequestId, GateDenial> {
        let id = self.id();
        let params = json!({"name": name, "arguments": args, "_meta": meta(caps)});
        let reg = self.gate.register(Registration {
            request_id: id.clone(),
            server: self.server.clone(),
            user: "alice@example.com".into(),
            tenant: "acme".into(),
            method: "tools/call".into(),
            params_json: params.to_string(),
            policy,
        })?;
        self.say(format!("→ request  {}", reg.request_json));
        Ok(id)
    }

    fn verdict(&mut self, id: &RequestId, result: Value) -> Result<ResponseVerdict, GateDenial> {
        let text = response(id, result);
        let shown: String = text.chars().take(160).collect();
        self.say(format!(
            "← response {shown}{}",
            if text.len() > 160 { "…" } else { "" }
        ));
        let server = self.server.clone();
        let v = self.gate.accept_response(&server, &text);
        match &v {
            Ok(ResponseVerdict::InputRequired(view)) => self.say(format!(
                "  verdict: input_required accepted (round {}, keys {:?}, view sha256 {}…)",
                view.round,
                view.input_keys,
                &view.view_sha256.chars().take(16).collect::<String>()
            )),
            Ok(ResponseVerdict::Complete) => self.say("  verdict: complete, binding closed"),
            Ok(ResponseVerdict::Error(c)) => {
                self.say(format!("  verdict: json-rpc error {c}, binding closed"))
            }
            Err(d) => self.say(format!(
                "  verdict: DENIED `{}` ({:?}): {}",
                d.code, d.cause, d.message
            )),
        }
        v
    }

    fn retry(
        &mut self,
        id: &RequestId,
        tenant: &str,
        responses: Value,
    ) -> Result<RequestId, GateDenial> {
        let retry_id = self.id();
        let r = self.gate.build_retry(RetryRequest {
            server: self.server.clone(),
            request_id: id.clone(),
            retry_id: retry_id.clone(),
            user: "alice@example.com".into(),
            tenant: tenant.into(),
            responses_json: responses.to_string(),
        });
        self.flush_consent();
        match &r {
            Ok(retry) => {
                let shown: String = retry.request_json.chars().take(220).collect();
                self.say(format!(
                    "→ retry    {shown}{}",
                    if retry.request_json.len() > 220 {
                        "…"
                    } else {
                        ""
                    }
                ));
            }
            Err(d) => self.say(format!(
                "  retry: DENIED `{}` ({:?}): {}",
                d.code, d.cause, d.message
            )),
        }
        r.map(|_| retry_id)
    }
}

fn form_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "full_name": {"type": "string", "title": "Full name", "minLength": 1, "maxLength": 100},
            "seat": {"type": "string", "title": "Seat", "oneOf": [
                {"const": "aisle", "title": "Aisle"}, {"const": "window", "title": "Window"}]},
            "bags": {"type": "integer", "title": "Checked bags", "minimum": 0, "maximum": 3}
        },
        "required": ["full_name", "seat"]
    })
}

/// Run the demo and return what it printed. `audit_path` receives the JSON-lines audit log.
pub fn run(runtime: &GateRuntime, audit_path: &std::path::Path) -> Result<String, String> {
    let _ = std::fs::remove_file(audit_path);
    let audit = Arc::new(FileAudit::open(audit_path).map_err(|e| crate::error_chain(&e))?);
    let clock = Arc::new(SystemClock);
    let consent = ScriptedConsent::new(ScriptedAnswer::Grant);
    let log = Arc::new(Mutex::new(Vec::new()));
    let services = HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent: Arc::new(ShowingConsent {
            inner: consent.clone(),
            log: log.clone(),
        }),
        audit: audit.clone(),
    };
    let mut d = Demo {
        gate: ComponentGate::new(runtime, services),
        consent,
        log,
        out: String::new(),
        server: ServerIdentity::origin("https://flights.example.com/mcp")
            .map_err(|e| e.to_string())?,
        next_id: 0,
    };
    let both = json!({"elicitation": {"form": {}, "url": {}}});
    let e = |x: GateDenial| x.to_string();

    d.say("== 1. form round with state: book a flight ==");
    let id = d
        .register(
            "book_flight",
            json!({"from": "OSL", "to": "SFO"}),
            both.clone(),
            Policy::default(),
        )
        .map_err(e)?;
    d.verdict(
        &id,
        json!({
            "resultType": "input_required",
            "inputRequests": {"passenger": {"method": "elicitation/create",
                "params": {"message": "Who is flying?", "requestedSchema": form_schema()}}},
            "requestState": "sealed:v1:Zmxp Z2h0LTQy"
        }),
    )
    .map_err(e)?;
    let retry_id = d
        .retry(
            &id,
            "acme",
            json!({"passenger": {"action": "accept",
        "content": {"full_name": "Alice Example", "seat": "aisle", "bags": 1}}}),
        )
        .map_err(e)?;
    d.verdict(
        &retry_id,
        json!({"resultType": "complete", "content": [{"type": "text", "text": "booked"}]}),
    )
    .map_err(e)?;

    d.say("\n== 2. url round: a payment page, Punycode host flagged ==");
    let id = d
        .register(
            "pay_invoice",
            json!({"invoice": "INV-7"}),
            both.clone(),
            Policy::default(),
        )
        .map_err(e)?;
    d.verdict(&id, json!({
        "resultType": "input_required",
        "inputRequests": {"pay": {"method": "elicitation/create", "params": {"mode": "url",
            "message": "Authorise the payment", "url": "https://p\u{430}ypal.com/authorize?session=SECRET-SESSION"}}},
        "requestState": "pay-state-1"
    })).map_err(e)?;
    let retry_id = d
        .retry(&id, "acme", json!({"pay": {"action": "decline"}}))
        .map_err(e)?;
    d.verdict(&retry_id, json!({"resultType": "complete", "content": []}))
        .map_err(e)?;

    d.say("\n== 3. state-only round: retried at once, no prompt ==");
    let id = d
        .register("long_job", json!({}), json!({}), Policy::default())
        .map_err(e)?;
    d.verdict(&id, json!({"resultType": "input_required", "requestState": "{\"step\":2,\"note\":\"ünïcødé\"}"})).map_err(e)?;
    let retry_id = d.retry(&id, "acme", json!({})).map_err(e)?;
    d.verdict(&retry_id, json!({"content": []})).map_err(e)?;

    d.say("\n== 4. attacks the gate refuses ==");
    let id = d
        .register(
            "book_flight",
            json!({"from": "OSL"}),
            both.clone(),
            Policy::default(),
        )
        .map_err(e)?;
    d.verdict(&id, json!({"resultType": "input_required",
        "inputRequests": {"p": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": form_schema()}}},
        "requestState": "s-4"})).map_err(e)?;
    d.say("  · the answers come from another tenant:");
    let _ = d.retry(
        &id,
        "evil-corp",
        json!({"p": {"action": "accept", "content": {"full_name": "A", "seat": "aisle"}}}),
    );
    d.say("  · the answers do not match the schema:");
    let _ = d.retry(
        &id,
        "acme",
        json!({"p": {"action": "accept", "content": {"full_name": "A", "seat": "roof"}}}),
    );
    d.say("  · the user refuses:");
    d.consent.push(ScriptedAnswer::Refuse);
    let _ = d.retry(
        &id,
        "acme",
        json!({"p": {"action": "accept", "content": {"full_name": "A", "seat": "aisle"}}}),
    );
    let retry_id = d
        .retry(
            &id,
            "acme",
            json!({"p": {"action": "accept", "content": {"full_name": "A", "seat": "aisle"}}}),
        )
        .map_err(e)?;
    d.say("  · the same round answered twice (replay):");
    let _ = d.retry(&id, "acme", json!({"p": {"action": "cancel"}}));
    d.say("  · the server replays its old answer on the old id:");
    let _ = d.verdict(
        &id,
        json!({"resultType": "input_required", "requestState": "s-4"}),
    );
    d.say("  · a forged server answers the live id:");
    let real = d.server.clone();
    d.server = ServerIdentity::origin("https://evil.example.net/mcp").map_err(|e| e.to_string())?;
    let _ = d.verdict(
        &retry_id,
        json!({"resultType": "input_required", "requestState": "x"}),
    );
    d.server = real;
    d.say("  · the real server asks for a schema with an external $ref:");
    let _ = d.verdict(&retry_id, json!({"resultType": "input_required",
        "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "m",
            "requestedSchema": {"type": "object", "properties": {"x": {"$ref": "https://evil.example.net/s.json"}}}}}}}));
    d.say("  · a new request; the server asks for sampling the policy does not allow:");
    let id = d
        .register(
            "summarise",
            json!({}),
            json!({"sampling": {}}),
            Policy::default(),
        )
        .map_err(e)?;
    let _ = d.verdict(&id, json!({"resultType": "input_required",
        "inputRequests": {"s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}}}}));
    d.say("  · a new request; the server smuggles a second resultType:");
    let id = d
        .register("book_flight", json!({}), both, Policy::default())
        .map_err(e)?;
    let smuggled = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"resultType\":\"complete\",\"resultType\":\"input_required\",\"requestState\":\"x\"}}}}",
        mrtr_gate_core::canonical::to_canonical(&id.to_json())
    );
    let server = d.server.clone();
    match d.gate.accept_response(&server, &smuggled) {
        Err(x) => d.say(format!(
            "  verdict: DENIED `{}` ({:?}): {}",
            x.code, x.cause, x.message
        )),
        Ok(v) => d.say(format!("  verdict: {v:?}")),
    }
    let _ = d.gate.finish(FinishRequest {
        server: d.server.clone(),
        request_id: id,
        user: "alice@example.com".into(),
        tenant: "acme".into(),
        outcome: CallerOutcome::Cancelled,
    });

    d.say(format!("\n== audit trail ({}) ==", audit_path.display()));
    let lines = audit.lines().map_err(|e| format!("audit file: {e}"))?;
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        d.say(format!(
            "  #{:<3} {:<9} {:<8} id={:<4} round={} reason={} receipt={} state={}",
            v["seq"],
            v["event"].as_str().unwrap_or("?"),
            v["outcome"].as_str().unwrap_or("-"),
            v["request_id"],
            v["round"],
            v["reason"].as_str().unwrap_or("-"),
            match (
                v["consent_receipt_id"].as_str(),
                v["consent_method"].as_str()
            ) {
                (Some(id), Some(how)) => format!("{id} ({how})"),
                (Some(id), None) => id.to_owned(),
                _ => "-".to_owned(),
            },
            v["state_sha256"]
                .as_str()
                .map_or("-".to_owned(), |s| format!(
                    "{}…",
                    s.chars().take(12).collect::<String>()
                )),
        ));
    }
    match mrtr_gate_core::audit::verify_chain(lines.iter().map(String::as_str)) {
        Ok(n) => d.say(format!(
            "  chain verified: {n} events, each linked to the one before it about the same server"
        )),
        Err(b) => d.say(format!("  CHAIN BROKEN: {b:?}")),
    }
    let leaked = lines.iter().any(|l| {
        l.contains("SECRET-SESSION") || l.contains("Alice Example") || l.contains("sealed:v1")
    });
    d.say(format!(
        "  secrets in the trail: {}",
        if leaked {
            "FOUND (bug)"
        } else {
            "none (digests only)"
        }
    ));
    Ok(d.out)
}
