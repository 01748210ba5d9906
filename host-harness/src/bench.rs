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
    // A distinct `maxLength` makes a distinct validating schema (a title alone would not:
    // annotations are not part of what is compiled), so no validator cache can help.
    let max_length = variant.map_or(100, |n| 100 + n);
    json!({"type": "object", "title": "Passenger", "properties": {
        "full_name": {"type": "string", "minLength": 1, "maxLength": max_length},
        "seat": {"type": "string", "enum": ["aisle", "window"]},
        "bags": {"type": "integer", "minimum": 0, "maximum": 3}},
        "required": ["full_name", "seat"]})
}

/// The wire texts of one round, made before the clock starts: what the client receives
/// and passes on is input, not the gate's work.
struct RoundInput {
    id: i64,
    register: Registration,
    input_required: String,
    retry: RetryRequest,
    complete: String,
}

fn round_input(server: &ServerIdentity, n: i64, distinct_schema: bool) -> RoundInput {
    let id = n * 2;
    let params = json!({"name": "book_flight", "arguments": {"from": "OSL", "to": "SFO"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}});
    let variant = distinct_schema.then_some(n.unsigned_abs());
    RoundInput {
        id,
        register: Registration {
            request_id: RequestId::Number(id),
            server: server.clone(),
            user: "alice".into(),
            tenant: "acme".into(),
            method: "tools/call".into(),
            params_json: params.to_string(),
            policy: Policy::default(),
        },
        input_required: json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
            "inputRequests": {"passenger": {"method": "elicitation/create",
                "params": {"message": "Who is flying?", "requestedSchema": schema(variant)}}},
            "requestState": "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw"}})
        .to_string(),
        retry: RetryRequest {
            request_id: RequestId::Number(id),
            retry_id: RequestId::Number(id + 1),
            user: "alice".into(),
            tenant: "acme".into(),
            responses_json: json!({"passenger": {"action": "accept",
                "content": {"full_name": "Alice Example", "seat": "aisle", "bags": 1}}})
            .to_string(),
        },
        complete: json!({"jsonrpc": "2.0", "id": id + 1, "result": {"resultType": "complete", "content": []}})
            .to_string(),
    }
}

/// One full round.
fn round(gate: &mut dyn GateApi, server: &ServerIdentity, input: RoundInput) -> Result<(), String> {
    let fail = |e: crate::gate::GateDenial| format!("round {}: {e}", input.id);
    gate.register(input.register).map_err(fail)?;
    gate.accept_response(server, &input.input_required)
        .map_err(fail)?;
    gate.build_retry(input.retry).map_err(fail)?;
    gate.accept_response(server, &input.complete)
        .map_err(fail)?;
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
    let inputs: Vec<RoundInput> = (0..(warmup + rounds))
        .map(|n| round_input(&server, n as i64, distinct_schema))
        .collect();
    for (n, input) in inputs.into_iter().enumerate() {
        let started = Instant::now();
        round(gate, &server, input)?;
        if n >= warmup {
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(stats(samples))
}

/// A measurement taken elsewhere (the seed's JavaScript gate on Node), as its script prints it.
#[derive(Clone, Debug)]
pub struct External {
    /// What was measured.
    pub engine: String,
    /// Its numbers.
    pub stats: Stats,
}

impl External {
    /// Parse the JSON line `host-harness/bench/seed_js_round.mjs` prints.
    pub fn parse(text: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| e.to_string())?;
        let num = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_f64)
                .ok_or(format!("`{k}` missing"))
        };
        Ok(Self {
            engine: v
                .get("engine")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("external")
                .to_owned(),
            stats: Stats {
                min_us: num("min_us")?,
                median_us: num("median_us")?,
                max_us: num("max_us")?,
            },
        })
    }
}

/// Run the side-by-side measurement and render a table.
pub fn run(runtime: &GateRuntime, rounds: usize) -> Result<String, String> {
    run_with(runtime, rounds, None)
}

/// The same, with an external row (the seed's gate) and its ratios.
pub fn run_with(
    runtime: &GateRuntime,
    rounds: usize,
    external: Option<&External>,
) -> Result<String, String> {
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
        medians.push((label, component.median_us, native.median_us));
    }
    if let Some(ext) = external {
        let s = ext.stats;
        out.push_str(&format!(
            "{:<25} {:<14} {:>7.1} {:>8.1} {:>8.1}\n",
            ext.engine.chars().take(25).collect::<String>(),
            "parsed/round",
            s.min_us,
            s.median_us,
            s.max_us
        ));
    }
    out.push('\n');
    for (label, component, native) in medians {
        out.push_str(&format!(
            "component / native, schema {label}: {:.2}x (medians)\n",
            component / native
        ));
        if let Some(ext) = external {
            out.push_str(&format!(
                "seed js gate / component, schema {label}: {:.1}x (the component is that much faster; medians)\n",
                ext.stats.median_us / component
            ));
        }
    }
    Ok(out)
}
