//! `mrtr-gate bench`: the time of one full form round (register, accept a 3-field form with
//! state, consent, audit append and read-back, build the retry, complete) in the component
//! and in the native core, measured in one run side by side. Issue 3 grows this into the
//! full suite; this is the number the README quotes.

use crate::corpus::ScenarioHosts;
use crate::gate::{ComponentGate, GateApi, NativeGate};
use crate::runtime::GateRuntime;
use mrtr_gate_core::{Policy, Registration, RequestId, RetryRequest, ServerIdentity};
use serde_json::json;
use std::time::Instant;

/// Min, median and max of a sample, in microseconds.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    /// Fastest.
    pub min_us: f64,
    /// Median.
    pub median_us: f64,
    /// Slowest.
    pub max_us: f64,
}

fn stats(mut samples: Vec<f64>) -> Stats {
    samples.sort_by(f64::total_cmp);
    let at = |i: usize| samples.get(i).copied().unwrap_or(f64::NAN);
    Stats {
        min_us: at(0),
        median_us: at(samples.len() / 2),
        max_us: at(samples.len().saturating_sub(1)),
    }
}

fn schema(variant: Option<u64>) -> serde_json::Value {
    // A distinct `title` makes a distinct schema (and digest): no cache can help.
    let title = variant.map_or_else(|| "Passenger".to_owned(), |n| format!("Passenger {n}"));
    json!({"type": "object", "title": title, "properties": {
        "full_name": {"type": "string", "minLength": 1, "maxLength": 100},
        "seat": {"type": "string", "enum": ["aisle", "window"]},
        "bags": {"type": "integer", "minimum": 0, "maximum": 3}},
        "required": ["full_name", "seat"]})
}

/// One full round; `n` makes the ids unique.
fn round(
    gate: &mut dyn GateApi,
    server: &ServerIdentity,
    n: i64,
    distinct_schema: bool,
) -> Result<(), String> {
    let id = n * 2;
    let params = json!({"name": "book_flight", "arguments": {"from": "OSL", "to": "SFO"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}});
    gate.register(Registration {
        request_id: RequestId::Number(id),
        server: server.clone(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: params.to_string(),
        policy: Policy::default(),
    })
    .map_err(|e| e.to_string())?;
    let variant = distinct_schema.then_some(n as u64);
    let response = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
        "inputRequests": {"passenger": {"method": "elicitation/create",
            "params": {"message": "Who is flying?", "requestedSchema": schema(variant)}}},
        "requestState": "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw"}});
    gate.accept_response(server, &response.to_string())
        .map_err(|e| e.to_string())?;
    gate.build_retry(RetryRequest {
        request_id: RequestId::Number(id),
        retry_id: RequestId::Number(id + 1),
        user: "alice".into(),
        tenant: "acme".into(),
        responses_json: json!({"passenger": {"action": "accept",
            "content": {"full_name": "Alice Example", "seat": "aisle", "bags": 1}}})
        .to_string(),
    })
    .map_err(|e| e.to_string())?;
    let done = json!({"jsonrpc": "2.0", "id": id + 1, "result": {"resultType": "complete", "content": []}});
    gate.accept_response(server, &done.to_string())
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Time `rounds` rounds on `gate` after `warmup` untimed ones.
pub fn measure(
    gate: &mut dyn GateApi,
    rounds: usize,
    distinct_schema: bool,
) -> Result<Stats, String> {
    let server =
        ServerIdentity::origin("https://flights.example.com/mcp").map_err(|e| e.to_string())?;
    let warmup = 50;
    let mut samples = Vec::with_capacity(rounds);
    for n in 0..(warmup + rounds) {
        let started = Instant::now();
        round(gate, &server, n as i64, distinct_schema)?;
        if n >= warmup {
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(stats(samples))
}

/// Run the side-by-side measurement and render a table.
pub fn run(runtime: &GateRuntime, rounds: usize) -> Result<String, String> {
    let mut out = String::from(
        "full form round (register, accept 3-field form + state, consent, audit x4, retry, complete)\n",
    );
    out.push_str(&format!(
        "{rounds} timed rounds each, after 50 warm-up rounds; microseconds\n\n"
    ));
    out.push_str("engine                    schema        min     median    max\n");
    let mut medians = Vec::new();
    for distinct in [false, true] {
        let label = if distinct {
            "new each round"
        } else {
            "repeated"
        };
        let hosts = ScenarioHosts::new();
        let component = measure(
            &mut ComponentGate::new(runtime, hosts.services()),
            rounds,
            distinct,
        )?;
        let hosts = ScenarioHosts::new();
        let native = measure(&mut NativeGate::new(hosts.services()), rounds, distinct)?;
        for (name, s) in [("component (wasmtime)", component), ("native core", native)] {
            out.push_str(&format!(
                "{name:<25} {label:<14} {:>7.1} {:>8.1} {:>8.1}\n",
                s.min_us, s.median_us, s.max_us
            ));
        }
        medians.push((label, component.median_us / native.median_us));
    }
    out.push('\n');
    for (label, ratio) in medians {
        out.push_str(&format!(
            "component / native, schema {label}: {ratio:.2}x (medians)\n"
        ));
    }
    Ok(out)
}
