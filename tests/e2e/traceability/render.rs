//! docs/traceability.md from the data: a table per source, requirement to code to proof; a
//! table per threat framework; and each code with the requirements that trace it.

use super::check::anchor;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn s<'v>(v: &'v Value, key: &str) -> &'v str {
    v[key].as_str().unwrap_or("")
}

/// Text for a table cell: a `|` would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `path::name` as a link to its file, from docs/.
fn code_link(reference: &str) -> String {
    let path = reference.split("::").next().unwrap_or(reference);
    format!("[`{}`](../{path})", cell(reference))
}

fn joined(items: impl IntoIterator<Item = String>) -> String {
    items.into_iter().collect::<Vec<_>>().join("<br>")
}

fn status_line(r: &Value) -> String {
    match s(r, "status") {
        "host_duty" => format!(
            "**Host's duty** ([host-duties.md#{h}](host-duties.md#{h})): {}",
            cell(s(r, "reason")),
            h = s(r, "hosting")
        ),
        "not_applicable" => format!("**Not applicable**: {}", cell(s(r, "reason"))),
        _ => String::new(),
    }
}

fn requirement_row(out: &mut String, r: &Value) {
    let mut what = cell(s(r, "text"));
    let aliases = strings(&r["aliases"]);
    let aliases = if aliases.is_empty() {
        String::new()
    } else {
        let ids: Vec<String> = aliases.into_iter().map(|a| format!("`{a}`")).collect();
        format!("Also: {}", ids.join(", "))
    };
    for extra in [status_line(r), cell(s(r, "note")), aliases] {
        if !extra.is_empty() {
            what = format!("{what}<br>{extra}");
        }
    }
    if s(r, "status") == "traced" && !s(r, "hosting").is_empty() {
        what = format!(
            "{what}<br>Host: [host-duties.md#{h}](host-duties.md#{h})",
            h = s(r, "hosting")
        );
    }
    let codes = joined(strings(&r["codes"]).into_iter().map(|c| format!("`{c}`")));
    let enforced = joined(strings(&r["enforced_by"]).into_iter().map(code_link));
    let proofs = joined(
        strings(&r["tests"])
            .into_iter()
            .map(code_link)
            .chain(
                strings(&r["scenarios"])
                    .into_iter()
                    .map(|c| format!("scenario [`{c}`](../tests/corpus/{c}.json)")),
            )
            .chain(
                strings(&r["conformance"])
                    .into_iter()
                    .map(|c| format!("conformance `{c}`")),
            ),
    );
    let _ = writeln!(
        out,
        "| `{}`<br>{} | {what} | {codes} | {enforced} | {proofs} |",
        s(r, "id"),
        cell(s(r, "ref"))
    );
}

pub fn page(data: &Value) -> String {
    let requirements = data["requirements"].as_array().cloned().unwrap_or_default();
    let threats = data["threats"].as_array().cloned().unwrap_or_default();
    let count = |status: &str| {
        requirements
            .iter()
            .filter(|r| s(r, "status") == status)
            .count()
    };
    let mut by_code: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in &requirements {
        for c in strings(&r["codes"]) {
            by_code.entry(c).or_default().push(s(r, "id"));
        }
    }
    let scenarios: std::collections::BTreeSet<&str> = requirements
        .iter()
        .flat_map(|r| strings(&r["scenarios"]))
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "# Traceability\n\n\
         Generated from [requirements.json](requirements.json) by `tests/e2e/traceability/`: do not \
         edit. After a change to the data, `MRTR_GATE_BLESS=1 cargo test --test e2e traceability::` \
         rewrites this page; the test fails while it is stale, and whenever a requirement has no \
         enforcing code and no proof, a named function, test, scenario or code does not exist, a \
         documented code is traced nowhere, or a corpus scenario proves nothing.\n\n\
         {} requirements: {} traced, {} the host's duty ([host-duties.md](host-duties.md)), {} not \
         applicable. {} error codes, each traced by at least one requirement ([errors.md](errors.md)); \
         {} corpus scenarios, each proving at least one. {} threats in {} frameworks.\n",
        requirements.len(),
        count("traced"),
        count("host_duty"),
        count("not_applicable"),
        by_code.len(),
        scenarios.len(),
        threats.len(),
        {
            let mut f: Vec<&str> = threats.iter().map(|t| s(t, "framework")).collect();
            f.dedup();
            f.len()
        }
    );
    let mut sources: Vec<&str> = Vec::new();
    for r in &requirements {
        if !sources.contains(&s(r, "source")) {
            sources.push(s(r, "source"));
        }
    }
    let _ = writeln!(out, "\n## Requirements\n");
    for source in &sources {
        let _ = writeln!(out, "- [{source}](#{})", anchor(source));
    }
    for source in sources {
        let _ = write!(
            out,
            "\n### {source}\n\n{}| Requirement | What | Codes | Enforced by | Proved by |\n|---|---|---|---|---|\n",
            match data["sources"][source].as_str() {
                Some(about) => format!("{about}\n\n"),
                None => String::new(),
            }
        );
        for r in requirements.iter().filter(|r| s(r, "source") == source) {
            requirement_row(&mut out, r);
        }
    }
    let _ = writeln!(out, "\n## Threats");
    let mut frameworks: Vec<&str> = Vec::new();
    for t in &threats {
        if !frameworks.contains(&s(t, "framework")) {
            frameworks.push(s(t, "framework"));
        }
    }
    for framework in frameworks {
        let _ = write!(
            out,
            "\n### {framework}\n\n| Id | Threat | Mitigated by |\n|---|---|---|\n"
        );
        for t in threats.iter().filter(|t| s(t, "framework") == framework) {
            let name = match s(t, "note") {
                "" => cell(s(t, "name")),
                note => format!("{} ({})", cell(s(t, "name")), cell(note)),
            };
            let by = strings(&t["mitigated_by"])
                .into_iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(out, "| {} | {name} | {by} |", cell(s(t, "id")));
        }
    }
    let _ = write!(out, "\n## Codes\n\n| Code | Traced by |\n|---|---|\n");
    for (code, ids) in by_code {
        let ids = ids
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "| `{code}` | {ids} |");
    }
    out
}
