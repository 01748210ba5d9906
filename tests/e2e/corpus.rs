//! Runs every scenario of the shared corpus (`tests/corpus/*.json`) through the component in
//! wasmtime AND through the native core, and requires both to give the expected verdicts.

use crate::support;

use mrtr_gate_host::NativeGate;
use mrtr_gate_testkit::corpus::{
    all_scenarios, run_scenario, run_scenario_with, trail_path, transcript_path,
};
use mrtr_gate_testkit::fixture::ScenarioHosts;
use mrtr_gate_wasmtime::ComponentGate;
use serde_json::Value;

/// Every scenario of the corpus, through the one loader every runner uses.
fn scenarios() -> Vec<(String, Value)> {
    all_scenarios()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|s| (s.file, s.json))
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
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        let _ = run_scenario_with(
            &scenario,
            &mut ComponentGate::new(support::runtime(), a.services()),
            &a,
            &mut ta,
        );
        let _ = run_scenario_with(&scenario, &mut NativeGate::new(b.services()), &b, &mut tb);
        let la: Vec<_> = a.audit.entries().into_iter().map(|e| e.line).collect();
        let lb: Vec<_> = b.audit.entries().into_iter().map(|e| e.line).collect();
        assert_eq!(la, lb, "{file}: the two engines disagree");
        assert_eq!(ta, tb, "{file}: the two engines' transcripts disagree");
    }
}

/// Every scenario's audit trail and transcript are byte for byte the ones recorded in
/// `tests/corpus/trails/` and `tests/corpus/transcripts/` (the other hosts are held to them too):
/// a change that alters what the gate records shows up here, line by line. A deliberate
/// change re-records them with `MRTR_GATE_BLESS=1 cargo test --test e2e corpus::`, and the diff
/// of the recorded files is then part of the change.
#[test]
fn every_scenario_writes_its_recorded_audit_trail() {
    let bless = std::env::var_os("MRTR_GATE_BLESS").is_some();
    let mut failures = Vec::new();
    for (file, scenario) in scenarios() {
        let hosts = ScenarioHosts::new();
        let mut transcript = Vec::new();
        let _ = run_scenario_with(
            &scenario,
            &mut NativeGate::new(hosts.services()),
            &hosts,
            &mut transcript,
        );
        let trail: String = hosts
            .audit
            .entries()
            .into_iter()
            .map(|e| e.line + "\n")
            .collect();
        let transcript: String = transcript.into_iter().map(|l| l + "\n").collect();
        for (what, path, got) in [
            ("trail", trail_path(&file), trail),
            ("transcript", transcript_path(&file), transcript),
        ] {
            if bless {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(want) if want == got => {}
                Ok(want) => {
                    let at = want
                        .lines()
                        .zip(got.lines())
                        .position(|(a, b)| a != b)
                        .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
                    failures.push(format!("{file}: the {what} differs from line {}", at + 1));
                }
                Err(e) => failures.push(format!("{file}: no recorded {what} ({e})")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} recording(s) differ (re-record with MRTR_GATE_BLESS=1 if the change is deliberate):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
