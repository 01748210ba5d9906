//! Runs every scenario of the shared corpus (`tests/corpus/*.json`) through the component in
//! wasmtime AND through the native core, and requires both to give the expected verdicts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

mod support;

use mrtr_gate_host::corpus::{ScenarioHosts, run_scenario};
use mrtr_gate_host::{ComponentGate, NativeGate};
use serde_json::Value;
use std::path::PathBuf;

fn scenarios() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

#[test]
fn corpus_is_not_empty_and_names_are_unique() {
    let all = scenarios();
    assert!(all.len() >= 20, "only {} scenarios", all.len());
    let mut names: Vec<_> = all
        .iter()
        .map(|(_, v)| v["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len());
}

#[test]
fn every_scenario_passes_in_the_component() {
    let mut failures = Vec::new();
    for (file, scenario) in scenarios() {
        let hosts = ScenarioHosts::new();
        let mut gate = ComponentGate::new(support::runtime(), hosts.services());
        if let Err(e) = run_scenario(&scenario, &mut gate, &hosts) {
            failures.push(format!("{file}: {e}"));
        }
        assert_eq!(gate.traps(), 0, "{file}: the component trapped");
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_scenario_passes_in_the_native_core() {
    let mut failures = Vec::new();
    for (file, scenario) in scenarios() {
        let hosts = ScenarioHosts::new();
        let mut gate = NativeGate::new(hosts.services());
        if let Err(e) = run_scenario(&scenario, &mut gate, &hosts) {
            failures.push(format!("{file}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn component_and_native_core_write_the_same_audit_trail() {
    for (file, scenario) in scenarios() {
        let a = ScenarioHosts::new();
        let b = ScenarioHosts::new();
        let _ = run_scenario(
            &scenario,
            &mut ComponentGate::new(support::runtime(), a.services()),
            &a,
        );
        let _ = run_scenario(&scenario, &mut NativeGate::new(b.services()), &b);
        let la: Vec<_> = a.audit.entries().into_iter().map(|e| e.line).collect();
        let lb: Vec<_> = b.audit.entries().into_iter().map(|e| e.line).collect();
        assert_eq!(la, lb, "{file}: the two engines disagree");
    }
}
