//! What the proxy tells its operator, on stderr: each line an event with a level, a stable
//! name and a message, as text (`mrtr-gate proxy: …`, the default) or as JSON lines
//! (`--log-format json`) a collector takes as they are. No argument value, answer, state or
//! user name is ever in a line: the messages name codes, methods, addresses and files.
//!
//! One setting per process ([`init`]); before it, text at `info` under the name `mrtr-gate`,
//! and no `refused` events (a library's tests log nothing per refusal).

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;

/// How lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// `mrtr-gate proxy: message` (a warning's message after `WARNING: `).
    Text,
    /// One JSON object per line: `time`, `level`, `event`, `message`, and the event's fields.
    Json,
}

/// How much is written: each level includes those before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Level {
    /// What stops the proxy or a part of it.
    Error,
    /// What an operator should act on (an insecure flag, an upstream gone).
    Warn,
    /// What happened: started, listening, a refusal, a server's exit, stopped.
    Info,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
        }
    }
}

struct Settings {
    format: Format,
    level: Level,
    who: &'static str,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Set the format and level for the rest of the process, `who` naming it in text lines; the
/// first call wins.
pub fn init(format: Format, level: Level, who: &'static str) {
    let _ = SETTINGS.set(Settings { format, level, who });
}

/// Whether `level` is written (and, for `refused`, whether [`init`] was called).
pub fn enabled(level: Level) -> bool {
    SETTINGS
        .get()
        .map_or(level <= Level::Info, |s| level <= s.level)
}

/// An error event.
pub fn error(event: &str, message: &str, fields: &[(&str, &str)]) {
    emit(Level::Error, event, message, fields);
}

/// A warning event.
pub fn warn(event: &str, message: &str, fields: &[(&str, &str)]) {
    emit(Level::Warn, event, message, fields);
}

/// An informational event.
pub fn info(event: &str, message: &str, fields: &[(&str, &str)]) {
    emit(Level::Info, event, message, fields);
}

/// A refusal sent to a client (from [`crate::errors::Refusal::response`]): logged once the
/// process set its logging up.
pub fn refused(code: &str, cause: &str, rpc_code: i64) {
    if SETTINGS.get().is_none() || !enabled(Level::Info) {
        return;
    }
    let rpc = rpc_code.to_string();
    emit(
        Level::Info,
        "refused",
        &format!("refused a client's message or call: {code} ({cause})"),
        &[("code", code), ("cause", cause), ("rpc_code", &rpc)],
    );
}

/// Write one event, if its level is on. A stderr nobody reads loses the line, never the
/// process.
pub fn emit(level: Level, event: &str, message: &str, fields: &[(&str, &str)]) {
    if !enabled(level) {
        return;
    }
    let (format, who) = SETTINGS
        .get()
        .map_or((Format::Text, "mrtr-gate"), |s| (s.format, s.who));
    let line = match format {
        Format::Text => match level {
            Level::Warn => format!("{who}: WARNING: {message}"),
            Level::Error | Level::Info => format!("{who}: {message}"),
        },
        Format::Json => json_line(level, event, message, fields),
    };
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn json_line(level: Level, event: &str, message: &str, fields: &[(&str, &str)]) -> String {
    let mut object = serde_json::Map::new();
    object.insert("time".into(), now_rfc3339().into());
    object.insert("level".into(), level.as_str().into());
    object.insert("event".into(), event.into());
    object.insert("message".into(), message.into());
    for (key, value) in fields {
        object.insert((*key).into(), (*value).into());
    }
    serde_json::Value::Object(object).to_string()
}

/// Now, UTC, to the millisecond: `2026-12-07T05:37:35.123Z`.
fn now_rfc3339() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_millis())
}

fn rfc3339(millis: u128) -> String {
    let secs = u64::try_from(millis / 1000).unwrap_or(u64::MAX);
    let ms = millis % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rest = secs % 86_400;
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_796_622_255_007), "2026-12-07T05:44:15.007Z");
    }

    #[test]
    fn a_json_line_has_the_fields_and_escapes_what_it_carries() {
        let line = json_line(
            Level::Warn,
            "upstream_unreachable",
            "a \"quoted\"\nline",
            &[("upstream", "http://h/mcp")],
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["event"], "upstream_unreachable");
        assert_eq!(v["message"], "a \"quoted\"\nline");
        assert_eq!(v["upstream"], "http://h/mcp");
        assert!(!line.contains('\n'));
    }
}
