//! The report: one line per check (scenario, check id, status, description), what the client
//! did under each FAILURE with the safe behaviour, then a summary line; or, with `--json`, one
//! object whose checks have the conformance suite's shape. The exit code follows the verdicts.

use crate::judge::{Status, Verdict};
use crate::record::Recording;
use crate::scenario::Scenario;
use serde_json::{Value, json};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

/// Exit: every check passed or was skipped.
pub const EXIT_OK: u8 = 0;
/// Exit: a check failed (a hang is a failure).
pub const EXIT_FAILURE: u8 = 1;
/// Exit: the flags, a scenario name or a scenario file is wrong; nothing ran.
pub const EXIT_USAGE: u8 = 2;
/// Exit: the probe itself could not run (a listener, the client's shell).
pub const EXIT_CANNOT_RUN: u8 = 4;

/// One scenario's run.
pub struct ScenarioRun {
    /// The scenario.
    pub scenario: Arc<Scenario>,
    /// What was recorded.
    pub recording: Recording,
    /// The verdicts, one per check.
    pub verdicts: Vec<Verdict>,
    /// When the verdicts were taken.
    pub judged_at: SystemTime,
}

/// A whole probe run.
pub struct Report {
    /// The client's command line.
    pub command: String,
    /// `http` or `stdio`.
    pub transport: &'static str,
    /// The runs, in scenario order.
    pub runs: Vec<ScenarioRun>,
}

/// Counts of statuses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// SUCCESS.
    pub passed: usize,
    /// FAILURE.
    pub failed: usize,
    /// SKIPPED.
    pub skipped: usize,
}

impl Report {
    /// The counts over every check.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for v in self.runs.iter().flat_map(|r| &r.verdicts) {
            match v.status {
                Status::Success => s.passed += 1,
                Status::Failure => s.failed += 1,
                Status::Skipped => s.skipped += 1,
            }
        }
        s
    }

    /// 0 without a FAILURE, else 1.
    pub fn exit_code(&self) -> u8 {
        if self.summary().failed == 0 {
            EXIT_OK
        } else {
            EXIT_FAILURE
        }
    }

    /// The human report.
    pub fn human(&self) -> String {
        let width_scenario = self
            .runs
            .iter()
            .map(|r| r.scenario.name.len())
            .max()
            .unwrap_or(0);
        let width_id = self
            .runs
            .iter()
            .flat_map(|r| &r.verdicts)
            .map(|v| v.id.len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        let mut control_failed = false;
        for run in &self.runs {
            for v in &run.verdicts {
                out.push_str(&format!(
                    "{:<width_scenario$}  {:<width_id$}  {}  {}\n",
                    run.scenario.name,
                    v.id,
                    v.status.word(),
                    v.description
                ));
                match (v.status, &v.message) {
                    (Status::Failure, Some(message)) => {
                        out.push_str(&format!(
                            "    {message}\n    a safe client {}\n",
                            run.scenario.safe
                        ));
                        control_failed |= v.id.starts_with("mrtr-control");
                    }
                    (_, Some(message)) => out.push_str(&format!("    {message}\n")),
                    (_, None) => {}
                }
            }
        }
        if control_failed {
            out.push_str(
                "probe: the client did not complete a well-formed round; its SUCCESSes may only mean it refuses everything\n",
            );
        }
        let s = self.summary();
        out.push_str(&format!(
            "probe: {} passed, {} failed, {} skipped ({} scenarios, transport {}, command: {})\n",
            s.passed,
            s.failed,
            s.skipped,
            self.runs.len(),
            self.transport,
            self.command
        ));
        out
    }

    /// The `--json` report.
    pub fn json(&self) -> Value {
        let s = self.summary();
        let scenarios: Vec<Value> = self
            .runs
            .iter()
            .map(|run| {
                let references: Vec<Value> = run
                    .scenario
                    .clauses
                    .iter()
                    .map(|c| json!({"id": c.id, "source": c.source, "text": c.text}))
                    .collect();
                let checks: Vec<Value> = run
                    .verdicts
                    .iter()
                    .map(|v| {
                        json!({
                            "id": v.id, "name": v.id, "description": v.description,
                            "status": v.status.word(), "timestamp": rfc3339(run.judged_at),
                            "errorMessage": v.message, "specReferences": references,
                            "details": v.details,
                        })
                    })
                    .collect();
                json!({
                    "name": run.scenario.name,
                    "client_exit": run.recording.exit_code,
                    "timed_out": run.recording.timed_out,
                    "lingering": run.recording.lingering,
                    "duration_ms": u64::try_from(run.recording.duration_ms).unwrap_or(u64::MAX),
                    "unsupported": run.recording.unsupported,
                    "safe": run.scenario.safe,
                    "checks": checks,
                })
            })
            .collect();
        json!({
            "probe": format!("mrtr-gate {}", env!("CARGO_PKG_VERSION")),
            "command": self.command,
            "transport": self.transport,
            "scenarios": scenarios,
            "summary": {"passed": s.passed, "failed": s.failed, "skipped": s.skipped},
        })
    }
}

impl Report {
    /// Writes `dir/<scenario>/{checks.json,stdout.txt,stderr.txt,record.jsonl}` for every run
    /// (the suite's `-o` layout, plus the recording: one JSON line per request, canary
    /// connection and opener call) and `dir/report.json`.
    pub fn write_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let json = self.json();
        std::fs::write(dir.join("report.json"), format!("{json:#}\n"))?;
        let empty = Vec::new();
        let scenarios = json
            .get("scenarios")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        for (run, scenario) in self.runs.iter().zip(scenarios) {
            let out = dir.join(&run.scenario.name);
            std::fs::create_dir_all(&out)?;
            std::fs::write(
                out.join("checks.json"),
                format!("{:#}\n", scenario.get("checks").unwrap_or(&Value::Null)),
            )?;
            std::fs::write(out.join("stdout.txt"), &run.recording.stdout)?;
            std::fs::write(out.join("stderr.txt"), &run.recording.stderr)?;
            std::fs::write(out.join("record.jsonl"), record_lines(&run.recording))?;
        }
        Ok(())
    }
}

/// The recording as JSON lines, times in milliseconds from the first request.
fn record_lines(recording: &Recording) -> String {
    let start = recording.requests.first().map(|r| r.at);
    let mut out = String::new();
    for r in &recording.requests {
        let t_ms = start.map_or(0, |s| r.at.duration_since(s).as_millis());
        let line = json!({
            "kind": "request", "seq": r.seq, "t_ms": u64::try_from(t_ms).unwrap_or(u64::MAX),
            "http_method": r.http_method, "path": r.path, "method": r.method, "tool": r.tool,
            "leg": r.leg, "id": r.id, "body": r.body,
        });
        out.push_str(&format!("{line}\n"));
    }
    for hit in &recording.canary {
        out.push_str(&format!(
            "{}\n",
            json!({"kind": "canary", "first_line": hit.first_line})
        ));
    }
    for opened in &recording.opened {
        out.push_str(&format!("{}\n", json!({"kind": "opened", "argv": opened})));
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC), the suite's timestamp form.
fn rfc3339(at: SystemTime) -> String {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or_default();
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_484_158_123);
        assert_eq!(rfc3339(at), "2026-12-05T15:22:38.123Z");
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }
}
