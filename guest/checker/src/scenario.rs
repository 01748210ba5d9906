//! A run: gate processes (each a shuttle thread with its own `Gate`, so its own record
//! cache) over one shared world, each running its operations, and a fault thread placing
//! the run's faults; the invariants checked after every audit line and at the end.

use crate::gate_host::{GateHost, Points};
use crate::replica::Replication;
use crate::trail::{self, Violation};
use crate::world::{Fault, VersionsAfterLoss, World};
use mrtr_gate_core::{
    CallerOutcome, ClientRetry, FinishRequest, Gate, Policy, Registration, RequestId,
    ResponseVerdict, RetryRequest, ServerIdentity,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The server every binding is on.
const SERVER: &str = "https://mcp.example.com/mcp";
/// Another server, which no binding is on.
const OTHER_SERVER: &str = "https://other.example.net/mcp";
/// How far the clock moves before a late message: past the default lifetime.
const LATE_BY_MS: u64 = 5 * 60 * 1000 + 1_000;
/// The user and tenant of every binding.
const USER: &str = "alice@example.com";
const TENANT: &str = "tenant-a";
/// Another user of the same tenant.
const OTHER_USER: &str = "bob@example.com";

/// Who asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum User {
    /// The binding's own user.
    Owner,
    /// Another user.
    Other,
}

impl User {
    fn name(self) -> &'static str {
        match self {
            Self::Owner => USER,
            Self::Other => OTHER_USER,
        }
    }
}

/// What the server sends back on a request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// An `input_required` round with one form request and this `requestState`.
    Round(&'static str),
    /// An `input_required` round with only this `requestState` (no consent needed).
    StateOnly(&'static str),
    /// A complete result.
    Complete,
}

/// One operation of a gate process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Register `tools/call` under this id.
    Register(i64),
    /// The server's message on this id arrives (the same message twice is a duplicate or a
    /// replay).
    Respond(i64, Msg),
    /// The same message on this id, delivered by another server (ids are per server).
    RespondFromOther(i64, Msg),
    /// The server's message on this id, arriving late: the clock first moves past the
    /// binding's lifetime. (Not a scheduling point of its own: the other gates see the move
    /// at their next storage call or audit append, which are.)
    Late(i64, Msg),
    /// `build-retry` of the round on `id` under a new `retry_id`, for `user`.
    Retry {
        /// The round's id.
        id: i64,
        /// The retry's id.
        retry_id: i64,
        /// Who answers.
        user: User,
    },
    /// `retry-from-client` of the round on `id`: the client's own retry carrying `state`.
    ClientRetry {
        /// The round's id, as the relay found it.
        id: i64,
        /// The retry's id.
        retry_id: i64,
        /// The `requestState` the client sends back.
        state: &'static str,
    },
    /// The caller cancels the binding using this id.
    Finish(i64),
    /// `expire-stale`.
    Expire,
}

/// One configuration: the gates, the faults and the store's behaviour.
#[derive(Clone, Debug)]
pub struct Config {
    /// Named in reports.
    pub name: &'static str,
    /// What the store's versions do after a loss.
    pub mode: VersionsAfterLoss,
    /// Run by gate 0 before anything else (what its cache holds when the run starts).
    pub warm: Vec<Op>,
    /// Run next by an earlier process, gone before the run starts (its cache with it).
    pub earlier: Vec<Op>,
    /// Each gate process's operations, run concurrently with the others and the faults.
    pub gates: Vec<Vec<Op>>,
    /// The faults, applied in this order by one thread, each where the scheduler places it.
    pub faults: Vec<Fault>,
    /// Which services run as a master with an asynchronous replica, and when the host
    /// confirms a write to one.
    pub replication: Replication,
}

impl Config {
    /// The scheduling points of this configuration ([`Points`]).
    pub fn points(&self) -> Points {
        let clock = self
            .faults
            .iter()
            .any(|f| matches!(f, Fault::ClockForward(_) | Fault::ClockBack(_)));
        let consent = self
            .faults
            .iter()
            .any(|f| matches!(f, Fault::ConsentRefuse | Fault::ConsentOtherView));
        Points { clock, consent }
    }
}

fn server() -> Result<ServerIdentity, String> {
    ServerIdentity::origin(SERVER).map_err(|e| format!("the server: {e:?}"))
}

fn other_server() -> Result<ServerIdentity, String> {
    ServerIdentity::origin(OTHER_SERVER).map_err(|e| format!("the other server: {e:?}"))
}

fn respond(gate: &mut Gate<GateHost>, server: &ServerIdentity, id: i64, msg: Msg) -> String {
    match gate.accept_response(server, &message(id, msg)) {
        Ok(ResponseVerdict::InputRequired(v)) => format!("round {} to show", v.round),
        Ok(other) => format!("{other:?}"),
        Err(d) => format!("denied {}", d.error.code()),
    }
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    })
}

fn params() -> Value {
    json!({"_meta": meta(), "name": "get_weather", "arguments": {"location": "Paris"}})
}

/// The answers to a form round, canonical text (the consent receipt binds their digest).
const ANSWERS: &str = r#"{"a":{"action":"decline"}}"#;

fn message(id: i64, msg: Msg) -> String {
    let result = match msg {
        Msg::Round(state) => json!({
            "resultType": "input_required",
            "inputRequests": {"a": {"method": "elicitation/create", "params": {
                "message": "A",
                "requestedSchema": {"type": "object",
                    "properties": {"login": {"type": "string"}}, "required": ["login"]}
            }}},
            "requestState": state,
        }),
        Msg::StateOnly(state) => json!({"resultType": "input_required", "requestState": state}),
        Msg::Complete => json!({"resultType": "complete",
            "content": [{"type": "text", "text": "done"}]}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// One operation through the real gate; what it returned, for the log.
fn run_op(gate: &mut Gate<GateHost>, world: &World, op: Op) -> Result<String, String> {
    let server = server()?;
    let denied = |d: mrtr_gate_core::Denial| format!("denied {}", d.error.code());
    Ok(match op {
        Op::Register(id) => match gate.register(Registration {
            request_id: RequestId::Number(id),
            server,
            user: USER.into(),
            tenant: TENANT.into(),
            method: "tools/call".into(),
            params_json: params().to_string(),
            policy: Policy::default(),
        }) {
            Ok(_) => "registered".into(),
            Err(d) => denied(d),
        },
        Op::Respond(id, msg) => respond(gate, &server, id, msg),
        Op::RespondFromOther(id, msg) => respond(gate, &other_server()?, id, msg),
        Op::Late(id, msg) => {
            world.advance_clock(LATE_BY_MS);
            respond(gate, &server, id, msg)
        }
        Op::Retry { id, retry_id, user } => {
            let built = gate.build_retry(RetryRequest {
                server,
                request_id: RequestId::Number(id),
                retry_id: RequestId::Number(retry_id),
                user: user.name().into(),
                tenant: TENANT.into(),
                responses_json: ANSWERS.into(),
            });
            match built {
                Ok(retry) => returned(world, retry)?,
                Err(d) => denied(d),
            }
        }
        Op::ClientRetry {
            id,
            retry_id,
            state,
        } => {
            let mut p = params();
            if let Some(o) = p.as_object_mut() {
                o.insert("requestState".into(), json!(state));
                o.insert(
                    "inputResponses".into(),
                    serde_json::from_str(ANSWERS).unwrap_or_default(),
                );
            }
            let built = gate.retry_from_client(ClientRetry {
                server,
                request_id: Some(RequestId::Number(id)),
                retry_id: RequestId::Number(retry_id),
                user: USER.into(),
                tenant: TENANT.into(),
                method: "tools/call".into(),
                params_json: p.to_string(),
            });
            match built {
                Ok(retry) => returned(world, retry)?,
                Err(d) => denied(d),
            }
        }
        Op::Finish(id) => match gate.finish(FinishRequest {
            server,
            request_id: RequestId::Number(id),
            user: USER.into(),
            tenant: TENANT.into(),
            outcome: CallerOutcome::Cancelled,
        }) {
            Ok(outcome) => format!("ended {}", outcome.as_str()),
            Err(d) => denied(d),
        },
        Op::Expire => match gate.expire_stale() {
            Ok(n) => format!("{n} expired"),
            Err(d) => denied(d),
        },
    })
}

/// A retry the gate returned: recorded, and its receipt held to the answers it carries.
fn returned(world: &World, retry: mrtr_gate_core::Retry) -> Result<String, String> {
    let request: Value = serde_json::from_str(&retry.request_json)
        .map_err(|e| format!("the retry is not JSON: {e}"))?;
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    if let Some(receipt_id) = &retry.consent_receipt_id {
        let answers = params.get("inputResponses").cloned().unwrap_or(Value::Null);
        let digest = mrtr_gate_core::digest::sha256_hex(
            mrtr_gate_core::canonical::to_canonical(&answers).as_bytes(),
        );
        match world.receipt(receipt_id) {
            Some((_, _, answered)) if answered == digest => {}
            other => world.violated(format!(
                "a retry sent answers its receipt {receipt_id} was not given for ({other:?})"
            )),
        }
    }
    world.record_built(id.clone());
    Ok(format!(
        "retry {id} built, round {} state {}",
        retry.round,
        params.get("requestState").unwrap_or(&Value::Null)
    ))
}

/// A gate process's operations, replaced by a fresh process (empty cache) whenever it died.
fn gate_process(
    world: &Arc<World>,
    g: usize,
    mut gate: Gate<GateHost>,
    ops: Vec<Op>,
    points: Points,
) {
    let mut life = 0u32;
    for op in ops {
        if world.revive(g) {
            life = life.saturating_add(1);
            world.note(format!("g{g}.{life} a fresh process replaces the dead one"));
            gate = Gate::new(GateHost::new(Arc::clone(world), g, life, points));
        }
        step(&mut gate, world, g, life, op);
    }
}

fn step(gate: &mut Gate<GateHost>, world: &World, g: usize, life: u32, op: Op) {
    world.note(format!("g{g}.{life} BEGIN {op:?}"));
    world.begin_op(g);
    let result = run_op(gate, world, op).unwrap_or_else(|e| {
        world.violated(format!("the checker itself failed: {e}"));
        e
    });
    world.note(format!("g{g}.{life} END {op:?} -> {result}"));
    if result.starts_with("denied")
        && let Err(what) = world.check_denied(g)
    {
        world.violated(what);
    }
}

/// One run of `config` under the current schedule: its host calls and faults in order, or
/// the first invariant broken. Gate 0 runs on the run's own thread, every other gate and the
/// faults (replication steps among them) each on a thread of their own, spawned once gate 0
/// is warm, the earlier process gone and the replicas hold that state (each spawn, wait and
/// exit of a thread is a scheduling point too, which DFS explores: the start is kept to as few
/// as shuttle allows).
pub fn run_once(config: &Config) -> Result<Outcome, Violation> {
    let world = Arc::new(World::new(config.mode, config.replication));
    let points = config.points();
    let mut gate0 = Gate::new(GateHost::new(Arc::clone(&world), 0, 0, points));
    for op in &config.warm {
        step(&mut gate0, &world, 0, 0, *op);
    }
    if !config.earlier.is_empty() {
        let earlier = config.gates.len();
        let mut gate = Gate::new(GateHost::new(Arc::clone(&world), earlier, 0, points));
        for op in &config.earlier {
            step(&mut gate, &world, earlier, 0, *op);
        }
    }
    world.settle();
    let mut gates = config.gates.iter().cloned().enumerate();
    let (_, ops0) = gates.next().unwrap_or_default();
    let mut threads = Vec::new();
    for (g, ops) in gates {
        let world = Arc::clone(&world);
        threads.push(shuttle::thread::spawn(move || {
            let gate = Gate::new(GateHost::new(Arc::clone(&world), g, 0, points));
            gate_process(&world, g, gate, ops, points);
        }));
    }
    if !config.faults.is_empty() {
        let (faults, world) = (config.faults.clone(), Arc::clone(&world));
        threads.push(shuttle::thread::spawn(move || {
            for fault in faults {
                shuttle::thread::yield_now();
                world.inject(fault);
            }
        }));
    }
    gate_process(&world, 0, gate0, ops0, points);
    for t in threads {
        if t.join().is_err() {
            world.violated("a thread of the run panicked".into());
        }
    }
    if let Some(v) = world.violation() {
        return Err(v);
    }
    trail::check_end(&world).map_err(|what| Violation {
        what,
        log: world.log(),
    })?;
    Ok(Outcome { log: world.log() })
}

/// A run that broke no invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Its host calls and faults, in order.
    pub log: Vec<String>,
}
