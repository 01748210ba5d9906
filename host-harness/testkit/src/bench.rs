//! `mrtr-gate-testkit bench`: what the gate costs, measured in one run side by side.
//!
//! - a full form round (register, accept a 3-field form with state, consent, audit append
//!   and read-back, build the retry, complete) in the component and in the native core,
//!   with a schema seen before and with a new schema every round;
//! - a URL round and a state-only round;
//! - cold start from the cached precompiled artifact to the first verdict, and a new
//!   instance through `InstancePre`;
//! - the instance's memory and the store after 1,000 and after 100,000 rounds;
//! - throughput with several instances on two threads sharing one in-memory store;
//! - optionally the seed's JavaScript gate (`scripts/bench` runs it on Node).
//!
//! The wire texts of each round are made before the clock starts: what the client receives
//! and passes on is input, not the gate's work.

use crate::fixture::ScenarioHosts;
use mrtr_gate_core::{Policy, Registration, RequestId, RetryRequest, ServerIdentity};
use mrtr_gate_host::{GateApi, GateDenial, HostServices, NativeGate};
use mrtr_gate_wasmtime::runtime::default_cache_dir;
use mrtr_gate_wasmtime::{ComponentGate, GateRuntime};
use serde_json::{Value, json};
use std::fmt::Write as _;
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

/// The kinds of round measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundKind {
    /// A 3-field form with state; `distinct_schema` makes every round's schema new.
    Form {
        /// A schema never seen before, every round.
        distinct_schema: bool,
    },
    /// A URL elicitation with state.
    Url,
    /// State only: no input requests, no consent prompt.
    StateOnly,
}

fn schema(variant: Option<u64>) -> Value {
    // A distinct `maxLength` makes a distinct validating schema (a title alone would not:
    // annotations are not part of what is checked).
    let max_length = variant.map_or(100, |n| 100 + n);
    json!({"type": "object", "title": "Passenger", "properties": {
        "full_name": {"type": "string", "minLength": 1, "maxLength": max_length},
        "seat": {"type": "string", "enum": ["aisle", "window"]},
        "bags": {"type": "integer", "minimum": 0, "maximum": 3}},
        "required": ["full_name", "seat"]})
}

/// The wire texts and calls of one round, made before any clock starts.
pub struct RoundInput {
    id: i64,
    register: Registration,
    input_required: String,
    retry: RetryRequest,
    complete: String,
}

/// Round `n` of `kind` (ids `2n` and `2n + 1`).
pub fn round_input(server: &ServerIdentity, n: i64, kind: RoundKind) -> RoundInput {
    let id = n.saturating_mul(2);
    let params = json!({"name": "book_flight", "arguments": {"from": "OSL", "to": "SFO"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}}});
    let state = "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw";
    let (result, responses) = match kind {
        RoundKind::Form { distinct_schema } => (
            json!({"resultType": "input_required",
                "inputRequests": {"passenger": {"method": "elicitation/create",
                    "params": {"message": "Who is flying?",
                        "requestedSchema": schema(distinct_schema.then_some(n.unsigned_abs()))}}},
                "requestState": state}),
            json!({"passenger": {"action": "accept",
                "content": {"full_name": "Alice Example", "seat": "aisle", "bags": 1}}}),
        ),
        RoundKind::Url => (
            json!({"resultType": "input_required",
                "inputRequests": {"pay": {"method": "elicitation/create", "params": {"mode": "url",
                    "message": "Authorise the payment",
                    "url": "https://pay.example.com/authorize?session=abc123"}}},
                "requestState": state}),
            json!({"pay": {"action": "accept"}}),
        ),
        RoundKind::StateOnly => (
            json!({"resultType": "input_required", "requestState": state}),
            json!({}),
        ),
    };
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
        input_required: json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        retry: RetryRequest {
            server: server.clone(),
            request_id: RequestId::Number(id),
            retry_id: RequestId::Number(id.saturating_add(1)),
            user: "alice".into(),
            tenant: "acme".into(),
            responses_json: responses.to_string(),
        },
        complete: json!({"jsonrpc": "2.0", "id": id.saturating_add(1),
            "result": {"resultType": "complete", "content": []}})
        .to_string(),
    }
}

/// One full round: register, accept the `input_required`, build the retry, accept `complete`.
/// Never inlined: `scripts/instructions` counts instructions inside this function only.
#[inline(never)]
pub fn round(
    gate: &mut dyn GateApi,
    server: &ServerIdentity,
    input: RoundInput,
) -> Result<(), String> {
    let fail = |e: GateDenial| format!("round {}: {e}", input.id);
    gate.register(input.register).map_err(fail)?;
    gate.accept_response(server, &input.input_required)
        .map_err(fail)?;
    gate.build_retry(input.retry).map_err(fail)?;
    gate.accept_response(server, &input.complete)
        .map_err(fail)?;
    Ok(())
}

impl RoundKind {
    /// The kind named `form`, `form-new`, `url` or `state-only`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "form" => Self::Form {
                distinct_schema: false,
            },
            "form-new" => Self::Form {
                distinct_schema: true,
            },
            "url" => Self::Url,
            "state-only" => Self::StateOnly,
            _ => return None,
        })
    }
}

/// Run `count` rounds of `kind` with nothing timed and nothing printed (the inputs are made
/// first): the loop a profiler or instruction counter watches.
pub fn plain_rounds(gate: &mut dyn GateApi, kind: RoundKind, count: usize) -> Result<(), String> {
    let server = server()?;
    let inputs: Vec<RoundInput> = (1..=count)
        .map(|n| round_input(&server, n as i64, kind))
        .collect();
    for input in inputs {
        round(gate, &server, input)?;
    }
    Ok(())
}

/// The server every benchmark round talks to.
pub fn server() -> Result<ServerIdentity, String> {
    ServerIdentity::origin("https://flights.example.com/mcp").map_err(|e| e.to_string())
}

/// Run `count` full form rounds with round numbers from `start` on (untimed).
pub fn rounds(
    gate: &mut dyn GateApi,
    start: i64,
    count: i64,
    distinct_schema: bool,
) -> Result<(), String> {
    let server = server()?;
    for n in start..start.saturating_add(count) {
        round(
            gate,
            &server,
            round_input(&server, n, RoundKind::Form { distinct_schema }),
        )?;
    }
    Ok(())
}

/// Time `rounds` rounds of `kind` on `gate` after 50 untimed ones.
pub fn measure(gate: &mut dyn GateApi, rounds: usize, kind: RoundKind) -> Result<Stats, String> {
    let server = server()?;
    let warmup = 50;
    let inputs: Vec<RoundInput> = (0..(warmup + rounds))
        .map(|n| round_input(&server, n as i64, kind))
        .collect();
    let mut samples = Vec::with_capacity(rounds);
    for (n, input) in inputs.into_iter().enumerate() {
        let started = Instant::now();
        round(gate, &server, input)?;
        if n >= warmup {
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(stats(samples))
}

/// How a throughput run is laid out.
#[derive(Clone, Copy, Debug)]
pub struct Throughput {
    /// OS threads, each driving its own instances.
    pub threads: i64,
    /// Gate instances per thread, used in turn.
    pub instances_per_thread: i64,
    /// Full form rounds each instance runs.
    pub rounds_per_instance: i64,
}

impl Throughput {
    /// Rounds in the whole run.
    pub fn total(&self) -> i64 {
        self.threads
            .saturating_mul(self.instances_per_thread)
            .saturating_mul(self.rounds_per_instance)
    }
}

/// Full form rounds per second with `shape.threads` threads of instances that all share
/// `services`: the store, the audit sink and the clock are whatever the caller passes (the
/// in-memory ones here; a shared remote store plugs in the same way). Round ids never repeat
/// across instances.
pub fn throughput(
    runtime: &GateRuntime,
    services: &HostServices,
    shape: Throughput,
) -> Result<f64, String> {
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), String> {
        let mut handles = Vec::new();
        for t in 0..shape.threads {
            let services = services.clone();
            handles.push(scope.spawn(move || -> Result<(), String> {
                let mut gates: Vec<ComponentGate> = (0..shape.instances_per_thread)
                    .map(|_| ComponentGate::new(runtime, services.clone()))
                    .collect();
                let stride = shape.instances_per_thread;
                for k in 0..shape.rounds_per_instance {
                    for (i, gate) in (0i64..).zip(gates.iter_mut()) {
                        // Round numbers unique to (thread, round, instance): ids 2n and 2n + 1.
                        let n = (t * shape.rounds_per_instance + k) * stride + i;
                        rounds(gate, n, 1, false)?;
                    }
                }
                Ok(())
            }));
        }
        for h in handles {
            h.join()
                .map_err(|_| "a bench thread panicked".to_owned())??;
        }
        Ok(())
    })?;
    Ok(shape.total() as f64 / started.elapsed().as_secs_f64())
}

/// A measurement taken elsewhere (the seed's JavaScript gate on Node, the component on Node
/// through jco), as its script prints it.
#[derive(Clone, Debug)]
pub struct External {
    /// What was measured.
    pub engine: String,
    /// On which workload.
    pub workload: String,
    /// Its numbers.
    pub stats: Stats,
    /// Heap retained per round, when the script measured it.
    pub retained_bytes_per_round: Option<f64>,
}

impl External {
    /// Parse the JSON line `benches/seed_js_round.mjs`, `host-harness/node/bench/round.mjs`
    /// or `host-harness/python/bench/round.py` prints.
    pub fn parse(text: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(text.trim()).map_err(|e| crate::error_chain(&e))?;
        let num = |k: &str| {
            v.get(k)
                .and_then(Value::as_f64)
                .ok_or(format!("`{k}` missing"))
        };
        Ok(Self {
            engine: v
                .get("engine")
                .and_then(Value::as_str)
                .unwrap_or("external")
                .to_owned(),
            workload: v
                .get("workload")
                .and_then(Value::as_str)
                .unwrap_or("form, parsed per round")
                .to_owned(),
            stats: Stats {
                min_us: num("min_us")?,
                median_us: num("median_us")?,
                max_us: num("max_us")?,
            },
            retained_bytes_per_round: v
                .get("heap_retained_bytes_per_round")
                .and_then(Value::as_f64),
        })
    }
}

fn row(out: &mut String, engine: &str, workload: &str, s: Stats) {
    let _ = writeln!(
        out,
        "{engine:<26} {workload:<22} {:>8.1} {:>8.1} {:>8.1}",
        s.min_us, s.median_us, s.max_us
    );
}

/// Run the side-by-side measurement and render a table, with rows measured elsewhere (the
/// seed's gate, the jco host) and their ratios.
pub fn run_with(
    runtime: &GateRuntime,
    rounds: usize,
    externals: &[External],
) -> Result<String, String> {
    let seed = externals.iter().find(|e| e.engine.starts_with("seed"));
    let jco = externals.iter().find(|e| e.engine.contains("jco"));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "per round, {rounds} timed rounds each after 50 warm-up rounds; microseconds (min / median / max)\n"
    );
    let _ = writeln!(
        out,
        "{:<26} {:<22} {:>8} {:>8} {:>8}",
        "engine", "workload", "min", "median", "max"
    );
    let kinds = [
        (
            "form, schema seen",
            RoundKind::Form {
                distinct_schema: false,
            },
        ),
        (
            "form, schema new",
            RoundKind::Form {
                distinct_schema: true,
            },
        ),
        ("url", RoundKind::Url),
        ("state only", RoundKind::StateOnly),
    ];
    let mut medians = Vec::new();
    for (label, kind) in kinds {
        let hosts = ScenarioHosts::for_bench();
        let component = measure(
            &mut ComponentGate::new(runtime, hosts.services()),
            rounds,
            kind,
        )?;
        let hosts = ScenarioHosts::for_bench();
        let native = measure(&mut NativeGate::new(hosts.services()), rounds, kind)?;
        row(&mut out, "component (wasmtime)", label, component);
        row(&mut out, "native core", label, native);
        medians.push((label, component.median_us, native.median_us));
    }
    for ext in externals {
        row(
            &mut out,
            &ext.engine.chars().take(26).collect::<String>(),
            &ext.workload.chars().take(22).collect::<String>(),
            ext.stats,
        );
    }
    out.push('\n');
    for (label, component, native) in &medians {
        let _ = write!(
            out,
            "{label:<18} component / native {:>5.2}x",
            component / native
        );
        if let Some(ext) = seed
            && label.starts_with("form")
        {
            let _ = write!(
                out,
                "   seed js / component {:>5.1}x",
                ext.stats.median_us / component
            );
        }
        out.push('\n');
    }
    let wasmtime = medians.first().map_or(f64::NAN, |m| m.1);
    if let (Some(seed), Some(jco)) = (seed, jco) {
        // The same runtime on both sides: the seed's gate and the component under jco in
        // one Node, on the same form round.
        let _ = writeln!(
            out,
            "on node: seed js / component (jco) {:>5.1}x",
            seed.stats.median_us / jco.stats.median_us,
        );
    }
    // Each language host against the Rust host, on the same form round in the same run.
    for ext in externals
        .iter()
        .filter(|e| e.engine.starts_with("component"))
    {
        let _ = writeln!(
            out,
            "{:<40} / component (wasmtime) {:>6.2}x",
            ext.engine,
            ext.stats.median_us / wasmtime,
        );
    }

    // Cold start and instantiation.
    let cache = default_cache_dir();
    GateRuntime::load_embedded(Some(&cache), runtime.limits())
        .map_err(|e| crate::error_chain(&e))?;
    let server = server()?;
    let mut cold = Vec::new();
    let mut fresh = Vec::new();
    for n in 0..20 {
        let started = Instant::now();
        let rt = GateRuntime::load_embedded(Some(&cache), runtime.limits())
            .map_err(|e| crate::error_chain(&e))?;
        let hosts = ScenarioHosts::for_bench();
        let mut gate = ComponentGate::new(&rt, hosts.services());
        let input = round_input(
            &server,
            n,
            RoundKind::Form {
                distinct_schema: false,
            },
        );
        gate.register(input.register)
            .map_err(|e| crate::error_chain(&e))?;
        gate.accept_response(&server, &input.input_required)
            .map_err(|e| crate::error_chain(&e))?;
        cold.push(started.elapsed().as_secs_f64() * 1e6);
    }
    // A new instance from a loaded runtime, as a host does after a trap or per tenant.
    let hosts = ScenarioHosts::for_bench();
    let mut gate = ComponentGate::new(runtime, hosts.services());
    gate.instantiate_now().map_err(|e| crate::error_chain(&e))?;
    for _ in 0..200 {
        let started = Instant::now();
        gate.instantiate_now().map_err(|e| crate::error_chain(&e))?;
        fresh.push(started.elapsed().as_secs_f64() * 1e6);
    }
    out.push('\n');
    row(
        &mut out,
        "cold start (cached .cwasm)",
        "load → first verdict",
        stats(cold),
    );
    row(
        &mut out,
        "new instance (InstancePre)",
        "instantiate",
        stats(fresh),
    );

    // Memory: live state bounded by live rounds.
    let hosts = ScenarioHosts::for_bench();
    let mut gate = ComponentGate::new(runtime, hosts.services());
    rounds_mem(&mut gate, &hosts, &mut out)?;

    // Throughput: two threads, two instances each, one shared store and audit sink.
    let hosts = ScenarioHosts::for_bench();
    let shape = Throughput {
        threads: 2,
        instances_per_thread: 2,
        rounds_per_instance: 2_000,
    };
    let per_second = throughput(runtime, &hosts.services(), shape)?;
    let _ = writeln!(
        out,
        "\nthroughput: {per_second:.0} rounds/s ({} form rounds, {} threads x {} instances, one shared in-memory store and audit sink)",
        shape.total(),
        shape.threads,
        shape.instances_per_thread,
    );
    for ext in externals {
        if let Some(r) = ext.retained_bytes_per_round {
            let _ = writeln!(
                out,
                "{}: {r:.0} bytes of heap retained per finished round",
                ext.engine
            );
        }
    }
    Ok(out)
}

fn rounds_mem(
    gate: &mut ComponentGate,
    hosts: &ScenarioHosts,
    out: &mut String,
) -> Result<(), String> {
    rounds(gate, 0, 1_000, true)?;
    let (m1, s1) = (gate.memory_bytes(), hosts.storage.len());
    rounds(gate, 1_000, 99_000, true)?;
    let (m2, s2) = (gate.memory_bytes(), hosts.storage.len());
    let _ = writeln!(
        out,
        "\nmemory: after 1,000 rounds the instance holds {m1} bytes and the store {s1} keys; after 100,000: {m2} bytes, {s2} keys"
    );
    Ok(())
}

/// A scaling workload: how one form round's cost grows with its inputs.
#[derive(Clone, Copy, Debug)]
enum Scale {
    /// Fields in the one form schema.
    Fields(usize),
    /// Form input requests in the round (3 fields each).
    Requests(usize),
    /// Bytes of `requestState`.
    StateBytes(usize),
}

fn scaled_input(server: &ServerIdentity, n: i64, scale: Scale) -> RoundInput {
    let mut input = round_input(
        server,
        n,
        RoundKind::Form {
            distinct_schema: false,
        },
    );
    let field_schema = |k: usize| {
        let props: serde_json::Map<String, Value> = (0..k)
            .map(|i| {
                (
                    format!("f{i:02}"),
                    json!({"type": "string", "maxLength": 64}),
                )
            })
            .collect();
        json!({"type": "object", "properties": props})
    };
    let content = |k: usize| {
        let c: serde_json::Map<String, Value> = (0..k)
            .map(|i| (format!("f{i:02}"), json!("value")))
            .collect();
        Value::Object(c)
    };
    let (fields, requests, state) = match scale {
        Scale::Fields(k) => (k, 1, 32),
        Scale::Requests(r) => (3, r, 32),
        Scale::StateBytes(b) => (3, 1, b),
    };
    let reqs: serde_json::Map<String, Value> = (0..requests)
        .map(|r| {
            (
                format!("q{r:02}"),
                json!({"method": "elicitation/create",
                "params": {"message": "m", "requestedSchema": field_schema(fields)}}),
            )
        })
        .collect();
    let answers: serde_json::Map<String, Value> = (0..requests)
        .map(|r| {
            (
                format!("q{r:02}"),
                json!({"action": "accept", "content": content(fields)}),
            )
        })
        .collect();
    input.input_required = json!({"jsonrpc": "2.0", "id": input.id, "result": {
        "resultType": "input_required", "inputRequests": reqs, "requestState": "s".repeat(state)}})
    .to_string();
    input.retry.responses_json = Value::Object(answers).to_string();
    if let Scale::StateBytes(b) = scale {
        input.register.policy.max_request_state_bytes = u32::try_from(b).unwrap_or(u32::MAX);
    }
    input
}

fn measure_scaled(gate: &mut dyn GateApi, scale: Scale, rounds: usize) -> Result<f64, String> {
    let server = server()?;
    let inputs: Vec<RoundInput> = (0..(rounds + 20))
        .map(|n| scaled_input(&server, n as i64, scale))
        .collect();
    let mut samples = Vec::with_capacity(rounds);
    for (n, input) in inputs.into_iter().enumerate() {
        let started = Instant::now();
        round(gate, &server, input)?;
        if n >= 20 {
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(stats(samples).median_us)
}

/// `mrtr-gate-testkit bench --scaling`: the median cost of a form round as one input grows.
pub fn scaling(runtime: &GateRuntime, rounds: usize) -> Result<String, String> {
    let mut out = format!("scaling: median us per form round ({rounds} rounds per point)\n\n");
    let _ = writeln!(
        out,
        "{:<28} {:>12} {:>12}",
        "workload", "component", "native"
    );
    let points: Vec<(String, Scale)> = [1usize, 4, 16, 64]
        .iter()
        .map(|&k| (format!("schema fields = {k}"), Scale::Fields(k)))
        .chain(
            [1usize, 4, 16]
                .iter()
                .map(|&r| (format!("input requests = {r}"), Scale::Requests(r))),
        )
        .chain(
            [32usize, 4096, 65_536, 1 << 20]
                .iter()
                .map(|&b| (format!("requestState bytes = {b}"), Scale::StateBytes(b))),
        )
        .collect();
    for (label, scale) in points {
        let hosts = ScenarioHosts::for_bench();
        let c = measure_scaled(
            &mut ComponentGate::new(runtime, hosts.services()),
            scale,
            rounds,
        )?;
        let hosts = ScenarioHosts::for_bench();
        let n = measure_scaled(&mut NativeGate::new(hosts.services()), scale, rounds)?;
        let _ = writeln!(out, "{label:<28} {c:>12.1} {n:>12.1}");
    }
    for live in [0i64, 1_000, 10_000, 100_000] {
        let hosts = ScenarioHosts::for_bench();
        let mut gate = ComponentGate::new(runtime, hosts.services());
        let server = server()?;
        // Bindings registered and never finished: other requests in flight.
        for k in 0..live {
            let mut input = round_input(
                &server,
                10_000_000 + k,
                RoundKind::Form {
                    distinct_schema: false,
                },
            );
            input.register.policy.round_trip_lifetime_ms = 24 * 60 * 60 * 1000;
            gate.register(input.register)
                .map_err(|e| crate::error_chain(&e))?;
        }
        let c = measure(
            &mut gate,
            rounds,
            RoundKind::Form {
                distinct_schema: false,
            },
        )?
        .median_us;
        let _ = writeln!(
            out,
            "{:<28} {c:>12.1} {:>12}",
            format!("live bindings = {live}"),
            "-"
        );
    }
    Ok(out)
}
