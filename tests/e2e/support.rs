//! Shared by the end-to-end tests: one compiled runtime for the whole test binary.

use mrtr_gate_host::core::host::{AuditEntry, ChainHead};
use mrtr_gate_wasmtime::{GateRuntime, SandboxLimits};
use std::path::PathBuf;
use std::sync::OnceLock;

/// A file of vectors the other hosts read: `made` is written to `path` under
/// `MRTR_GATE_BLESS=1`, and must then equal what `path` holds (as JSON), or `what` changed.
pub fn assert_recorded(path: &std::path::Path, made: &serde_json::Value, what: &str) {
    if std::env::var_os("MRTR_GATE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string_pretty(made).unwrap() + "\n").unwrap();
    }
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        &recorded, made,
        "{what} changed (re-record with MRTR_GATE_BLESS=1 if deliberate)"
    );
}

/// Where the tests cache the precompiled component.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mrtr-gate-cache")
}

/// The runtime every test in a binary shares (compiling once, then loading from the cache).
pub fn runtime() -> &'static GateRuntime {
    static RUNTIME: OnceLock<GateRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        GateRuntime::load_embedded(Some(&cache_dir()), SandboxLimits::default())
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// The shard of [`entry_on`]'s lines.
pub const SHARD: &str = "t0";

/// An audit entry that extends `head` of [`SHARD`]: a small chained line carrying `body`.
pub fn entry_on(head: &ChainHead, body: &str) -> AuditEntry {
    entry_in(SHARD, head, body)
}

/// An audit entry that extends `head` of `shard`: a small chained line carrying `body`.
pub fn entry_in(shard: &str, head: &ChainHead, body: &str) -> AuditEntry {
    let line = format!(
        "{{\"body\":\"{body}\",\"prev_sha256\":\"{}\",\"seq\":{},\"shard\":\"{shard}\"}}",
        head.event_sha256,
        head.seq + 1
    );
    AuditEntry {
        shard: shard.to_owned(),
        seq: head.seq + 1,
        prev_sha256: head.event_sha256.clone(),
        event_sha256: mrtr_gate_host::core::digest::sha256_hex(line.as_bytes()),
        line,
    }
}
