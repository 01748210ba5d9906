//! `mrtr-gate-testkit bench-client`: what the gate adds to a real round trip. The same client
//! (the library's loop, its HTTP transport, one answers file) runs a form round against a real
//! server with the gate, then with a stand-in that does only what any client must do (write the
//! request, read `resultType`, echo the state back): the ratio of the two is the gate's
//! overhead. Calls alternate between the two so both see the same server and machine.

// serde_json's `value["key"]` yields `null` for anything missing; it never panics.
#![allow(clippy::indexing_slicing)]

use crate::reference::{RawClient, record_round};
use crate::timed::{Stopwatch, TimedGate, TimedTransport};
use mrtr_gate_client::transport::Transport;
use mrtr_gate_client::{AnswersFile, Client, ClientConfig, HttpTransport};
use mrtr_gate_host::core::{
    AcceptedRound, ClientRetry, FinishRequest, Registered, Registration, RequestId,
    ResponseVerdict, Retry, RetryRequest, ServerIdentity, TerminalOutcome,
};
use mrtr_gate_host::reference_hosts::{
    MemoryAudit, MemoryStorage, ScriptedAnswer, ScriptedConsent, SystemClock,
};
use mrtr_gate_host::{GateApi, GateDenial, HostServices};
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A call the stand-in keeps: its method, its params and the state of its round.
type OpenCall = (String, Map<String, Value>, Option<Value>);

/// The gate off: the request as the client would write it, the round read for its keys and
/// state, the retry as params + answers + state. No checks, no consent, no audit.
#[derive(Default)]
pub(crate) struct GateOff {
    calls: HashMap<String, OpenCall>,
}

fn off_denial(what: &str) -> GateDenial {
    GateDenial::from(mrtr_gate_host::core::Denial {
        error: mrtr_gate_host::core::GateError::Caller(
            mrtr_gate_host::core::CallerMisuse::InvalidParams(what.into()),
        ),
        audited: false,
    })
}

impl GateApi for GateOff {
    fn register(&mut self, r: Registration) -> Result<Registered, GateDenial> {
        let params: Map<String, Value> =
            serde_json::from_str(&r.params_json).map_err(|_| off_denial("params"))?;
        let text = json!({"jsonrpc": "2.0", "id": r.request_id.to_json(), "method": r.method, "params": params}).to_string();
        self.calls
            .insert(r.request_id.key_fragment(), (r.method, params, None));
        Ok(Registered {
            request_json: text,
            params_sha256: String::new(),
            expires_at_ms: 0,
        })
    }

    fn accept_response(
        &mut self,
        _: &ServerIdentity,
        response_json: &str,
    ) -> Result<ResponseVerdict, GateDenial> {
        let v: Value = serde_json::from_str(response_json).map_err(|_| off_denial("response"))?;
        let id = RequestId::from_json(&v["id"]).ok_or_else(|| off_denial("id"))?;
        let result = &v["result"];
        if result["resultType"] != "input_required" {
            self.calls.remove(&id.key_fragment());
            return Ok(ResponseVerdict::Complete);
        }
        let keys: Vec<String> = result["inputRequests"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        if let Some(call) = self.calls.get_mut(&id.key_fragment()) {
            call.2 = result.get("requestState").cloned();
        }
        // The least a consent view must hold for the client to read it (nothing checked).
        let view = json!({
            "effects": [], "inputs": [], "max_rounds": 1, "round": 1,
            "server": "", "state": {"present": false},
            "view": mrtr_gate_host::core::VIEW_FORMAT,
            "request": {"arguments": null, "binding_version": 1, "id": id.to_json(),
                "method": "tools/call", "name": "", "original_id": id.to_json(),
                "params_sha256": "", "tenant_sha256": "", "user_sha256": ""},
        });
        // The state's digest, as the gate gives it: the proxy files the round under it, and
        // finds it (and closes it) by the retry's state. Without it every round stayed open
        // in the proxy's index, and past 1,024 a principal's next one was refused.
        let request_state_sha256 = result["requestState"]
            .as_str()
            .map(mrtr_gate_host::core::digest::digest_str);
        Ok(ResponseVerdict::InputRequired(AcceptedRound {
            // Canonical, as a view the gate writes must be (a consent screen refuses any other
            // text); `json!` keeps its members in the order written where serde_json preserves
            // order (a feature another crate of the build turns on).
            view_json: mrtr_gate_host::core::canonical::to_canonical(&view),
            view_sha256: String::new(),
            round: 1,
            input_keys: keys,
            request_state_sha256,
        }))
    }

    fn build_retry(&mut self, r: RetryRequest) -> Result<Retry, GateDenial> {
        let (method, mut params, state) = self
            .calls
            .remove(&r.request_id.key_fragment())
            .ok_or_else(|| off_denial("round"))?;
        let responses: Value =
            serde_json::from_str(&r.responses_json).map_err(|_| off_denial("responses"))?;
        params.insert("inputResponses".into(), responses);
        if let Some(state) = state.clone() {
            params.insert("requestState".into(), state);
        }
        let text = json!({"jsonrpc": "2.0", "id": r.retry_id.to_json(), "method": method, "params": params}).to_string();
        self.calls
            .insert(r.retry_id.key_fragment(), (method, params, state));
        Ok(Retry {
            request_json: text,
            round: 1,
            consent_receipt_id: None,
        })
    }

    /// The client's retry as it sent it, under its new id (what a relay without a gate sends).
    fn retry_from_client(&mut self, r: ClientRetry) -> Result<Retry, GateDenial> {
        let (method, _, state) = r
            .request_id
            .and_then(|id| self.calls.remove(&id.key_fragment()))
            .ok_or_else(|| off_denial("round"))?;
        let params: Map<String, Value> =
            serde_json::from_str(&r.params_json).map_err(|_| off_denial("params"))?;
        let text = json!({"jsonrpc": "2.0", "id": r.retry_id.to_json(), "method": method, "params": params}).to_string();
        self.calls
            .insert(r.retry_id.key_fragment(), (method, params, state));
        Ok(Retry {
            request_json: text,
            round: 1,
            consent_receipt_id: None,
        })
    }

    /// Refused, as any client must, but not audited.
    fn refuse_unbound(
        &mut self,
        _: &ServerIdentity,
        _: &str,
        _: &str,
        r: &mrtr_gate_host::core::Unbound,
    ) -> GateDenial {
        GateDenial::from(mrtr_gate_host::core::Denial {
            error: r.error(),
            audited: false,
        })
    }

    fn finish(&mut self, _: FinishRequest) -> Result<TerminalOutcome, GateDenial> {
        Ok(TerminalOutcome::Cancelled)
    }

    fn expire_stale(&mut self) -> Result<u32, GateDenial> {
        Ok(0)
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// What to call, and how often.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The streamable HTTP endpoint.
    pub url: String,
    /// The tool, whose call takes one form round.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
    /// The answers file's text for that round.
    pub answers: String,
    /// Timed calls of each kind.
    pub calls: usize,
    /// The gate compiled natively instead of the component (to see the sandbox's share).
    pub native: bool,
}

/// Run `w.calls` form rounds with the gate and as many with it off, alternating; returns
/// the report (markdown).
pub fn run(runtime: &GateRuntime, w: &Workload) -> Result<String, String> {
    let Workload {
        url,
        tool,
        arguments,
        answers,
        calls,
        native,
    } = w;
    let (url, calls, native) = (url.as_str(), *calls, *native);
    let answers = AnswersFile::parse(answers).map_err(|e| e.0)?;
    let config = ClientConfig::new("alice", "acme");
    let clock = Arc::new(SystemClock);
    let services = HostServices {
        clock: clock.clone(),
        storage: Arc::new(MemoryStorage::new(clock)),
        consent: Arc::new(ScriptedConsent::new(ScriptedAnswer::Grant)),
        // As in the other benchmarks: a sink that ships its lines on keeps only the newest.
        audit: Arc::new(MemoryAudit::windowed(1024)),
    };
    let (wire_on, wire_off) = (Stopwatch::default(), Stopwatch::default());
    let transport = |url: &str, watch: &Stopwatch| {
        HttpTransport::connect(url)
            .map(|inner| -> Box<dyn Transport> {
                Box::new(TimedTransport {
                    inner,
                    watch: watch.clone(),
                })
            })
            .map_err(|e| e.to_string())
    };
    let (spent_on, spent_off) = (Stopwatch::default(), Stopwatch::default());
    let gate: Box<dyn GateApi> = if native {
        Box::new(mrtr_gate_host::NativeGate::new(services))
    } else {
        Box::new(ComponentGate::new(runtime, services))
    };
    let gate = TimedGate {
        gate,
        watch: spent_on.clone(),
    };
    let mut on = Client::new(
        gate,
        transport(url, &wire_on)?,
        config.clone(),
        Box::new(answers.clone()),
    );
    let gate = TimedGate {
        gate: GateOff::default(),
        watch: spent_off.clone(),
    };
    let mut off = Client::new(gate, transport(url, &wire_off)?, config, Box::new(answers));
    // The reference: the same two requests from a plain HTTP/1.1 client (crate::reference).
    let wire_raw = Stopwatch::default();
    let mut raw = RawClient::new(
        url,
        record_round(url, tool, arguments, &w.answers)?,
        wire_raw.clone(),
    )?;
    let params = json!({"name": tool, "arguments": arguments});
    let timed = |client: &mut dyn FnMut() -> Result<u32, String>| -> Result<f64, String> {
        let started = Instant::now();
        let rounds = client()?;
        if rounds != 1 {
            return Err(format!("the call took {rounds} rounds, not one"));
        }
        Ok(started.elapsed().as_secs_f64() * 1e6)
    };
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut inside_on, mut inside_off) = (Vec::new(), Vec::new());
    let (mut on_wire, mut off_wire) = (Vec::new(), Vec::new());
    let mut reference = Vec::new();
    for i in 0..calls + 20 {
        for watch in [&spent_on, &spent_off, &wire_on, &wire_off, &wire_raw] {
            watch.reset();
        }
        let a = timed(&mut || {
            on.call("tools/call", params.clone())
                .map(|d| d.rounds)
                .map_err(|e| e.to_string())
        })?;
        let b = timed(&mut || {
            off.call("tools/call", params.clone())
                .map(|d| d.rounds)
                .map_err(|e| e.to_string())
        })?;
        let c = timed(&mut || raw.round().map(|()| 1))?;
        // The first calls warm the connection, the server and the instance.
        if i >= 20 {
            reference.push(c);
            with.push(a);
            without.push(b);
            inside_on.push(spent_on.total_us());
            inside_off.push(spent_off.total_us());
            on_wire.push(wire_on.total_us());
            off_wire.push(wire_off.total_us());
        }
    }
    let (m_on, m_off) = (median(&mut with), median(&mut without));
    let (g_on, g_off) = (median(&mut inside_on), median(&mut inside_off));
    let (w_on, w_off) = (median(&mut on_wire), median(&mut off_wire));
    let m_raw = median(&mut reference);
    Ok(format!(
        "| a form round over loopback HTTP ({calls} calls each, alternating) | median per call | of which in the gate (or its stand-in) | of which in the transport (two requests) |\n|---|---|---|---|\n| client with the gate ({}) | {m_on:.0} us | {g_on:.0} us | {w_on:.0} us |\n| the same client, gate off | {m_off:.0} us | {g_off:.0} us | {w_off:.0} us |\n| reference: the same two requests, plain HTTP/1.1 client | {m_raw:.0} us | | {m_raw:.0} us |\n| **ratio (budget <= 1.10)** | **{:.3}** | | |\n| gate off / reference | {:.3} | | |\n",
        if native { "native core" } else { "component" },
        m_on / m_off,
        m_off / m_raw
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stand-in's view is one a consent screen reads: canonical JSON of the view format
    /// (a hand-written one stopped being canonical once serde_json kept members in the order
    /// written, and every gate-off row of `bench-proxy` failed).
    #[test]
    fn the_gate_off_view_is_one_a_consent_screen_reads() {
        let mut off = GateOff::default();
        let response = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "input_required", "requestState": "s",
            "inputRequests": {"a": {"method": "elicitation/create"}}}});
        let server = ServerIdentity::origin("https://example.com/mcp").unwrap();
        let Ok(ResponseVerdict::InputRequired(round)) =
            off.accept_response(&server, &response.to_string())
        else {
            panic!("the stand-in takes a round")
        };
        mrtr_gate_host::core::ConsentView::parse(&round.view_json).unwrap();
        assert_eq!(round.input_keys, ["a"]);
    }
}
