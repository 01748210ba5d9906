//! `mrtr-gate policy check FILE`: a policy file read as a proxy or a call would read it
//! (mrtr-gate-policy: bounded, parsed, validated against the round schema), each problem on
//! stderr as `FILE:LINE:COLUMN: code: message`, the policies' ids on stdout.

use mrtr_gate_host::say;
use mrtr_gate_host::shown::shown_text;
use mrtr_gate_policy::Policies;
use std::path::Path;

/// The file is valid.
pub const EXIT_VALID: u8 = 0;
/// The file is refused (its problems on stderr).
pub const EXIT_REFUSED: u8 = 1;
/// The file cannot be read.
pub const EXIT_UNREADABLE: u8 = 2;

/// Read `path` whole, at most one byte past the policy limit (a larger file is refused as
/// such, never read to its end).
pub fn read(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(u64::try_from(mrtr_gate_policy::MAX_POLICY_BYTES + 1).unwrap_or(u64::MAX))
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text)
}

/// Every problem of `e` with the file `path`, one line each: `FILE:LINE:COLUMN: code: message`.
fn problems(path: &Path, e: &mrtr_gate_policy::PolicyError) -> String {
    let shown = shown_text(&path.display().to_string());
    e.problems()
        .iter()
        .map(|p| match (p.line, p.column) {
            (0, _) => format!("{shown}: {}: {}", e.code(), shown_text(&p.message)),
            (line, 0) => format!("{shown}:{line}: {}: {}", e.code(), shown_text(&p.message)),
            (line, column) => format!(
                "{shown}:{line}:{column}: {}: {}",
                e.code(),
                shown_text(&p.message)
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The policies in `path`, or what is wrong with it (every problem, a line each).
pub fn load(path: &Path) -> Result<Policies, String> {
    let text = read(path)?;
    Policies::parse(&text).map_err(|e| problems(path, &e))
}

/// `mrtr-gate policy check FILE`; the exit status.
pub fn check(path: &Path) -> u8 {
    let text = match read(path) {
        Ok(t) => t,
        Err(e) => {
            say!("mrtr-gate: {}", shown_text(&e));
            return EXIT_UNREADABLE;
        }
    };
    match Policies::parse(&text) {
        Ok(policies) => {
            crate::out!(
                "{}: {} policies, valid against the round schema: {}",
                shown_text(&path.display().to_string()),
                policies.ids().len(),
                policies.ids().join(", ")
            );
            EXIT_VALID
        }
        Err(e) => {
            say!("{}", problems(path, &e));
            EXIT_REFUSED
        }
    }
}
