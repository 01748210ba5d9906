//! The keyless trail check, pinned as vectors every port runs (tests/audit/trail_vectors.json):
//! trails good and hostile, each with what the core's `verify_trail` finds. The Python and
//! Node packages read the same file (`test_trail.py`, `audit-shards.test.js`) and must find the
//! same, break for break: a trail that verifies in one host and is broken in another is a
//! trail an attacker picks the verifier for. The hostile lines are the ones a JSON parser
//! other than serde_json reads differently (a `seq` spelled `1.0`, `1e0` or `-0`, integers past
//! 2^53 and past u64, a number out of range, lone surrogates, nesting past serde_json's limit).
//! Each one-line trail also records whether a durable sink takes the line on the shard `aa`
//! (`shard_ok`), which parses it the same way.
//! A change re-records the file with
//! `MRTR_GATE_BLESS=1 cargo test --workspace --locked --test e2e trail_vectors::`.

use mrtr_gate_host::core::audit::{ChainBreak, shard_ok, verify_trail};
use mrtr_gate_host::core::digest::sha256_hex;
use mrtr_gate_host::core::host::AuditEntry;
use serde_json::{Value, json};
use std::path::PathBuf;

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/audit/trail_vectors.json")
}

/// A trail being written: each shard's last line's digest and `seq`.
#[derive(Default)]
struct Trail {
    lines: Vec<String>,
    heads: std::collections::BTreeMap<String, (u64, String)>,
}

impl Trail {
    /// Appends a line of `shard` (`None`: a line from before shards) with `fields`.
    fn push(&mut self, shard: Option<&str>, fields: Value) -> &mut Self {
        let name = shard.unwrap_or("").to_owned();
        let (seq, prev) = self
            .heads
            .get(&name)
            .map_or((1, GENESIS.to_owned()), |(s, d)| (s + 1, d.clone()));
        // Keys in byte order, as the core writes a line, whatever order serde_json keeps
        // (`preserve_order`, which a dependency may turn on for the whole build).
        let mut line = std::collections::BTreeMap::from([
            ("prev_sha256".to_owned(), json!(prev)),
            ("seq".to_owned(), json!(seq)),
        ]);
        if let Some(s) = shard {
            line.insert("shard".into(), json!(s));
        }
        for (k, v) in fields.as_object().unwrap() {
            line.insert(k.clone(), v.clone());
        }
        let text = serde_json::to_string(&line).unwrap();
        self.heads.insert(name, (seq, sha256_hex(text.as_bytes())));
        self.lines.push(text);
        self
    }

    /// A root line anchoring the current heads of `shards`.
    fn root(&mut self, shards: &[&str]) -> &mut Self {
        let heads: std::collections::BTreeMap<String, Value> = shards
            .iter()
            .map(|s| {
                let (seq, sha) = &self.heads[*s];
                ((*s).to_owned(), json!({"seq": seq, "sha256": sha}))
            })
            .collect();
        self.push(Some("root"), json!({"event": "anchor", "heads": heads}))
    }
}

fn two_shards() -> Trail {
    let mut t = Trail::default();
    t.push(Some("aa"), json!({"event": "received"}))
        .push(Some("bb"), json!({"event": "received"}))
        .push(Some("aa"), json!({"event": "terminal"}))
        .root(&["aa", "bb"])
        .push(Some("bb"), json!({"event": "terminal"}));
    t
}

/// One line at the start of a shard, spelled by hand: `{prev}` is the genesis digest.
fn first(text: &str) -> Vec<String> {
    vec![text.replace("{prev}", GENESIS)]
}

fn nested(depth: usize) -> String {
    format!(
        "{{\"prev_sha256\":\"{{prev}}\",\"seq\":1,\"shard\":\"aa\",\"x\":{}1{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

fn trails() -> Vec<(&'static str, Vec<String>)> {
    let good = two_shards();
    let mut cut = two_shards();
    cut.lines.remove(2);
    // The line the root anchored (aa's second) replaced by another that chains as well.
    let mut rewritten = two_shards();
    let mut alt = Trail::default();
    alt.push(Some("aa"), json!({"event": "received"}))
        .push(Some("aa"), json!({"event": "rewritten"}));
    rewritten.lines[2] = alt.lines[1].clone();
    let mut reordered = two_shards();
    reordered.lines.swap(0, 2);
    // A second root anchoring aa's first line, after one anchored its second.
    let mut back = two_shards();
    let aa1 = sha256_hex(back.lines[0].as_bytes());
    back.heads.insert("aa".into(), (1, aa1));
    back.root(&["aa"]);
    let mut legacy = Trail::default();
    legacy
        .push(None, json!({"event": "received"}))
        .push(None, json!({"event": "terminal"}))
        .push(Some("aa"), json!({"event": "received"}));

    let mut out: Vec<(&'static str, Vec<String>)> = vec![
        ("two_shards_and_a_root", good.lines),
        ("a_shard_cut_below_its_anchor", cut.lines),
        ("a_shard_rewritten_below_its_anchor", rewritten.lines),
        ("a_shard_reordered", reordered.lines),
        ("a_root_going_back", back.lines),
        ("lines_before_shards_then_a_shard", legacy.lines),
        ("empty", Vec::new()),
    ];
    for (name, line) in [
        ("not_json", "not json".to_owned()),
        ("an_array", "[1]".to_owned()),
        ("trailing_text", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\"} x".into()),
        ("trailing_spaces", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\"}  ".into()),
        ("a_byte_order_mark", "\u{feff}{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\"}".into()),
        ("a_raw_tab_in_a_string", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"x\":\"a\tb\"}".into()),
        ("seq_1_0", "{\"prev_sha256\":\"{prev}\",\"seq\":1.0,\"shard\":\"aa\"}".into()),
        ("seq_1e0", "{\"prev_sha256\":\"{prev}\",\"seq\":1e0,\"shard\":\"aa\"}".into()),
        ("seq_minus_zero", "{\"prev_sha256\":\"{prev}\",\"seq\":-0,\"shard\":\"aa\"}".into()),
        ("seq_a_string", "{\"prev_sha256\":\"{prev}\",\"seq\":\"1\",\"shard\":\"aa\"}".into()),
        ("seq_true", "{\"prev_sha256\":\"{prev}\",\"seq\":true,\"shard\":\"aa\"}".into()),
        ("seq_past_2_53", "{\"prev_sha256\":\"{prev}\",\"seq\":9007199254740993,\"shard\":\"aa\"}".into()),
        ("seq_u64_max", "{\"prev_sha256\":\"{prev}\",\"seq\":18446744073709551615,\"shard\":\"aa\"}".into()),
        ("seq_past_u64", "{\"prev_sha256\":\"{prev}\",\"seq\":18446744073709551616,\"shard\":\"aa\"}".into()),
        ("seq_twice_the_last_counts", "{\"prev_sha256\":\"{prev}\",\"seq\":7,\"seq\":1,\"shard\":\"aa\"}".into()),
        ("shard_empty", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"\"}".into()),
        ("shard_null", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":null}".into()),
        ("shard_a_number", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":7}".into()),
        ("shard_escaped", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"\\u0061a\"}".into()),
        ("prev_not_the_genesis", format!("{{\"prev_sha256\":\"{}\",\"seq\":1,\"shard\":\"aa\"}}", "1".repeat(64))),
        ("prev_null", "{\"prev_sha256\":null,\"seq\":1,\"shard\":\"aa\"}".into()),
        ("nan", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"x\":NaN}".into()),
        ("a_number_out_of_range", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"x\":1e400}".into()),
        ("a_large_finite_number", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"x\":-1.5e300}".into()),
        ("a_lone_surrogate_in_a_value", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"x\":\"\\ud800\"}".into()),
        ("a_lone_low_surrogate_in_a_key", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"\\udc00\":1}".into()),
        ("a_surrogate_pair", "{\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"aa\",\"x\":\"\\ud83d\\ude00\"}".into()),
        ("an_integer_of_5000_digits", format!("{{\"prev_sha256\":\"{{prev}}\",\"seq\":1,\"shard\":\"aa\",\"x\":1{}}}", "0".repeat(5000))),
        ("a_seq_of_5000_digits", format!("{{\"prev_sha256\":\"{{prev}}\",\"seq\":1{},\"shard\":\"aa\"}}", "0".repeat(5000))),
        ("nested_2000_deep", nested(2000)),
        ("nested_126_deep", nested(126)),
        ("nested_127_deep", nested(127)),
        ("nested_128_deep", nested(128)),
        ("root_heads_an_array", "{\"heads\":[],\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"root\"}".into()),
        ("root_head_without_digest", "{\"heads\":{\"aa\":{\"seq\":1}},\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"root\"}".into()),
        ("root_head_seq_1_0", "{\"heads\":{\"aa\":{\"seq\":1.0,\"sha256\":\"x\"}},\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"root\"}".into()),
        ("root_head_seq_u64_max", "{\"heads\":{\"aa\":{\"seq\":18446744073709551615,\"sha256\":\"x\"}},\"prev_sha256\":\"{prev}\",\"seq\":1,\"shard\":\"root\"}".into()),
    ] {
        out.push((name, first(&line)));
    }
    out
}

/// What the core finds in `lines`, as the vector file records it.
fn verdict(lines: &[String]) -> Value {
    match verify_trail(lines.iter().map(String::as_str)) {
        Ok(v) => json!({
            "lines": v.lines,
            "heads": v.heads.iter().map(|(s, h)| (s.clone(), json!({"seq": h.seq.to_string(), "sha256": h.event_sha256}))).collect::<serde_json::Map<_, _>>(),
        }),
        Err(b) => {
            let (kind, at) = match b {
                ChainBreak::Malformed(i) => ("malformed", i),
                ChainBreak::Gap(i) => ("gap", i),
                ChainBreak::Broken(i) => ("broken", i),
                ChainBreak::Cut(i) => ("cut", i),
                ChainBreak::Rewritten(i) => ("rewritten", i),
                other => panic!("a break the vectors cannot name: {other:?}"),
            };
            json!({"break": kind, "at": at})
        }
    }
}

/// Whether a durable sink takes `line` as the first line of shard `aa` (`shard_ok`).
fn taken_as_aa(line: &str) -> bool {
    shard_ok(&AuditEntry {
        shard: "aa".into(),
        seq: 1,
        prev_sha256: GENESIS.into(),
        event_sha256: sha256_hex(line.as_bytes()),
        line: line.into(),
    })
}

fn generate() -> Value {
    Value::Array(
        trails()
            .into_iter()
            .map(|(name, lines)| {
                let mut v = json!({"name": name, "lines": lines, "expect": verdict(&lines)});
                // One line: also whether a sink takes it on the shard `aa`.
                if let [line] = &lines[..] {
                    v["shard_ok_as_aa"] = json!(taken_as_aa(line));
                }
                v
            })
            .collect(),
    )
}

#[test]
fn the_recorded_trails_are_what_the_core_finds() {
    let made = generate();
    crate::support::assert_recorded(&vectors_path(), &made, "the trail check");
}

#[test]
fn the_vectors_hold_every_kind_of_break_and_trails_that_verify() {
    let made = generate();
    let kinds: std::collections::BTreeSet<String> = made
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["expect"]["break"].as_str().unwrap_or("ok").to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["broken", "cut", "gap", "malformed", "ok", "rewritten"]
            .map(str::to_owned)
            .into()
    );
}
