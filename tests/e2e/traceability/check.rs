//! What makes the trace true: each requirement is traced (code and proof), the host's duty (an
//! anchor in docs/host-duties.md) or not applicable (a reason); every function, test, scenario,
//! conformance scenario, code and alias it names exists; every documented code and every corpus
//! scenario is traced by some requirement; every threat names requirements that exist.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const STATUSES: [&str; 3] = ["traced", "host_duty", "not_applicable"];

/// What the check reads from the repository once.
pub struct Repo<'a> {
    root: &'a Path,
    /// The codes docs/errors.md documents (the gate's, the harness's, the packages', the client's).
    documented_codes: BTreeSet<String>,
    scenarios: BTreeSet<String>,
    /// The client scenarios `scripts/conformance` runs.
    conformance: BTreeSet<String>,
    /// The anchors of docs/host-duties.md's headings.
    hosting_anchors: BTreeSet<String>,
}

impl<'a> Repo<'a> {
    pub fn read(root: &'a Path) -> Self {
        let text = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        let scenarios = std::fs::read_dir(root.join("tests/corpus"))
            .unwrap()
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_suffix(".json").map(str::to_owned)
            })
            .collect();
        let conformance = text("scripts/conformance")
            .lines()
            .find_map(|l| l.trim().strip_prefix("scenarios=("))
            .map(|l| {
                l.trim_end_matches(')')
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Repo {
            root,
            documented_codes: documented_codes(&text("docs/errors.md")),
            scenarios,
            conformance,
            hosting_anchors: text("docs/host-duties.md")
                .lines()
                .filter_map(|l| l.strip_prefix("## "))
                .map(anchor)
                .collect(),
        }
    }
}

/// GitHub's anchor for a heading: lowercase, spaces to hyphens, other punctuation dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The first-column codes of the tables headed `| Code |` in docs/errors.md.
fn documented_codes(doc: &str) -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    let mut in_table = false;
    for line in doc.lines() {
        if !line.starts_with('|') {
            in_table = false;
        } else if line.starts_with("| Code |") {
            in_table = true;
        } else if in_table {
            let cell = line.split('|').nth(1).unwrap_or("").trim();
            if let Some(code) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                codes.insert(code.to_owned());
            }
        }
    }
    codes
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn text_of<'v>(r: &'v Value, key: &str) -> &'v str {
    r[key].as_str().unwrap_or("")
}

pub fn problems(data: &Value, repo: &Repo<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let Some(requirements) = data["requirements"].as_array() else {
        return vec!["requirements.json has no `requirements` array".into()];
    };
    let mut ids = BTreeSet::new();
    let mut traced_codes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut proving: BTreeSet<&str> = BTreeSet::new();
    for r in requirements {
        let id = text_of(r, "id");
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
        {
            out.push(format!("a requirement has no usable id: {r}"));
        }
        if !ids.insert(id) {
            out.push(format!("{id}: the id is used twice"));
        }
        if data["sources"][text_of(r, "source")].as_str().is_none() {
            out.push(format!("{id}: its source is not described under `sources`"));
        }
        for key in ["source", "ref", "text"] {
            if text_of(r, key).is_empty() {
                out.push(format!("{id}: no `{key}`"));
            }
        }
        out.extend(requirement_problems(id, r, repo));
        for code in strings(&r["codes"]) {
            *traced_codes.entry(code).or_default() += 1;
        }
        proving.extend(strings(&r["scenarios"]));
    }
    // An alias is the id the same words carry elsewhere in the data (another source, an
    // older numbering): it must name another requirement that exists.
    for r in requirements {
        let id = text_of(r, "id");
        for alias in strings(&r["aliases"]) {
            if alias == id || !ids.contains(alias) {
                out.push(format!(
                    "{id}: the alias `{alias}` names no other requirement"
                ));
            }
        }
    }
    for code in &repo.documented_codes {
        if !traced_codes.contains_key(code.as_str()) {
            out.push(format!("code `{code}` is traced by no requirement"));
        }
    }
    for code in mrtr_gate_host::core::ALL_CODES {
        if !repo.documented_codes.contains(*code) {
            out.push(format!(
                "code `{code}` (ALL_CODES) is not in docs/errors.md"
            ));
        }
    }
    for scenario in &repo.scenarios {
        if !proving.contains(scenario.as_str()) {
            out.push(format!("scenario `{scenario}` proves no requirement"));
        }
    }
    for t in data["threats"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let tid = text_of(t, "id");
        let by = strings(&t["mitigated_by"]);
        if by.is_empty() {
            out.push(format!("threat {tid}: mitigated by no requirement"));
        }
        for m in by {
            if !ids.contains(m) {
                out.push(format!("threat {tid}: unknown requirement `{m}`"));
            }
        }
    }
    out
}

fn requirement_problems(id: &str, r: &Value, repo: &Repo<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let status = text_of(r, "status");
    let (codes, code, tests) = (
        strings(&r["codes"]),
        strings(&r["enforced_by"]),
        strings(&r["tests"]),
    );
    let (scenarios, conformance) = (strings(&r["scenarios"]), strings(&r["conformance"]));
    let proofs = tests.len() + scenarios.len() + conformance.len();
    match status {
        "traced" => {
            if code.is_empty() {
                out.push(format!("{id}: traced, but no enforcing function"));
            }
            if proofs == 0 {
                out.push(format!(
                    "{id}: traced, but no test, scenario or conformance check"
                ));
            }
        }
        "host_duty" if text_of(r, "hosting").is_empty() || text_of(r, "reason").is_empty() => {
            out.push(format!(
                "{id}: the host's duty needs `hosting` and `reason`"
            ));
        }
        "not_applicable" if text_of(r, "reason").is_empty() || !codes.is_empty() => {
            out.push(format!(
                "{id}: not applicable needs a reason and enforces no code"
            ));
        }
        s if !STATUSES.contains(&s) => out.push(format!("{id}: unknown status `{s}`")),
        _ => {}
    }
    let hosting = text_of(r, "hosting");
    if !hosting.is_empty() && !repo.hosting_anchors.contains(hosting) {
        out.push(format!(
            "{id}: docs/host-duties.md has no section `#{hosting}`"
        ));
    }
    for c in codes {
        if !repo.documented_codes.contains(c) {
            out.push(format!("{id}: unknown code `{c}` (not in docs/errors.md)"));
        }
    }
    for f in code {
        if let Err(why) = find(repo.root, f, Kind::Function) {
            out.push(format!("{id}: enforcing function {f}: {why}"));
        }
    }
    for t in tests {
        if let Err(why) = find(repo.root, t, Kind::Test) {
            out.push(format!("{id}: test {t}: {why}"));
        }
    }
    for s in scenarios {
        if !repo.scenarios.contains(s) {
            out.push(format!("{id}: no corpus scenario `{s}`"));
        }
    }
    for s in conformance {
        if !repo.conformance.contains(s) {
            out.push(format!("{id}: scripts/conformance runs no scenario `{s}`"));
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Function,
    Test,
}

/// Whether `path::name` is a function (or, for `Kind::Test`, a test) in that file: Rust
/// `fn name` (a test has `#[test]` among the attributes above it), Python `def name` (a test
/// is named `test_…`), JavaScript `function name`/`class name`/a method (a test is a
/// `test("name", …)` or `it("name", …)` title).
fn find(root: &Path, reference: &str, kind: Kind) -> Result<(), String> {
    let (path, name) = reference
        .split_once("::")
        .ok_or("not path::name".to_owned())?;
    let src = std::fs::read_to_string(root.join(path)).map_err(|_| "no such file".to_owned())?;
    let lines: Vec<&str> = src.lines().collect();
    let ext = path.rsplit('.').next().unwrap_or("");
    let found = match ext {
        "rs" => lines.iter().enumerate().any(|(i, l)| {
            declares(l, "fn ", name) && (kind == Kind::Function || has_test_attribute(&lines[..i]))
        }),
        "py" => {
            lines.iter().any(|l| declares(l, "def ", name))
                && (kind == Kind::Function || name.starts_with("test_"))
        }
        "js" | "mjs" | "ts" => match kind {
            Kind::Test => ["test(", "it("].iter().any(|call| {
                ['"', '\'', '`']
                    .iter()
                    .any(|q| src.contains(&format!("{call}{q}{name}{q}")))
            }),
            Kind::Function => lines.iter().any(|l| {
                declares(l, "function ", name)
                    || declares(l, "class ", name)
                    || l.trim_start()
                        .trim_start_matches("async ")
                        .starts_with(&format!("{name}("))
            }),
        },
        _ => false,
    };
    if found {
        Ok(())
    } else if kind == Kind::Test {
        Err("no such test".into())
    } else {
        Err("no such function".into())
    }
}

/// Whether `line` declares `name` after `keyword` (`fn `, `def `, …), as a whole word.
fn declares(line: &str, keyword: &str, name: &str) -> bool {
    let needle = format!("{keyword}{name}");
    line.match_indices(&needle).any(|(at, _)| {
        let before_ok = at == 0 || !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let after = line[at + needle.len()..].chars().next();
        before_ok && matches!(after, Some('(' | '<' | ':' | ' ') | None)
    })
}

/// Whether the attribute and comment lines just above a function (the end of `above`) hold a
/// test attribute.
fn has_test_attribute(above: &[&str]) -> bool {
    above
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| {
            l.is_empty() || l.starts_with("#[") || l.starts_with("//") || l.ends_with(")]")
        })
        .take(40)
        .any(|l| l.starts_with("#[test]") || l.starts_with("#[tokio::test"))
}
