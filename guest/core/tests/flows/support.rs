//! Helpers shared by several flow modules: request ids, audit event views, retry parameters,
//! and the deprecated requests (roots, sampling) with the capabilities that declare them.

use crate::common::*;
use mrtr_gate_core::RequestId;
use serde_json::{Value, json};

/// What the audit trail records of a URL: the kept `prefix` (scheme, host, port) and the
/// SHA-256 of the whole text (docs/audit.md, "URLs and URIs in the trail").
pub fn redacted(prefix: &str, whole: &str) -> String {
    format!(
        "{prefix}#sha256:{}",
        mrtr_gate_core::digest::sha256_hex(whole.as_bytes())
    )
}

/// A numeric request id.
pub fn n(i: i64) -> RequestId {
    RequestId::Number(i)
}

/// A string request id.
pub fn s(v: &str) -> RequestId {
    RequestId::Text(v.into())
}

/// The `event` kind of each audit event, in order.
pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The `params` object of a retry request.
pub fn params_of(retry_json: &str) -> serde_json::Map<String, Value> {
    parse(retry_json)["params"]
        .as_object()
        .cloned()
        .expect("params object")
}

/// The terminal audit events of the binding opened by `original`.
pub fn terminal_of(fx: &Fx, original: impl Into<Value>) -> Vec<Value> {
    fx.events_of(original)
        .into_iter()
        .filter(|e| e["event"] == "terminal")
        .collect()
}

/// A deprecated `roots/list` request.
pub fn roots_request() -> Value {
    json!({"method": "roots/list"})
}

/// A deprecated `sampling/createMessage` request, with a tool list when `tools`.
pub fn sampling_request(tools: bool) -> Value {
    let mut p = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
        "maxTokens": 100,
        "systemPrompt": "be brief"
    });
    if tools {
        p["tools"] = json!([{"name": "calc", "inputSchema": {"type": "object"}}]);
    }
    json!({"method": "sampling/createMessage", "params": p})
}

/// Client capabilities declaring both elicitation modes, roots and sampling.
pub fn all_caps() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "roots": {}, "sampling": {}})
}

/// A store that records what the gate asks of it: every key read and the cursor of every
/// `list-due` call (one per page), over the fixture's in-memory store.
#[derive(Clone)]
pub struct Recorded {
    pub inner: mrtr_gate_core::memory::MemoryStorage,
    pub cursors: std::rc::Rc<std::cell::RefCell<Vec<Option<String>>>>,
    pub read: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
}

impl Recorded {
    pub fn over(inner: mrtr_gate_core::memory::MemoryStorage) -> Self {
        Self {
            inner,
            cursors: Default::default(),
            read: Default::default(),
        }
    }
}

impl mrtr_gate_core::host::Storage for Recorded {
    fn read(
        &self,
        keys: &[mrtr_gate_core::host::ReadKey<'_>],
    ) -> Result<Vec<mrtr_gate_core::host::Versioned>, mrtr_gate_core::host::HostError> {
        self.read
            .borrow_mut()
            .extend(keys.iter().map(|k| k.key.to_owned()));
        self.inner.read(keys)
    }
    fn write(
        &self,
        writes: &[mrtr_gate_core::host::Write<'_>],
    ) -> Result<Vec<u64>, mrtr_gate_core::host::HostError> {
        self.inner.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_core::host::DuePage, mrtr_gate_core::host::HostError> {
        self.cursors.borrow_mut().push(cursor.map(str::to_owned));
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}
