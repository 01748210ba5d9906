//! What both transports share while a scenario runs: the scenario, the canary's port, the
//! requests recorded so far and each tool's leg count. A request is counted and recorded
//! here, and its answer decided by [`crate::mcp::answer`]; a transport ([`crate::http`],
//! [`crate::stdio`]) only reads messages off its wire and frames the [`Reply`] it is given.
//! Legs are counted per tool across every connection, so a client that reconnects (a new
//! HTTP connection, a stdio server spawned again) continues the same rounds.

use crate::mcp::{self, Answered};
use crate::record::Request;
use crate::scenario::Scenario;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One scenario's serving state, shared by every connection of a run.
pub struct Served {
    scenario: Arc<Scenario>,
    canary: u16,
    requests: Mutex<Vec<Request>>,
    legs: Mutex<HashMap<String, usize>>,
    connections: AtomicUsize,
}

impl Served {
    /// A fresh state for `scenario`, whose URL placeholders name the canary at `canary`.
    pub fn new(scenario: Arc<Scenario>, canary: u16) -> Served {
        Served {
            scenario,
            canary,
            requests: Mutex::new(Vec::new()),
            legs: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
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

    /// Reads `body` as a request and counts its leg when it is a `tools/call` (`seq` is set
    /// when it is recorded).
    pub fn arrive(&self, http_method: &str, path: &str, body: String) -> Request {
        let mut request = Request::read(0, http_method, path, body);
        if let Some(tool) = &request.tool
            && let Ok(mut legs) = self.legs.lock()
        {
            let leg = legs.entry(tool.clone()).or_insert(0);
            request.leg = Some(*leg);
            *leg += 1;
        }
        request
    }

    /// What the scenario answers `request` (the one place that decides it).
    pub fn answer(&self, request: &Request) -> Answered {
        mcp::answer(&self.scenario, request, self.canary)
    }

    /// Appends `request` to the recording, numbered in order of recording.
    pub fn record(&self, mut request: Request) {
        if let Ok(mut requests) = self.requests.lock() {
            request.seq = requests.len();
            requests.push(request);
        }
    }

    /// Everything recorded (call once the connections have ended).
    pub fn take_requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }
}
