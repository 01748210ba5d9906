//! The full-parameter capture (`--capture FILE`), for operators whose policy requires the
//! arguments and answers of each call kept: off by default, warned about on every run, apart
//! from the digest chain (the trail never holds a value, and this file is no part of it), the
//! owner's alone (created 0600, never followed through a link), hidden from a stdio server,
//! and redacted: the value of every object member whose name is on the redaction list (any
//! case, at any depth) is replaced before the line is written.
//!
//! Each line is one JSON object: `time` (ms), `kind` (`request`: a call's params as the client
//! sent them; `retry`: a retry's params, answers included; `answer`: the upstream's answer the
//! gate judged), `server` (as a consent view names it), `method`, and `request_id`, the id the
//! proxy minted (the trail's `request_id`, so a line is found from an event and back), then
//! `params` or `answer`. A message that is no JSON is kept as `text`, redacted of nothing: the
//! list names members. `mrtr-gate policy explain` reads the rounds back from it.

use mrtr_gate_host::core::{RequestId, ServerIdentity};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a capture line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A call's params.
    Request,
    /// A retry's params (the user's answers among them).
    Retry,
    /// The upstream's answer to a gated request.
    Answer,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Retry => "retry",
            Self::Answer => "answer",
        }
    }
}

/// The capture file.
#[derive(Debug)]
pub struct Capture {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    redact: Vec<String>,
}

/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";

impl Capture {
    /// Open `path` for appending (created 0600; a link at the name is refused), redacting the
    /// members named in `redact`.
    pub fn open(path: &Path, redact: Vec<String>) -> Result<Self, String> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options
                .mode(0o600)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
        }
        let file = options
            .open(path)
            .map_err(|e| format!("--capture {}: {e}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            redact: redact.into_iter().map(|k| k.to_lowercase()).collect(),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Record `text` (a params object or an answer message) of `kind` for the binding minted
    /// as `id` with `server`. A write that fails is said once per failure, and the call goes
    /// on: the digest chain, not this file, is the record the gate stands on.
    pub fn record(
        &self,
        kind: Kind,
        server: &ServerIdentity,
        method: &str,
        id: &RequestId,
        text: &str,
    ) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let field = if kind == Kind::Answer {
            "answer"
        } else {
            "params"
        };
        let mut line = json!({
            "time": at_ms,
            "kind": kind.as_str(),
            "server": server.display(),
            "method": method,
            "request_id": id.to_json(),
        });
        if let Some(object) = line.as_object_mut() {
            match serde_json::from_str::<Value>(text) {
                Ok(mut value) => {
                    self.redacted(&mut value);
                    object.insert(field.into(), value);
                }
                Err(_) => {
                    object.insert("text".into(), text.into());
                }
            }
        }
        let mut out = line.to_string();
        out.push('\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = file.write_all(out.as_bytes()) {
            crate::log::error(
                "capture_failed",
                &format!("the capture {} was not written: {e}", self.path.display()),
                &[],
            );
        }
    }

    fn redacted(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, member) in map.iter_mut() {
                    if self.redact.contains(&key.to_lowercase()) {
                        *member = Value::String(REDACTED.into());
                    } else {
                        self.redacted(member);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redacted(v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_on_the_list_are_redacted_at_any_depth_in_any_case() {
        let dir = std::env::temp_dir().join(format!("mrtr-gate-capture-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("capture.jsonl");
        let capture = Capture::open(&path, vec!["Password".into(), "card".into()]).unwrap();
        let server = ServerIdentity::endpoint("stdio:python3").unwrap();
        capture.record(
            Kind::Retry,
            &server,
            "tools/call",
            &RequestId::Text("mg-1".into()),
            r#"{"name":"pay","arguments":{"password":"x","n":1},"inputResponses":{"k":{"content":{"CARD":"4111"}}},"list":[{"card":"y"}]}"#,
        );
        capture.record(
            Kind::Answer,
            &server,
            "tools/call",
            &RequestId::Number(2),
            "not json",
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["kind"], "retry");
        assert_eq!(lines[0]["server"], "endpoint:stdio:python3");
        assert_eq!(lines[0]["request_id"], "mg-1");
        assert_eq!(
            lines[0]["params"]["arguments"],
            json!({"password": REDACTED, "n": 1})
        );
        assert_eq!(
            lines[0]["params"]["inputResponses"]["k"]["content"]["CARD"],
            REDACTED
        );
        assert_eq!(lines[0]["params"]["list"][0]["card"], REDACTED);
        assert_eq!(lines[1]["text"], "not json");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            // A link planted at the name is never followed.
            let link = dir.join("link.jsonl");
            std::os::unix::fs::symlink(dir.join("elsewhere"), &link).unwrap();
            assert!(Capture::open(&link, Vec::new()).is_err());
            assert!(!dir.join("elsewhere").exists());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
