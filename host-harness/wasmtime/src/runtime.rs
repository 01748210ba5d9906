//! Loading the component: compile once, cache the precompiled artifact, pre-link the
//! imports once (`InstancePre`), and hand out sandboxed instances cheaply.

use crate::bindings::GatePluginPre;
use crate::imports::HostState;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

/// The component built by this crate's `build.rs`.
pub const EMBEDDED_COMPONENT: &[u8] = include_bytes!(env!("MRTR_GATE_COMPONENT"));

/// SHA-256 of [`EMBEDDED_COMPONENT`], computed by `build.rs` so a cold start does not hash
/// the component again.
pub const EMBEDDED_COMPONENT_SHA256: &str = env!("MRTR_GATE_COMPONENT_SHA256");

/// How a call that runs too long is stopped (either way it traps and is denied).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallBudget {
    /// A budget of the guest's own CPU time per call, measured on the calling thread's CPU
    /// clock and enforced by epoch interruption: a background thread advances the engine's
    /// epoch every [`EPOCH_TICK`], the guest checks it at function entries and loop heads, and
    /// at the deadline the callback reads the CPU clock and stops the call only once the
    /// guest has used its budget. The CPU clock is first read a quarter of the budget (of wall
    /// time) into the call and the budget measured from there: a good call never pays for it,
    /// a loop runs one to one and a quarter budgets. Time the thread is not running (descheduled by a loaded
    /// machine, waiting on a socket, a lock or a page fault) does not count, nor does the
    /// consent prompt; [`SandboxLimits::wall_backstop`] bounds the wall time as well. The
    /// cheaper of the two checks (docs/performance.md has the figures).
    Deadline(Duration),
    /// Fuel per call (roughly, wasm instructions): deterministic whatever the machine's
    /// load, at a higher price than a deadline (every block counts its fuel).
    Fuel(u64),
}

impl CallBudget {
    /// The deadline in epoch ticks (rounded up: never shorter than asked).
    pub(crate) fn deadline_ticks(d: Duration) -> u64 {
        let tick = EPOCH_TICK.as_nanos().max(1);
        u64::try_from(d.as_nanos().div_ceil(tick)).unwrap_or(u64::MAX)
    }
}

/// How often the epoch advances under [`CallBudget::Deadline`]: the deadline's resolution.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Caps on what one instance may use: a hostile input cannot hang or exhaust the host.
#[derive(Clone, Copy, Debug)]
pub struct SandboxLimits {
    /// What one call may spend before it is stopped.
    pub budget: CallBudget,
    /// Under [`CallBudget::Deadline`], the most wall time one call may take, the time a
    /// person spends at the consent prompt excepted: a backstop for what the CPU clock cannot
    /// see (a call stuck waiting in an import), far above any good call on a loaded machine.
    pub wall_backstop: Duration,
    /// Largest linear memory, in bytes.
    pub max_memory_bytes: usize,
    /// Largest wasm stack, in bytes.
    pub max_wasm_stack: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            // Orders of magnitude above the guest's CPU time in a full form round
            // (docs/performance.md): hostile inputs are refused long before a second, but a
            // bug in the guest cannot spin forever.
            budget: CallBudget::Deadline(Duration::from_secs(1)),
            // Thirty times the CPU budget: a call that has not run its second of CPU time in
            // half a minute is stuck, not slow.
            wall_backstop: Duration::from_secs(30),
            max_memory_bytes: 256 << 20,
            max_wasm_stack: 1 << 20,
        }
    }
}

/// Why the runtime could not be set up, by the step that failed. The underlying wasmtime or
/// I/O error is the [`source`](std::error::Error::source).
///
/// A precompiled-artifact cache that cannot be read, created or written is not an error:
/// the component is then compiled afresh (and, if the cache cannot be written, again on
/// the next start).
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// The wasmtime engine could not be created with the sandbox's configuration.
    Engine(wasmtime::Error),
    /// The component could not be compiled (it is not a valid component, or Cranelift failed).
    Compile(wasmtime::Error),
    /// A freshly precompiled artifact could not be deserialized.
    Deserialize(wasmtime::Error),
    /// The host's imports could not be added to the linker, or the component's imports do not
    /// match them.
    Link(wasmtime::Error),
    /// The component's exports do not match the `gate-plugin` world.
    Exports(wasmtime::Error),
    /// The thread that advances the epoch for call deadlines could not be started.
    EpochThread(std::io::Error),
    /// The component is not the one the host pinned: its SHA-256 differs from the expected
    /// one (nothing of it was compiled).
    UnexpectedComponent {
        /// The SHA-256 the host expects (lowercase hex).
        expected: String,
        /// The SHA-256 of the bytes given.
        actual: String,
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::UnexpectedComponent { expected, actual } => {
                return write!(
                    f,
                    "refused to load the gate component: its sha256 is {actual}, not the {expected} this host expects"
                );
            }
            Self::Engine(_) => {
                "could not load the gate component: creating the wasmtime engine failed"
            }
            Self::Compile(_) => "could not load the gate component: compiling it failed",
            Self::Deserialize(_) => {
                "could not load the gate component: deserializing its precompiled artifact failed"
            }
            Self::Link(_) => "could not load the gate component: linking its imports failed",
            Self::Exports(_) => {
                "could not load the gate component: its exports do not match the gate-plugin world"
            }
            Self::EpochThread(_) => {
                "could not load the gate component: starting the epoch thread failed"
            }
        })
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(match self {
            Self::UnexpectedComponent { .. } => return None,
            Self::Engine(e)
            | Self::Compile(e)
            | Self::Deserialize(e)
            | Self::Link(e)
            | Self::Exports(e) => e.as_ref(),
            Self::EpochThread(e) => e,
        })
    }
}

/// A compiled, pre-linked gate component. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct GateRuntime {
    pub(crate) engine: Engine,
    pub(crate) pre: GatePluginPre<HostState>,
    pub(crate) limits: SandboxLimits,
    component: Component,
    /// Advances the epoch while any clone of this runtime lives (deadline budgets only).
    _ticker: Option<Arc<EpochTicker>>,
}

/// A thread that advances an engine's epoch every [`EPOCH_TICK`] until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine) -> Result<Self, LoadError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, engine) = (Arc::clone(&stop), engine.clone());
        std::thread::Builder::new()
            .name("mrtr-gate-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_err(LoadError::EpochThread)?;
        Ok(Self { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for GateRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateRuntime")
            .field("limits", &self.limits)
            .finish()
    }
}

/// The engine configuration every gate runs under.
fn engine_config(limits: &SandboxLimits) -> Config {
    let mut config = Config::new();
    match limits.budget {
        CallBudget::Deadline(_) => config.epoch_interruption(true),
        CallBudget::Fuel(_) => config.consume_fuel(true),
    };
    config.max_wasm_stack(limits.max_wasm_stack);
    config.wasm_component_model(true);
    config
}

impl GateRuntime {
    /// The embedded component, precompiled artifact cached in the default cache folder.
    pub fn embedded() -> Result<Self, LoadError> {
        Self::load_embedded(Some(&default_cache_dir()), SandboxLimits::default())
    }

    /// The embedded component under `limits`, cached in `cache_dir` when given.
    pub fn load_embedded(
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, LoadError> {
        Self::load_digested(
            EMBEDDED_COMPONENT,
            EMBEDDED_COMPONENT_SHA256,
            cache_dir,
            limits,
        )
    }

    /// Load `component` (its bytes). With `cache_dir`, the precompiled artifact is kept there
    /// and reused (loading it is far cheaper than compiling: docs/performance.md).
    pub fn load(
        component: &[u8],
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, LoadError> {
        let digest = hex(&Sha256::digest(component));
        Self::load_digested(component, &digest, cache_dir, limits)
    }

    /// [`Self::load`], only if `component`'s SHA-256 is `expected_sha256` (lowercase hex, as
    /// `mrtr-gate info` and the release's `SHA256SUMS` print it): a host that pins the
    /// component it reviewed refuses any other before compiling it.
    pub fn load_pinned(
        component: &[u8],
        expected_sha256: &str,
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, LoadError> {
        let actual = hex(&Sha256::digest(component));
        if actual != expected_sha256.to_ascii_lowercase() {
            return Err(LoadError::UnexpectedComponent {
                expected: expected_sha256.to_owned(),
                actual,
            });
        }
        Self::load_digested(component, &actual, cache_dir, limits)
    }

    fn load_digested(
        component: &[u8],
        component_sha256: &str,
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, LoadError> {
        let engine = Engine::new(&engine_config(&limits)).map_err(LoadError::Engine)?;
        let component = match cache_dir {
            Some(dir) => load_cached(&engine, component, component_sha256, dir)?,
            None => Component::new(&engine, component).map_err(LoadError::Compile)?,
        };
        let mut linker = Linker::<HostState>::new(&engine);
        crate::bindings::GatePlugin::add_to_linker::<
            HostState,
            wasmtime::component::HasSelf<HostState>,
        >(&mut linker, |s| s)
        .map_err(LoadError::Link)?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(LoadError::Link)?;
        let pre = GatePluginPre::new(instance_pre).map_err(LoadError::Exports)?;
        let ticker = match limits.budget {
            CallBudget::Deadline(_) => Some(Arc::new(EpochTicker::start(&engine)?)),
            CallBudget::Fuel(_) => None,
        };
        Ok(Self {
            engine,
            pre,
            limits,
            component,
            _ticker: ticker,
        })
    }

    /// The names of the interfaces the component imports, as the component declares them.
    pub fn imports(&self) -> Vec<String> {
        self.component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    /// The names of the interfaces the component exports.
    pub fn exports(&self) -> Vec<String> {
        self.component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    /// The sandbox caps.
    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }
}

/// `$MRTR_GATE_CACHE_DIR`, else `$XDG_CACHE_HOME/mrtr-gate`, else `~/.cache/mrtr-gate`,
/// else the system temp folder.
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MRTR_GATE_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("mrtr-gate");
    }
    if let Some(home) = std::env::var_os("HOME") {
        return PathBuf::from(home).join(".cache").join("mrtr-gate");
    }
    std::env::temp_dir().join("mrtr-gate")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache key binds the component's digest, the engine's compatibility hash and this
/// crate's version: an artifact is only ever loaded into the engine that could have produced
/// it.
///
/// The checksum beside the artifact is a CRC-32, not a cryptographic digest, on purpose:
/// whoever can write the (0700) cache folder can rewrite the checksum too, so no digest kept
/// there stops an attacker; what it must catch is accidental damage (a torn copy, a bad
/// sector, a truncated file), which a CRC does much faster than SHA-256 on the cold-start
/// path, where the whole artifact is checked before every load (docs/performance.md).
fn load_cached(
    engine: &Engine,
    component: &[u8],
    component_sha256: &str,
    dir: &Path,
) -> Result<Component, LoadError> {
    let mut h = Sha256::new();
    h.update(component_sha256.as_bytes());
    h.update(component.len().to_le_bytes());
    let mut compat = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut compat);
    h.update(std::hash::Hasher::finish(&compat).to_le_bytes());
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    let key = hex(&h.finalize());
    let artifact = dir.join(format!("gate-{key}.cwasm"));
    let checksum = dir.join(format!("gate-{key}.crc32"));

    if let (Ok(bytes), Ok(expected)) =
        (std::fs::read(&artifact), std::fs::read_to_string(&checksum))
        && artifact_checksum(&bytes) == expected.trim()
    {
        // SAFETY: wasmtime requires that deserialized bytes come from `precompile_component`
        // of a compatible engine. We wrote this file ourselves, under a key that binds the
        // component, the engine's compatibility hash and our version, and checked its
        // checksum, so a torn or foreign file is never loaded. The cache folder is the
        // user's own (created 0700 below).
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize(engine, &bytes) };
        if let Ok(c) = loaded {
            return Ok(c);
        }
    }
    let bytes = engine
        .precompile_component(component)
        .map_err(LoadError::Compile)?;
    if mrtr_gate_host::reference_hosts::create_private_dir(dir).is_ok() {
        // Write then rename, so a reader never sees half a file.
        let tmp = dir.join(format!("gate-{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, &artifact).is_ok() {
            let _ = std::fs::write(&checksum, artifact_checksum(&bytes));
        }
    }
    // SAFETY: these bytes come from `precompile_component` of this very engine.
    #[allow(unsafe_code)]
    let component =
        unsafe { Component::deserialize(engine, &bytes) }.map_err(LoadError::Deserialize)?;
    Ok(component)
}

/// The artifact's length and CRC-32: what a damaged copy changes.
fn artifact_checksum(bytes: &[u8]) -> String {
    format!("{}:{:08x}", bytes.len(), crc32fast::hash(bytes))
}
