//! The component as a sandboxed plugin: its import list, trap-as-deny with a fresh instance,
//! fuel, deadline and memory caps, the precompiled cache, and two instances sharing one store.

use crate::support;

use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{
    ErrorCause, Policy, Registration, RequestId, ResponseVerdict, RetryRequest, ServerIdentity,
};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::runtime::EMBEDDED_COMPONENT;
use mrtr_gate_wasmtime::{
    BudgetKindMismatch, CallBudget, ComponentGate, GateRuntime, SandboxLimits,
};
use serde_json::json;
use std::time::Duration;

fn server() -> ServerIdentity {
    ServerIdentity::origin("https://server.example/mcp").unwrap()
}

fn register(gate: &mut dyn GateApi, id: i64) {
    let params = json!({"name": "t", "arguments": {"a": 1}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    gate.register(Registration {
        request_id: RequestId::Number(id),
        server: server(),
        user: "alice".into(),
        tenant: "acme".into(),
        method: "tools/call".into(),
        params_json: params.to_string(),
        policy: Policy::default(),
    })
    .unwrap();
}

fn form_round(id: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "input_required",
        "inputRequests": {"f": {"method": "elicitation/create", "params": {"message": "m",
            "requestedSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}},
        "requestState": "st"}})
    .to_string()
}

fn retry(id: i64, retry_id: i64) -> RetryRequest {
    RetryRequest {
        server: server(),
        request_id: RequestId::Number(id),
        retry_id: RequestId::Number(retry_id),
        user: "alice".into(),
        tenant: "acme".into(),
        responses_json: json!({"f": {"action": "accept", "content": {"x": "v"}}}).to_string(),
    }
}

#[test]
fn imports_exactly_the_six_gate_interfaces_and_no_wasi() {
    let rt = support::runtime();
    let mut imports = rt.imports();
    imports.sort();
    assert_eq!(
        imports,
        vec![
            "mrtr:gate/audit@0.6.0",
            "mrtr:gate/clock@0.6.0",
            "mrtr:gate/consent@0.6.0",
            "mrtr:gate/digest@0.6.0",
            "mrtr:gate/journal@0.6.0",
            "mrtr:gate/storage@0.6.0",
        ]
    );
    assert_eq!(rt.exports(), vec!["mrtr:gate/gate@0.6.0"]);
}

/// The Node and Python packages wrap this component: their versions follow the WIT package's,
/// so that a host author can tell from either which interface a package speaks.
/// One version (issue 27): the WIT package's, which every other copy must say (the Cargo
/// workspace and its internal dependencies, this very build, the Python and npm packages and
/// the constants their loaders name the WIT exports by); and one license, whose text ships.
#[test]
fn every_package_carries_the_one_version_and_license() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let wit = read("wit/gate.wit");
    let version = wit
        .lines()
        .find_map(|l| l.trim().strip_prefix("package mrtr:gate@"))
        .and_then(|v| v.strip_suffix(';'))
        .expect("wit/gate.wit declares `package mrtr:gate@X.Y.Z;`");
    assert_eq!(env!("CARGO_PKG_VERSION"), version, "this crate's version");
    // Cargo.toml by its lines: the section a line is in, then the line itself.
    let cargo = read("Cargo.toml");
    let mut section = "";
    let mut internal = 0;
    let mut workspace_version = None;
    let mut workspace_license = None;
    for line in cargo.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[workspace.package]" {
            if let Some(v) = line.strip_prefix("version = ") {
                workspace_version = Some(v.trim_matches('"'));
            } else if let Some(l) = line.strip_prefix("license = ") {
                workspace_license = Some(l.trim_matches('"'));
            }
        } else if section == "[workspace.dependencies]" && line.starts_with("mrtr-gate") {
            internal += 1;
            assert!(
                line.contains(&format!("version = \"={version}\"")),
                "Cargo.toml [workspace.dependencies]: {line}"
            );
        }
    }
    assert_eq!(
        workspace_version,
        Some(version),
        "Cargo.toml [workspace.package] version"
    );
    assert!(internal >= 7, "Cargo.toml names the workspace's own crates");
    let node: serde_json::Value =
        serde_json::from_str(&read("host-harness/node/package.json")).unwrap();
    assert_eq!(node["version"], version, "host-harness/node/package.json");
    let lock: serde_json::Value =
        serde_json::from_str(&read("host-harness/node/package-lock.json")).unwrap();
    assert_eq!(lock["version"], version, "package-lock.json");
    assert_eq!(
        lock["packages"][""]["version"], version,
        "package-lock.json"
    );
    let python = read("host-harness/python/pyproject.toml");
    let says = |text: &str, line: String, file: &str| {
        assert!(text.lines().any(|l| l.trim() == line), "{file} says {line}");
    };
    says(
        &python,
        format!("version = \"{version}\""),
        "pyproject.toml",
    );
    says(
        &read("host-harness/python/src/mrtr_gate/_component.py"),
        format!("WIT_VERSION = \"{version}\""),
        "_component.py",
    );
    says(
        &read("host-harness/node/src/index.js"),
        format!("const WIT = \"{version}\";"),
        "host-harness/node/src/index.js",
    );
    // The license every manifest names, and its text beside them.
    assert_eq!(workspace_license, Some("Apache-2.0"));
    assert_eq!(node["license"], "Apache-2.0");
    says(&python, "license = \"Apache-2.0\"".into(), "pyproject.toml");
    assert!(
        read("LICENSE").contains("Apache License\n                           Version 2.0"),
        "LICENSE holds the Apache-2.0 text"
    );
    // The install lines name the artifacts `scripts/package` writes, by this version.
    let readme = read("README.md");
    for artifact in [
        format!("mrtr_gate-{version}-py3-none-any.whl"),
        format!("mrtr-gate-{version}.tgz"),
    ] {
        assert!(readme.contains(&artifact), "README.md installs {artifact}");
    }
}

#[test]
fn the_embedded_component_is_a_component_not_a_core_module() {
    // Component binary: magic, then version 0x0d and layer 0x01.
    assert_eq!(
        &EMBEDDED_COMPONENT[..8],
        &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
    );
}

#[test]
fn running_out_of_fuel_denies_and_the_next_instance_carries_on() {
    let limits = SandboxLimits {
        budget: CallBudget::Fuel(2_000_000_000),
        ..SandboxLimits::default()
    };
    let rt = GateRuntime::load_embedded(Some(&support::cache_dir()), limits).unwrap();
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(&rt, hosts.services());
    register(&mut gate, 1);
    assert_eq!(
        gate.set_budget(CallBudget::Deadline(Duration::from_secs(1))),
        Err(BudgetKindMismatch),
        "a fuel engine cannot enforce deadlines"
    );
    gate.set_budget(CallBudget::Fuel(1_000)).unwrap();
    let denied = gate.accept_response(&server(), &form_round(1)).unwrap_err();
    assert_eq!(denied.code, "guest_out_of_fuel");
    assert_eq!(denied.cause, ErrorCause::Host);
    assert_eq!(gate.traps(), 1);
    // The binding lives in storage, so a fresh instance picks up where the trap left off.
    gate.set_budget(limits.budget).unwrap();
    let v = gate.accept_response(&server(), &form_round(1)).unwrap();
    assert!(matches!(v, ResponseVerdict::InputRequired(_)));
    let r = gate.build_retry(retry(1, 2)).unwrap();
    assert!(r.request_json.contains("\"requestState\":\"st\""));
    assert_eq!(gate.traps(), 1);
}

#[test]
fn a_passed_deadline_denies_and_the_next_instance_carries_on() {
    // The default budget is a deadline; a zero deadline is already past at the first check.
    assert!(matches!(
        SandboxLimits::default().budget,
        CallBudget::Deadline(_)
    ));
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(support::runtime(), hosts.services());
    register(&mut gate, 1);
    assert_eq!(
        gate.set_budget(CallBudget::Fuel(1_000)),
        Err(BudgetKindMismatch),
        "a deadline engine has no fuel"
    );
    gate.set_budget(CallBudget::Deadline(Duration::ZERO))
        .unwrap();
    let denied = gate.accept_response(&server(), &form_round(1)).unwrap_err();
    assert_eq!(denied.code, "guest_deadline_exceeded");
    assert_eq!(denied.cause, ErrorCause::Host);
    assert_eq!(gate.traps(), 1);
    gate.set_budget(SandboxLimits::default().budget).unwrap();
    let v = gate.accept_response(&server(), &form_round(1)).unwrap();
    assert!(matches!(v, ResponseVerdict::InputRequired(_)));
    assert!(gate.build_retry(retry(1, 2)).is_ok());
    assert_eq!(gate.traps(), 1);
}

/// A user who takes `delay` over the prompt, then grants.
struct SlowUser {
    delay: Duration,
    inner: mrtr_gate_host::core::memory::ScriptedConsent,
}

impl mrtr_gate_host::core::host::Consent for SlowUser {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_host::core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_host::core::host::ConsentReceipt, mrtr_gate_host::core::host::HostError>
    {
        std::thread::sleep(self.delay);
        self.inner.request_consent(prompt)
    }
}

#[test]
fn time_the_user_spends_on_the_consent_prompt_is_not_the_guests_deadline() {
    // A 50 ms deadline; the user takes 300 ms, six ticks past it, while the guest waits in
    // the consent import. Only the guest's own time counts.
    let hosts = ScenarioHosts::new();
    let mut services = hosts.services();
    services.consent = std::sync::Arc::new(SlowUser {
        delay: Duration::from_millis(300),
        inner: hosts.consent.clone(),
    });
    let mut gate = ComponentGate::new(support::runtime(), services);
    gate.set_budget(CallBudget::Deadline(Duration::from_millis(50)))
        .unwrap();
    register(&mut gate, 1);
    gate.accept_response(&server(), &form_round(1)).unwrap();
    let r = gate.build_retry(retry(1, 2)).unwrap();
    assert!(r.consent_receipt_id.is_some());
    assert_eq!(gate.traps(), 0);
}

/// A store that takes `delay` over every read: a slow network, a busy Redis, or this
/// thread kept off the cores by a loaded machine, all of which look the same to the gate.
struct SlowStore {
    delay: Duration,
    inner: mrtr_gate_host::services::SharedStorage,
}

impl mrtr_gate_host::core::host::Storage for SlowStore {
    fn read(
        &self,
        keys: &[mrtr_gate_host::core::host::ReadKey<'_>],
    ) -> Result<Vec<mrtr_gate_host::core::host::Versioned>, mrtr_gate_host::core::host::HostError>
    {
        std::thread::sleep(self.delay);
        self.inner.read(keys)
    }
    fn write(
        &self,
        writes: &[mrtr_gate_host::core::host::Write<'_>],
    ) -> Result<Vec<u64>, mrtr_gate_host::core::host::HostError> {
        self.inner.write(writes)
    }
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<mrtr_gate_host::core::host::DuePage, mrtr_gate_host::core::host::HostError> {
        self.inner.list_due(due_by_ms, cursor, limit)
    }
}

#[test]
fn a_call_whose_thread_waits_longer_than_its_budget_is_not_denied() {
    // A 50 ms budget; every storage read takes 300 ms of wall time, none of it the guest's
    // CPU time. The deadline is the guest's own CPU time, so every call goes through.
    let hosts = ScenarioHosts::new();
    let mut services = hosts.services();
    services.storage = std::sync::Arc::new(SlowStore {
        delay: Duration::from_millis(300),
        inner: services.storage.clone(),
    });
    let mut gate = ComponentGate::new(support::runtime(), services);
    gate.set_budget(CallBudget::Deadline(Duration::from_millis(50)))
        .unwrap();
    register(&mut gate, 1);
    let v = gate.accept_response(&server(), &form_round(1)).unwrap();
    assert!(matches!(v, ResponseVerdict::InputRequired(_)));
    let r = gate.build_retry(retry(1, 2)).unwrap();
    assert!(r.consent_receipt_id.is_some());
    assert_eq!(gate.traps(), 0);
}

#[test]
fn a_call_stuck_past_the_wall_backstop_is_denied_and_the_next_instance_carries_on() {
    // What CPU time cannot see, the backstop bounds: a store that hangs for longer than it.
    let limits = SandboxLimits {
        wall_backstop: Duration::from_millis(200),
        ..SandboxLimits::default()
    };
    let rt = GateRuntime::load_embedded(Some(&support::cache_dir()), limits).unwrap();
    let hosts = ScenarioHosts::new();
    let mut services = hosts.services();
    services.storage = std::sync::Arc::new(SlowStore {
        delay: Duration::from_millis(500),
        inner: services.storage.clone(),
    });
    register(&mut ComponentGate::new(&rt, hosts.services()), 1);
    let mut gate = ComponentGate::new(&rt, services);
    let denied = gate.accept_response(&server(), &form_round(1)).unwrap_err();
    assert_eq!(denied.code, "guest_deadline_exceeded");
    assert_eq!(gate.traps(), 1);
    let mut gate = ComponentGate::new(&rt, hosts.services());
    let v = gate.accept_response(&server(), &form_round(1)).unwrap();
    assert!(matches!(v, ResponseVerdict::InputRequired(_)));
}

#[test]
fn a_memory_cap_turns_a_huge_response_into_a_denial_not_a_host_crash() {
    let limits = SandboxLimits {
        max_memory_bytes: 4 << 20,
        ..SandboxLimits::default()
    };
    let rt = GateRuntime::load_embedded(Some(&support::cache_dir()), limits).unwrap();
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(&rt, hosts.services());
    register(&mut gate, 1);
    // 3.5 MiB of state, inside the gate's own 4 MiB response bound, but over the sandbox's memory.
    let huge = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
        "requestState": "x".repeat(3_500_000)}})
    .to_string();
    let denied = gate.accept_response(&server(), &huge).unwrap_err();
    assert!(
        denied.code == "guest_trapped" || denied.code == "invalid_requestState",
        "{denied:?}"
    );
    // Either way the gate still works afterwards.
    let v = gate.accept_response(&server(), &form_round(1)).unwrap();
    assert!(matches!(v, ResponseVerdict::InputRequired(_)));
}

#[test]
fn two_instances_sharing_storage_never_both_retry_one_round() {
    let hosts = ScenarioHosts::new();
    let mut a = ComponentGate::new(support::runtime(), hosts.services());
    let mut b = ComponentGate::new(support::runtime(), hosts.services());
    for id in 0..20 {
        let base = id * 10;
        register(&mut a, base);
        a.accept_response(&server(), &form_round(base)).unwrap();
        let first = b.build_retry(retry(base, base + 1));
        let second = a.build_retry(retry(base, base + 2));
        assert!(first.is_ok());
        assert_eq!(second.unwrap_err().code, "inactive_mrtr_round");
    }
    let submitted = hosts
        .audit
        .events()
        .iter()
        .filter(|e| e["event"] == "submitted")
        .count();
    assert_eq!(submitted, 20);
}

/// A user whose prompt stays open while a second instance retries the same round: the
/// second instance's `build-retry` runs inside the first one's consent import.
struct RacingUser {
    rival: std::sync::Mutex<Option<(ComponentGate, RetryRequest)>>,
    rival_got: std::sync::Mutex<Option<Result<mrtr_gate_host::core::Retry, String>>>,
    inner: mrtr_gate_host::core::memory::ScriptedConsent,
}

impl mrtr_gate_host::core::host::Consent for RacingUser {
    fn request_consent(
        &self,
        prompt: &mrtr_gate_host::core::host::ConsentPrompt,
    ) -> Result<mrtr_gate_host::core::host::ConsentReceipt, mrtr_gate_host::core::host::HostError>
    {
        if let Some((mut rival, request)) = self.rival.lock().unwrap().take() {
            let got = rival.build_retry(request).map_err(|d| d.code.to_string());
            *self.rival_got.lock().unwrap() = Some(got);
        }
        self.inner.request_consent(prompt)
    }
}

#[test]
fn a_round_retried_by_two_instances_at_once_yields_exactly_one_retry() {
    let hosts = ScenarioHosts::new();
    let racing = std::sync::Arc::new(RacingUser {
        rival: std::sync::Mutex::new(None),
        rival_got: std::sync::Mutex::new(None),
        inner: hosts.consent.clone(),
    });
    let mut services = hosts.services();
    services.consent = racing.clone();
    let mut a = ComponentGate::new(support::runtime(), services);
    register(&mut a, 1);
    a.accept_response(&server(), &form_round(1)).unwrap();
    let b = ComponentGate::new(support::runtime(), hosts.services());
    *racing.rival.lock().unwrap() = Some((b, retry(1, 3)));
    let a_got = a.build_retry(retry(1, 2));
    let b_got = racing.rival_got.lock().unwrap().take().unwrap();
    // B consumed the round first; A lost the compare-and-swap and sends nothing.
    assert!(b_got.unwrap().request_json.contains("\"id\":3"));
    assert_eq!(a_got.unwrap_err().code, "state_already_used");
    let submitted = hosts
        .audit
        .events()
        .iter()
        .filter(|e| e["event"] == "submitted")
        .count();
    assert_eq!(submitted, 1, "exactly one `submitted` event");
    assert_eq!(a.traps(), 0);
}

#[test]
fn the_precompiled_cache_is_written_reused_and_survives_corruption() {
    let dir = std::env::temp_dir().join(format!("mrtr-gate-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = GateRuntime::load_embedded(Some(&dir), SandboxLimits::default()).unwrap();
    let artifacts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(artifacts.len(), 1);
    drop(first);
    // Reused: loads without compiling (covered by timing in the bench); still works.
    let second = GateRuntime::load_embedded(Some(&dir), SandboxLimits::default()).unwrap();
    assert_eq!(second.imports().len(), 6);
    // A corrupted artifact is never deserialized: the checksum fails and it is rebuilt.
    // First one flipped bit in the middle (same length, valid header), then a foreign file.
    let mut damaged = std::fs::read(&artifacts[0]).unwrap();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x10;
    for corrupt in [damaged, b"not a precompiled component".to_vec()] {
        std::fs::write(&artifacts[0], &corrupt).unwrap();
        let third = GateRuntime::load_embedded(Some(&dir), SandboxLimits::default()).unwrap();
        let hosts = ScenarioHosts::new();
        let mut gate = ComponentGate::new(&third, hosts.services());
        register(&mut gate, 7);
        assert!(gate.accept_response(&server(), &form_round(7)).is_ok());
        assert_ne!(std::fs::read(&artifacts[0]).unwrap(), corrupt, "rebuilt");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_bytes_never_trap_the_component() {
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(support::runtime(), hosts.services());
    register(&mut gate, 1);
    let deep = "[".repeat(100_000);
    let inputs = [
        String::new(),
        "\u{0}".into(),
        "{".into(),
        deep,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"requestState\":\"\\ud800\"}}".into(),
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"resultType\":\"input_required\",\"inputRequests\":{{{}}}}}}}",
            (0..100).map(|i| format!("\"k{i}\":{{\"method\":\"elicitation/create\",\"params\":{{\"message\":\"m\",\"requestedSchema\":{{\"type\":\"object\",\"properties\":{{}}}}}}}}")).collect::<Vec<_>>().join(",")),
        "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"result\":{}}".into(),
    ];
    for input in &inputs {
        let r = gate.accept_response(&server(), input);
        assert!(r.is_err(), "{input:.80}");
    }
    assert_eq!(gate.traps(), 0);
}

/// Issue 3's size budget, checked on every test run: at most 1.5 MB.
#[test]
fn the_component_fits_the_size_budget() {
    let size = EMBEDDED_COMPONENT.len();
    assert!(
        size <= 1_500_000,
        "the component is {size} bytes, over the 1.5 MB budget"
    );
}

/// Live state is bounded by live rounds: once warm, thousands more finished rounds leave
/// the instance's memory where it was and the store empty.
#[test]
fn memory_and_storage_stay_flat_however_many_rounds_pass() {
    let hosts = ScenarioHosts::new();
    let mut gate = ComponentGate::new(support::runtime(), hosts.services());
    mrtr_gate_testkit::bench::rounds(&mut gate, 0, 1_000, true).unwrap();
    let warm = gate.memory_bytes();
    assert!(warm > 0);
    assert_eq!(
        hosts.storage.len(),
        0,
        "finished rounds left records behind"
    );
    mrtr_gate_testkit::bench::rounds(&mut gate, 1_000, 4_000, true).unwrap();
    assert_eq!(
        gate.memory_bytes(),
        warm,
        "the instance grew after 5,000 rounds"
    );
    assert_eq!(hosts.storage.len(), 0);
    assert_eq!(gate.traps(), 0);
}

/// Reproducible (issue 27): the component's bytes depend on the sources, not on where they
/// were built. Panic locations name source files; the guest build maps the cargo home and
/// the checkout to fixed prefixes (`/cargo`, `/mrtr-gate`), so no path of this machine is
/// inside.
#[test]
fn the_component_names_no_path_of_the_machine_it_was_built_on() {
    let contains = |needle: &str| {
        !needle.is_empty()
            && EMBEDDED_COMPONENT
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
    };
    let root = env!("CARGO_MANIFEST_DIR");
    assert!(!contains(root), "the checkout's path {root} is inside");
    let home = std::env::var("CARGO_HOME")
        .ok()
        .or_else(|| std::env::var("HOME").ok().map(|h| format!("{h}/.cargo")));
    if let Some(home) = home {
        assert!(!contains(&home), "the cargo home {home} is inside");
    }
    assert!(
        contains("/cargo/registry/"),
        "the registry's sources are named under /cargo"
    );
}

/// Pinning (issue 27): a host that names the SHA-256 it expects loads that component and
/// refuses any other, before compiling it.
#[test]
fn a_pinned_host_loads_only_the_component_whose_digest_it_expects() {
    use mrtr_gate_wasmtime::runtime::{EMBEDDED_COMPONENT_SHA256, LoadError};
    use mrtr_gate_wasmtime::{GateRuntime, SandboxLimits};
    let expected = EMBEDDED_COMPONENT_SHA256;
    assert!(
        GateRuntime::load_pinned(EMBEDDED_COMPONENT, expected, None, SandboxLimits::default())
            .is_ok()
    );
    let mut other = EMBEDDED_COMPONENT.to_vec();
    other.extend_from_slice(&[0, 4, b'x', b'x', b'x', 0]);
    match GateRuntime::load_pinned(&other, expected, None, SandboxLimits::default()) {
        Err(LoadError::UnexpectedComponent { actual, .. }) => assert_ne!(actual, expected),
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("another component was loaded"),
    }
    let e = GateRuntime::load_pinned(
        EMBEDDED_COMPONENT,
        &"0".repeat(64),
        None,
        SandboxLimits::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains(expected), "{e}");
}
