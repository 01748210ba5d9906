//! The host's screen escaping (`mrtr_gate_host::shown`) against the vectors every language's
//! escaping is held to (tests/screen/shown_text.json): exactly the listed code points are
//! escaped, the shared cases show as the vectors say, and hostile text never reaches the
//! screen raw and reads back exactly. Here rather than in the host crate, whose package holds
//! no test vectors.

use mrtr_gate_host::shown::{
    hidden_or_control, json_for_terminal, shown_json, shown_lines, shown_text,
};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("../screen/shown_text.json")).unwrap_or(Value::Null)
}

fn ranges() -> Vec<(u32, u32)> {
    vectors()["escaped"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let hex = |i: usize| {
                r.get(i)
                    .and_then(Value::as_str)
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
            };
            Some((hex(0)?, hex(1)?))
        })
        .collect()
}

#[test]
fn every_code_point_is_escaped_exactly_when_the_shared_vectors_say() {
    let ranges = ranges();
    assert!(ranges.len() > 20, "the vectors' ranges were read");
    for c in (0..=0x10FFFF).filter_map(char::from_u32) {
        let listed = ranges.iter().any(|&(a, b)| (a..=b).contains(&u32::from(c)));
        assert_eq!(hidden_or_control(c), listed, "U+{:04X}", u32::from(c));
        let shown = shown_text(&c.to_string());
        if listed {
            assert_eq!(shown, format!("\\u{{{:04x}}}", u32::from(c)));
        } else if c != '\\' {
            assert_eq!(shown, c.to_string());
        }
    }
}

#[test]
fn the_shared_cases_are_shown_as_the_vectors_say() {
    let v = vectors();
    let cases = v["cases"].as_array().cloned().unwrap_or_default();
    assert!(cases.len() > 10, "the vectors' cases were read");
    for case in cases {
        let text = case["text"].as_str().unwrap_or_default();
        assert_eq!(
            shown_text(text),
            case["shown"].as_str().unwrap_or_default(),
            "{}",
            case["name"]
        );
    }
}

/// Undo [`shown_text`] (what a person reading the screen can do): proves it exact.
fn unshown(shown: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = shown;
    while let Some(at) = rest.find('\\') {
        out.push_str(rest.get(..at)?);
        rest = rest.get(at..)?;
        if let Some(r) = rest.strip_prefix("\\\\") {
            out.push('\\');
            rest = r;
        } else {
            let r = rest.strip_prefix("\\u{")?;
            let end = r.find('}')?;
            out.push(char::from_u32(
                u32::from_str_radix(r.get(..end)?, 16).ok()?,
            )?);
            rest = r.get(end + 1..)?;
        }
    }
    out.push_str(rest);
    Some(out)
}

#[test]
fn hostile_text_never_reaches_the_screen_raw_and_reads_back_exactly() {
    // Strings drawn from the dangerous ranges, their neighbours, backslashes, braces
    // and ordinary text, by a fixed-seed generator (the same run every time).
    let alphabet: Vec<char> = ranges()
        .iter()
        .flat_map(|&(a, b)| [a, b, a.saturating_sub(1), b + 1, (a + b) / 2])
        .filter_map(char::from_u32)
        .chain("\\u{}ab 名😀\u{1b}[".chars())
        .collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % n.max(1)
    };
    for _ in 0..20_000 {
        let len = next(24);
        let text: String = (0..len)
            .filter_map(|_| alphabet.get(next(alphabet.len())).copied())
            .collect();
        let shown = shown_text(&text);
        assert!(
            !shown.chars().any(hidden_or_control),
            "{text:?} -> {shown:?}"
        );
        assert_eq!(unshown(&shown).as_deref(), Some(text.as_str()), "{text:?}");
        let lines = shown_lines(&text);
        assert!(!lines.chars().any(|c| c != '\n' && hidden_or_control(c)));
        let json = Value::String(text.clone());
        assert!(!shown_json(&json).chars().any(hidden_or_control));
        let for_terminal = json_for_terminal(&json);
        assert!(!for_terminal.chars().any(hidden_or_control));
        assert_eq!(
            serde_json::from_str::<Value>(&for_terminal).ok(),
            Some(json)
        );
    }
}
