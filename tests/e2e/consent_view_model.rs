//! `ConsentView` (the core's reader of the view a host shows) against docs/consent-view.md: the
//! documented view reads back byte for byte, the documented examples are views, and anything
//! the writer could not have made is refused. Here rather than in the core crate, whose
//! package holds no docs.

use mrtr_gate_host::core::{ConsentView, UrlWarning, ViewInput, canonical, digest};
use serde_json::{Value, json};

const DOC: &str = include_str!("../../docs/consent-view.md");

/// The text of the first fenced block after `marker` in docs/consent-view.md.
fn doc_block(marker: &str) -> &'static str {
    let at = DOC
        .find(marker)
        .unwrap_or_else(|| panic!("no `{marker}` in the doc"));
    let rest = &DOC[at..];
    let start = rest.find("```").unwrap();
    let body = &rest[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    &body[..body.find("```").unwrap()]
}

/// The doc's exact `view-json` parses, and writes back to the same bytes (whose digest
/// is the one the doc gives).
#[test]
fn the_documented_view_round_trips_byte_for_byte() {
    let text = doc_block("This is the exact `view-json`:").trim_end_matches('\n');
    let view = ConsentView::parse(text).unwrap();
    assert_eq!(view.to_canonical_json(), text);
    assert_eq!(
        digest::sha256_hex(text.as_bytes()),
        "2f88fba774dcc345562d003f364ff44915d11db97bd4d955e35f4aa2ef5a17fe"
    );
    assert_eq!(view.round, 1);
    assert!(
        matches!(&view.inputs[..], [ViewInput::Form { key, fields, .. }]
        if key == "passenger" && fields.len() == 3)
    );
}

/// The doc's re-indented examples are views (and a URL input) once written canonically.
#[test]
fn the_documented_examples_are_views() {
    let state_only: Value = serde_json::from_str(doc_block("Demo round 3 is state-only")).unwrap();
    let text = canonical::to_canonical(&state_only);
    let view = ConsentView::parse(&text).unwrap();
    assert!(view.inputs.is_empty());
    assert_eq!(view.state.bytes, Some(31));
    let url: ViewInput = serde_json::from_str(doc_block("This is its `inputs` entry")).unwrap();
    let ViewInput::Url { key, url, .. } = url else {
        panic!("not a url input")
    };
    assert_eq!(key, "pay");
    assert_eq!(
        url.full,
        "https://xn--pypal-4ve.com/authorize?session=SECRET-SESSION"
    );
    assert_eq!(
        url.warnings,
        [UrlWarning::Punycode, UrlWarning::MixedScript]
    );
}

fn documented() -> Value {
    serde_json::from_str(doc_block("This is the exact `view-json`:")).unwrap()
}

fn parses(v: &Value) -> bool {
    ConsentView::parse(&canonical::to_canonical(v)).is_ok()
}

/// Anything the writer could not have made is refused, never read in part.
#[test]
fn hostile_views_are_refused() {
    assert!(parses(&documented()));
    let mut cases: Vec<Value> = Vec::new();
    let mut with = |f: &dyn Fn(&mut Value)| {
        let mut v = documented();
        f(&mut v);
        cases.push(v);
    };
    with(&|v| v["extra"] = json!(1));
    with(&|v| v["request"]["extra"] = json!(1));
    with(&|v| v["inputs"][0]["extra"] = json!(1));
    with(&|v| v["inputs"][0]["fields"][0]["extra"] = json!(1));
    with(&|v| v["inputs"][0]["kind"] = json!("script"));
    with(&|v| v["state"]["extra"] = json!(1));
    with(&|v| v["state"]["present"] = json!(false));
    with(&|v| v["view"] = json!("mrtr-gate/consent-view/v1"));
    with(&|v| v["round"] = json!(-1));
    with(&|v| v["round"] = json!("1"));
    with(&|v| v["inputs"] = json!({}));
    with(&|v| {
        v.as_object_mut().unwrap().remove("effects");
    });
    with(&|v| {
        v["request"].as_object_mut().unwrap().remove("user_sha256");
    });
    with(&|v| {
        v["inputs"] = json!([{"key": "u", "kind": "url", "message": "m", "url": {
            "ascii_host": "a.example", "full": "https://a.example/", "has_query": false,
            "unicode_host": "a.example", "warnings": [], "extra": true}}]);
    });
    with(&|v| {
        v["inputs"] = json!([{"key": "u", "kind": "url", "message": "m", "url": {
            "ascii_host": "a.example", "full": "https://a.example/", "has_query": false,
            "unicode_host": "a.example", "warnings": ["looks_fine"]}}]);
    });
    for case in &cases {
        assert!(!parses(case), "accepted: {case}");
    }
    let text = canonical::to_canonical(&documented());
    // Not canonical: white space, members out of order, a repeated member, trailing text.
    for bad in [
        format!(" {text}"),
        text.replacen("{\"effects\"", "{ \"effects\"", 1),
        text.replacen("\"max_rounds\":10,", "", 1).replacen(
            "\"inputs\"",
            "\"max_rounds\":10,\"inputs\"",
            1,
        ),
        text.replacen("\"round\":1,", "\"round\":1,\"round\":1,", 1),
        format!("{text}x"),
        String::new(),
        "null".into(),
    ] {
        assert!(ConsentView::parse(&bad).is_err(), "accepted: {bad}");
    }
    assert!(ConsentView::parse(&text).is_ok());
}

#[test]
fn accepted_urls_are_the_url_inputs_the_answers_accept() {
    let mut v = documented();
    v["inputs"] = json!([
        {"key": "later", "kind": "url", "message": "m", "url": {"ascii_host": "x.example",
         "full": "https://x.example/", "has_query": false, "unicode_host": "x.example", "warnings": []}},
        {"key": "pay", "kind": "url", "message": "m", "url": {"ascii_host": "pay.example",
         "full": "https://pay.example/a", "has_query": false, "unicode_host": "pay.example", "warnings": []}}
    ]);
    let view = ConsentView::parse(&canonical::to_canonical(&v)).unwrap();
    let responses = json!({"pay": {"action": "accept"}, "later": {"action": "decline"}});
    assert_eq!(view.accepted_urls(&responses), ["https://pay.example/a"]);
    assert!(view.accepted_urls(&json!({})).is_empty());
    // The documented view's arguments hold no URL input, whatever they read like.
    assert!(
        ConsentView::parse(&canonical::to_canonical(&documented()))
            .unwrap()
            .accepted_urls(&json!({"passenger": {"action": "accept"}}))
            .is_empty()
    );
}
