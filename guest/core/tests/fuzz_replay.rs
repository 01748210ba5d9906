//! Replays the committed fuzz corpus and every regression input through the fuzz target
//! bodies (fuzz/bodies) on stable, so a crash once found by `cargo fuzz` stays fixed.
#![cfg(test)]

use mrtr_gate_fuzz_bodies as bodies;

use std::path::{Path, PathBuf};

/// A target body: the bytes of one input.
type Body = fn(&[u8]);

const TARGETS: &[(&str, Body)] = &[
    ("response", bodies::run_response),
    ("answers", bodies::run_answers),
    ("schema", bodies::run_schema),
    ("url", bodies::run_url),
    ("register", bodies::run_register),
    ("trail", bodies::run_trail),
];

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = read
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn corpus_and_regressions_replay() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (name, body) in TARGETS {
        let mut seen = 0;
        for kind in ["corpus", "regressions"] {
            for file in inputs(&root.join(kind).join(name)) {
                let data = std::fs::read(&file).unwrap();
                let run = std::panic::catch_unwind(|| body(&data));
                assert!(run.is_ok(), "{name}: {} fails", file.display());
                seen += 1;
            }
        }
        assert!(seen > 0, "no corpus for fuzz target `{name}`");
    }
}
