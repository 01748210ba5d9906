//! Shared by the end-to-end tests: one compiled runtime for the whole test binary.

use mrtr_gate_wasmtime::{GateRuntime, SandboxLimits};
use std::path::PathBuf;
use std::sync::OnceLock;

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
