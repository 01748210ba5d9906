//! Reading a JSON-lines trail (with its links and anchor) that a proxy may be writing at that
//! very moment: `verify-audit` and `reconcile` see one consistent state of it, never a line
//! half written or an anchor one step behind the lines it covers.
//!
//! A writer holds the trail's lock for its life ([`mrtr_gate_host::reference_hosts::FileAudit`])
//! and appends in one order: the line's link, the line, then the anchor. A reader that finds
//! the lock held reads the anchor, the trail, the links and the anchor again, and takes the
//! read only when both anchors agree, the trail ends with a whole line and the anchor covers
//! exactly its lines, shard by shard (one anchor line per shard); else it reads again a moment
//! later. Without a writer what is on disk is
//! the trail, read once and judged as it is.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One consistent read of a trail and, when asked for, its links and anchor (missing files
/// read as empty).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TrailRead {
    /// The trail's text.
    pub trail: String,
    /// The links' text (empty when not asked for, or missing).
    pub links: String,
    /// The anchor's text (empty when not asked for, or missing).
    pub anchor: String,
}

/// How many times a trail being written is read before giving up. The writer's appends take
/// microseconds to a few milliseconds each (an fsync), so a read lands between two of them
/// within a few tries; a writer that never pauses that long makes the command fail, not lie.
const ATTEMPTS: u32 = 400;

/// Read `trail` (and `links` and `anchor`, when given) as one consistent state.
pub fn read_trail(
    trail: &Path,
    links: Option<&Path>,
    anchor: Option<&Path>,
) -> Result<TrailRead, String> {
    let read_opt = |p: Option<&Path>| p.map(|p| std::fs::read_to_string(p).unwrap_or_default());
    let read_all = || -> Result<(Option<String>, TrailRead), String> {
        let first_anchor = read_opt(anchor);
        let text =
            std::fs::read_to_string(trail).map_err(|e| format!("{}: {e}", trail.display()))?;
        let links = read_opt(links).unwrap_or_default();
        let anchor = read_opt(anchor).unwrap_or_default();
        Ok((
            first_anchor,
            TrailRead {
                trail: text,
                links,
                anchor,
            },
        ))
    };
    if !being_written(trail) {
        return read_all().map(|(_, read)| read);
    }
    for attempt in 0..ATTEMPTS {
        let (first_anchor, read) = read_all()?;
        let whole = read.trail.is_empty() || read.trail.ends_with('\n');
        let settled = match first_anchor {
            Some(first) => {
                first == read.anchor
                    && anchored_seqs(&read.anchor).is_some_and(|a| a == shard_lengths(&read.trail))
            }
            None => true,
        };
        if whole && settled {
            return Ok(read);
        }
        std::thread::sleep(Duration::from_millis(u64::from(attempt.min(20)) + 1));
    }
    Err(format!(
        "{}: its writer kept appending while it was read ({ATTEMPTS} tries): try again",
        trail.display()
    ))
}

/// Whether a writer holds the trail's lock now (a trail that cannot be opened has none: the
/// read says why).
fn being_written(trail: &Path) -> bool {
    let Ok(file) = std::fs::File::open(trail) else {
        return false;
    };
    // Released at once (the handle is dropped): a reader never keeps a writer from starting.
    matches!(
        file.try_lock_shared(),
        Err(std::fs::TryLockError::WouldBlock)
    )
}

/// How many lines each shard of `text` has (lines from before shards under `""`; a line that
/// does not parse, as a torn one, under its own name so no anchor matches).
fn shard_lengths(text: &str) -> BTreeMap<String, u64> {
    let mut lengths = BTreeMap::new();
    for line in text.lines() {
        let shard = serde_json::from_str::<serde_json::Value>(line).map_or_else(
            |_| "\u{0}unreadable".to_owned(),
            |v| {
                v.get("shard")
                    .and_then(|s| s.as_str())
                    .unwrap_or("")
                    .to_owned()
            },
        );
        *lengths.entry(shard).or_insert(0) += 1;
    }
    lengths
}

/// The `seq` each line of an anchor names, by shard (a line from before shards: `""`; an empty
/// anchor, written with no event yet, names none); none when a line does not parse.
fn anchored_seqs(anchor: &str) -> Option<BTreeMap<String, u64>> {
    anchor
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
            let shard = v.get("shard").and_then(|s| s.as_str()).unwrap_or("");
            Some((shard.to_owned(), v.get("seq")?.as_u64()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mrtr-gate-trail-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn without_a_writer_the_trail_is_read_once_as_it_is() {
        let dir = scratch("idle");
        let trail = dir.join("t.jsonl");
        std::fs::write(&trail, "torn").unwrap();
        let read = read_trail(&trail, None, Some(&dir.join("missing.anchor"))).unwrap();
        assert_eq!(read.trail, "torn", "judged as it is, by the verifier");
        assert!(read_trail(&dir.join("none"), None, None).is_err());
    }

    #[test]
    fn a_trail_being_written_is_read_only_when_its_anchor_covers_its_lines() {
        let dir = scratch("busy");
        let trail = dir.join("t.jsonl");
        let anchor = dir.join("t.anchor");
        // Lines of two shards: the anchor must cover each shard's count, not the total.
        let (a, b) = (r#"{"shard":"s1"}"#, r#"{"shard":"s2"}"#);
        std::fs::write(&trail, format!("{a}\n{b}\n{{\"sha")).unwrap();
        let before = "{\"seq\":1,\"shard\":\"s1\"}\n{\"seq\":1,\"shard\":\"s2\"}\n";
        let after = "{\"seq\":1,\"shard\":\"s1\"}\n{\"seq\":2,\"shard\":\"s2\"}\n";
        std::fs::write(&anchor, before).unwrap();
        let writer = std::fs::File::open(&trail).unwrap();
        writer.lock().unwrap();
        // The writer finishes its line and moves the anchor a moment later.
        let finish = {
            let (trail, anchor) = (trail.clone(), anchor.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                std::fs::write(&trail, format!("{a}\n{b}\n{b}\n")).unwrap();
                std::thread::sleep(Duration::from_millis(30));
                std::fs::write(&anchor, after).unwrap();
            })
        };
        let read = read_trail(&trail, None, Some(&anchor)).unwrap();
        finish.join().unwrap();
        assert_eq!(read.trail, format!("{a}\n{b}\n{b}\n"));
        assert_eq!(read.anchor, after);
        drop(writer);
    }
}
