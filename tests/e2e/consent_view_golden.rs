//! The consent view is written key by key as text, not built and canonicalised: these golden
//! checks pin it to the exact text `docs/consent-view.md` shows (what a host displays and the
//! user's receipt names), so a change to the writer cannot change the view unnoticed.

use crate::support;

use mrtr_gate_host::core::{canonical, digest};

/// The documented example view of demo round 1 and its digest.
fn documented_example() -> (String, String) {
    let doc = include_str!("../../docs/consent-view.md");
    let after = doc
        .split("This is the exact `view-json`:")
        .nth(1)
        .expect("the example is in the doc");
    let view = after
        .lines()
        .find(|l| l.starts_with("{\"effects\""))
        .expect("the example view line")
        .to_owned();
    let digest = after
        .split("Its `view-sha256` is `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the documented digest")
        .to_owned();
    (view, digest)
}

#[test]
fn the_documented_example_view_is_canonical_and_hashes_to_its_digest() {
    let (view, digest) = documented_example();
    let parsed: serde_json::Value = serde_json::from_str(&view).unwrap();
    assert_eq!(canonical::to_canonical(&parsed), view);
    assert_eq!(digest::sha256_hex(view.as_bytes()), digest);
}

#[test]
fn the_demo_shows_exactly_the_documented_views() {
    let (_, digest) = documented_example();
    let audit = std::env::temp_dir().join(format!("mrtr-gate-golden-{}.jsonl", std::process::id()));
    let out = mrtr_gate_cli::demo::run(support::runtime(), &audit).unwrap();
    let _ = std::fs::remove_file(&audit);
    // The demo prints the first 16 hex digits of each view's digest.
    let shown = |prefix: &str| out.contains(&format!("view sha256 {prefix}…"));
    assert!(
        shown(&digest[..16]),
        "demo round 1 (form with state):\n{out}"
    );
    assert!(
        shown("ea5954e60f2be737"),
        "demo round 2 (url with a mixed-script host), as documented:\n{out}"
    );
}
