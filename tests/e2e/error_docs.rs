//! docs/errors.md documents exactly the gate's codes (`ALL_ERRORS`), each under its cause with
//! the count in the heading. Here rather than in the core crate, whose package holds no docs.

use mrtr_gate_host::core::{ALL_CODES, ALL_ERRORS, ErrorCause};
use std::collections::BTreeSet;

/// `docs/errors.md` documents every code under its cause, with the count in the heading,
/// and documents no code that does not exist.
#[test]
fn docs_errors_md_documents_exactly_the_codes() {
    let doc = include_str!("../../docs/errors.md");
    for cause in [ErrorCause::Peer, ErrorCause::Caller, ErrorCause::Host] {
        let heading = format!("### `{}` (", cause.as_str());
        let at = doc
            .find(&heading)
            .unwrap_or_else(|| panic!("no section `{heading}` in docs/errors.md"));
        let section = &doc[at..];
        let end = section[heading.len()..]
            .find("\n### ")
            .map_or(section.len(), |e| e + heading.len());
        let section = &section[..end];
        // The rows of the section's tables headed `| Code |` (other tables are not codes).
        let mut documented = BTreeSet::new();
        let mut in_codes = false;
        for line in section.lines() {
            if !line.starts_with('|') {
                in_codes = false;
            } else if line.starts_with("| Code |") {
                in_codes = true;
            } else if in_codes
                && let Some((code, _)) = line.strip_prefix("| `").and_then(|l| l.split_once("` |"))
            {
                documented.insert(code);
            }
        }
        let declared: BTreeSet<&str> = ALL_ERRORS
            .iter()
            .filter(|(_, c)| *c == cause)
            .map(|(code, _)| *code)
            .collect();
        assert_eq!(
            documented,
            declared,
            "docs/errors.md's `{}` table and error.rs disagree",
            cause.as_str()
        );
        let count = format!("### `{}` ({} codes", cause.as_str(), declared.len());
        assert!(
            section.starts_with(&count),
            "the heading should read `{count}`"
        );
    }
    let total = format!("`ALL_CODES` lists all {}.", ALL_CODES.len());
    assert!(doc.contains(&total), "docs/errors.md should say {total}");
}
