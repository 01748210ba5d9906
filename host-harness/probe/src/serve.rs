//! What both transports share while a scenario runs: the scenario, the canary's port, the
//! requests recorded so far and each tool's leg count. A request is counted and recorded
//! here, and its answer decided by [`crate::mcp::answer`]; a transport ([`crate::http`],
//! [`crate::stdio`]) only reads messages off its wire and frames the [`Reply`] it is given.
//! Legs are counted per tool across every connection, so a client that reconnects (a new
//! HTTP connection, a stdio server spawned again) continues the same rounds. The run's held
//! call ([`Hold`]) lives here too: a `notifications/cancelled` is read here, and a transport
//! asks [`Served::hold`] when to write the late round and the fallback's result.

use crate::hold::{Hold, HoldRecord};
use crate::json_text::raw_member;
use crate::mcp::{self, Answered};
use crate::record::Request;
use crate::respond::envelope;
use crate::scenario::Scenario;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What legs are counted by: a tool's calls, a resource's reads, a method's requests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Leg {
    Tool(String),
    Resource(String),
    Method(String),
}

/// One scenario's serving state, shared by every connection of a run.
pub struct Served {
    scenario: Arc<Scenario>,
    canary: u16,
    requests: Mutex<Vec<Request>>,
    legs: Mutex<HashMap<Leg, usize>>,
    connections: AtomicUsize,
    hold: Hold,
}

impl Served {
    /// A fresh state for `scenario`, whose URL placeholders name the canary at `canary`; a
    /// held call falls back after `fallback`.
    pub fn new(scenario: Arc<Scenario>, canary: u16, fallback: Duration) -> Served {
        Served {
            scenario,
            canary,
            requests: Mutex::new(Vec::new()),
            legs: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
            hold: Hold::new(fallback),
        }
    }

    /// The scenario served.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// A number for a new connection (from 1), for the recording.
    pub fn connection(&self) -> usize {
        self.connections.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Reads `body` as a request whose first byte came at `started`, and counts its leg when
    /// it is a `tools/call`, a `resources/read` of a resource the scenario lists, or of a method
    /// the scenario answers (`seq` is set when it is recorded). A `notifications/cancelled`
    /// naming the held call cancels it.
    pub fn arrive(&self, http_method: &str, path: &str, body: String, started: Instant) -> Request {
        let mut request = Request::read(0, http_method, path, body);
        request.started = started;
        if request.method.as_deref() == Some("notifications/cancelled")
            && let Some(named) = raw_member(&request.body, &["params", "requestId"])
        {
            self.hold.cancel_id(named);
        }
        let counted = match (&request.tool, request.method.as_deref()) {
            (Some(tool), _) => Some(Leg::Tool(tool.clone())),
            (None, Some("resources/read")) => request
                .value
                .as_ref()
                .and_then(|v| v.pointer("/params/uri"))
                .and_then(serde_json::Value::as_str)
                .filter(|uri| self.scenario.resource(uri).is_some())
                .map(|uri| Leg::Resource(uri.to_owned())),
            (None, Some(method)) if self.scenario.method(method).is_some() => {
                Some(Leg::Method(method.to_owned()))
            }
            _ => None,
        };
        if let Some(key) = counted
            && let Ok(mut legs) = self.legs.lock()
        {
            let leg = legs.entry(key).or_insert(0);
            request.leg = Some(*leg);
            *leg += 1;
        }
        request
    }

    /// What the scenario answers `request` (the one place that decides it).
    pub fn answer(&self, request: &Request) -> Answered {
        mcp::answer(&self.scenario, request, self.canary)
    }

    /// The run's held call.
    pub fn hold(&self) -> &Hold {
        &self.hold
    }

    /// Starts holding call `id` (`late` is for the next request once it is cancelled);
    /// `Err(an error answer)` if a call is already held.
    pub fn start_hold(&self, id: &str, late: String) -> Result<(), String> {
        if self.hold.start(id, late) {
            return Ok(());
        }
        let error =
            serde_json::json!({"code": -32603, "message": "the probe holds one call per run"});
        Err(envelope(id, "error", &error))
    }

    /// Appends `request` to the recording, numbered in order of recording; its number.
    pub fn record(&self, mut request: Request) -> usize {
        let Ok(mut requests) = self.requests.lock() else {
            return usize::MAX;
        };
        let seq = requests.len();
        request.seq = seq;
        requests.push(request);
        seq
    }

    /// Request `seq` had its answer at `at` (the pacing check reads it).
    pub fn answered(&self, seq: usize, at: Instant) {
        if let Ok(mut requests) = self.requests.lock()
            && let Some(r) = requests.get_mut(seq)
        {
            r.answered = Some(at);
        }
    }

    /// Everything recorded and the held call's outcome (call once the connections have
    /// ended: a held call's close is known then).
    pub fn take(&self) -> (Vec<Request>, Option<HoldRecord>) {
        let requests = self
            .requests
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        (requests, self.hold.record())
    }
}
