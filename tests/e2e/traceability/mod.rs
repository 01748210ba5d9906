//! Every requirement the gate answers to, traced to the code that enforces it and the tests
//! that prove it: `docs/requirements.json` is the data, `check` holds it to the repository
//! (every named function, test, scenario and code exists; every code and every corpus scenario
//! is traced), `render` turns it into `docs/traceability.md`, which must be current.
//! `MRTR_GATE_BLESS=1 cargo test --test e2e traceability::` rewrites the page.

pub mod check;
mod render;

use serde_json::Value;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn data() -> Value {
    let text = std::fs::read_to_string(repo().join("docs/requirements.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn problems(data: &Value) -> Vec<String> {
    check::problems(data, &check::Repo::read(&repo()))
}

#[test]
fn every_requirement_is_traced_or_reasoned_out_and_every_name_exists() {
    let found = problems(&data());
    assert!(
        found.is_empty(),
        "{} traceability problem(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_traceability_page_is_generated_from_the_data() {
    let path = repo().join("docs/traceability.md");
    let page = render::page(&data());
    if std::env::var_os("MRTR_GATE_BLESS").is_some() {
        std::fs::write(&path, &page).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == page,
        "docs/traceability.md is stale: regenerate it with \
         MRTR_GATE_BLESS=1 cargo test --test e2e traceability::"
    );
}

/// The data with one requirement's member changed by `edit`.
fn planted(id: &str, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut data = data();
    let requirement = data["requirements"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["id"] == id)
        .unwrap();
    edit(requirement.as_object_mut().unwrap());
    data
}

fn push(member: &mut Value, item: &str) {
    member.as_array_mut().unwrap().push(Value::from(item));
}

#[test]
fn a_planted_missing_test_is_caught() {
    let missing = "guest/core/tests/flows/consent.rs::a_test_nobody_wrote";
    let data = planted("seed.deny.missing-consent", |r| {
        push(&mut r["tests"], missing)
    });
    let found = problems(&data);
    assert!(
        found.iter().any(|p| p.contains(missing)),
        "the missing test is not reported: {found:?}"
    );
}

#[test]
fn a_planted_unknown_code_is_caught() {
    let data = planted("seed.reject.cross-user", |r| {
        push(&mut r["codes"], "cross_user_replay")
    });
    let found = problems(&data);
    assert!(
        found.iter().any(|p| p.contains("`cross_user_replay`")),
        "the unknown code is not reported: {found:?}"
    );
}

#[test]
fn a_requirement_with_no_proof_a_code_traced_nowhere_and_an_unproving_scenario_are_caught() {
    let mut data = planted("seed.reject.cross-tenant", |r| {
        r["tests"] = Value::Array(Vec::new());
        r["scenarios"] = Value::Array(Vec::new());
    });
    // `round_limit_exceeded` is traced by these two only; `round_limit_exceeded.json` is
    // proved by aisvs.10.5.2 only.
    for r in data["requirements"].as_array_mut().unwrap() {
        if r["id"] == "aisvs.10.5.2" {
            r["codes"] = serde_json::json!(["limit_exceeded"]);
            r["scenarios"] = Value::Array(Vec::new());
        }
    }
    let found = problems(&data);
    for expected in [
        "seed.reject.cross-tenant: traced, but no test",
        "`round_limit_exceeded` is traced by no requirement",
        "scenario `round_limit_exceeded` proves no requirement",
    ] {
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{expected:?} is not reported: {found:?}"
        );
    }
}

#[test]
fn an_alias_that_names_no_other_requirement_is_caught() {
    let data = planted("aisvs-1.01.10.4.21", |r| {
        push(&mut r["aliases"], "url.open-unwatched");
        push(&mut r["aliases"], "aisvs-1.01.10.4.21");
    });
    let found = problems(&data);
    for alias in ["`url.open-unwatched`", "`aisvs-1.01.10.4.21`"] {
        assert!(
            found.iter().any(|p| p.contains(alias)),
            "{alias} is not reported: {found:?}"
        );
    }
}

#[test]
fn a_function_that_is_not_there_and_a_test_that_is_not_a_test_are_caught() {
    let gone = "guest/core/src/gate/retry.rs::check_the_user";
    let not_a_test = "guest/core/src/gate/retry.rs::prepare_retry";
    let data = planted("seed.reject.cross-user", |r| {
        push(&mut r["enforced_by"], gone);
        push(&mut r["tests"], not_a_test);
    });
    let found = problems(&data);
    for expected in [gone, not_a_test] {
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{expected} is not reported: {found:?}"
        );
    }
}
