//! Policy files where the command line meets them: `mrtr-gate policy check FILE` (a file read
//! as a proxy or a call reads it: bounded, parsed, validated against the round schema, each
//! problem on stderr as `FILE:LINE:COLUMN: code: message`, the policies' ids on stdout), the
//! decider `call --policy` and `proxy --policy` judge rounds with, and the rule a call's
//! client applies it by.

mod explain;

pub use explain::{ExplainOptions, Source, explain};

use mrtr_gate_client::{OpenRound, RoundRule, RuleRefusal};
use mrtr_gate_host::shown::shown_text;
use mrtr_gate_host::{Principal, say};
use mrtr_gate_policy::{Decider, Decision, Policies};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long past a round's lifetime an allow is kept: a retry still in flight when the round
/// expires finds it.
const ALLOW_GRACE: Duration = Duration::from_secs(60);

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

/// A decider over the policies in `path` for rounds that live `lifetime_ms`.
pub fn decider(path: &Path, lifetime_ms: u64) -> Result<Arc<Decider>, String> {
    let loaded = load(path)?;
    Ok(Arc::new(Decider::new(
        loaded,
        Duration::from_millis(lifetime_ms).saturating_add(ALLOW_GRACE),
    )))
}

/// Reload `path` into `decider` on every SIGHUP (`mrtr-gate proxy --policy`): a file that
/// validates replaces the policies for every round judged from then on; one that does not is
/// logged with its problems, and the policies loaded before go on judging.
pub fn reload_on_hangup(decider: &Arc<Decider>, path: &Path) -> Result<(), String> {
    use mrtr_gate_proxy::log;
    let decider = Arc::clone(decider);
    let path = path.to_path_buf();
    mrtr_gate_proxy::on_hangup(move || {
        let shown_path = shown_text(&path.display().to_string());
        match load(&path) {
            Ok(policies) => {
                let ids = shown_text(&policies.ids().join(", "));
                let n = policies.ids().len();
                decider.replace(policies);
                log::info(
                    "policies_reloaded",
                    &format!("SIGHUP: {n} policies judge every round from now on: {ids}"),
                    &[("path", &shown_path)],
                );
            }
            Err(problems) => log::error(
                "policies_not_reloaded",
                &format!(
                    "SIGHUP: the policy file is refused, the policies loaded before go on judging: {}",
                    problems.replace('\n', "; ")
                ),
                &[("path", &shown_path)],
            ),
        }
    })
}

/// The refusal a call's client gives for `decision`, if it refuses.
pub fn refusal(decision: &Decision) -> Option<RuleRefusal> {
    Some(RuleRefusal {
        code: decision.code()?,
        receipt_id: match decision {
            Decision::Deny { .. } => decision.receipt_id(),
            _ => None,
        },
        message: shown_text(&decision.refusal_message()?),
    })
}

/// The operator's policies as a call's rule over each round (`mrtr-gate call --policy`).
#[derive(Debug)]
pub struct PolicyRule(pub Arc<Decider>);

impl RoundRule for PolicyRule {
    fn judge(&self, user: &str, tenant: &str, round: &OpenRound) -> Result<(), RuleRefusal> {
        let bound = Principal {
            user: user.to_owned(),
            tenant: tenant.to_owned(),
        };
        let decision = self
            .0
            .judge_view(&bound, &round.view, &round.accepted.view_sha256);
        refusal(&decision).map_or(Ok(()), Err)
    }
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
