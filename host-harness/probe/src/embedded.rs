//! The scenarios shipped in the binary: `tests/probe/scenarios/*.json`, embedded at build
//! time and read like any other file (a test holds this list equal to the folder, so a new
//! scenario cannot be forgotten here).

use crate::scenario::{Scenario, ScenarioError, check_set, parse};

macro_rules! scenarios {
    ($($name:literal),* $(,)?) => {
        /// Every embedded scenario file: its stem and its text.
        pub const FILES: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../../tests/probe/scenarios/", $name, ".json")))),*
        ];
    };
}

scenarios!(
    "mrtr-control-form-round",
    "mrtr-duplicate-input-key",
    "mrtr-duplicate-result-type",
    "mrtr-unknown-result-type",
    "mrtr-request-state-exact",
    "mrtr-request-state-lone-surrogate",
    "mrtr-answers-off-schema",
    "mrtr-url-unsafe",
    "mrtr-foreign-id-round",
    "mrtr-legacy-elicitation-request",
    "mrtr-retry-after-transport-error",
    "mrtr-round-cap",
    "mrtr-schema-outside-subset",
    "mrtr-url-warned",
    "mrtr-oversized-request-state",
    "mrtr-retry-arguments-changed",
    "mrtr-url-undeclared",
    "mrtr-round-after-cancel",
    "mrtr-state-only-pacing",
    "mrtr-url-elicitation-error",
    "mrtr-task-input",
    "mrtr-retry-not-cached",
    "sep-2322-client-request-state",
);

/// The embedded scenarios, validated, control first.
pub fn scenarios() -> Result<Vec<Scenario>, ScenarioError> {
    let all = FILES
        .iter()
        .map(|(stem, text)| parse(stem, text))
        .collect::<Result<Vec<_>, _>>()?;
    check_set(&all)?;
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_the_folder() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/probe/scenarios");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("the scenario folder")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| {
                p.file_stem()
                    .expect("a stem")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
    }

    /// Every clause a scenario cites resolves inside this repository (a report's reader can
    /// follow it): a file under `docs/` or `tests/` that is there (a `:line` or `, flag` after
    /// the path is a pointer into it), and an `#anchor`, a heading of that file.
    #[test]
    fn every_clause_resolves_inside_the_repository() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut resolved = 0;
        for scenario in scenarios().expect("valid scenarios") {
            for clause in &scenario.clauses {
                let source = clause.source.as_str();
                assert!(
                    source.starts_with("docs/") || source.starts_with("tests/"),
                    "{}: {source} is outside the repository",
                    scenario.name
                );
                let (path, anchor) = source.split_once('#').unwrap_or((source, ""));
                let path = path.split([':', ',']).next().unwrap_or(path);
                let text = std::fs::read_to_string(root.join(path))
                    .unwrap_or_else(|e| panic!("{}: {source}: {e}", scenario.name));
                if !anchor.is_empty() {
                    assert!(
                        text.lines()
                            .any(|l| l.trim_start_matches('#').trim() == anchor
                                && l.starts_with('#')),
                        "{}: {source}: no heading `{anchor}`",
                        scenario.name
                    );
                }
                resolved += 1;
            }
        }
        assert!(resolved > 40, "{resolved} clauses");
    }

    #[test]
    fn every_embedded_scenario_is_valid() {
        let all = scenarios().expect("valid scenarios");
        assert_eq!(
            all.first().map(|s| s.name.as_str()),
            Some("mrtr-control-form-round")
        );
    }
}
