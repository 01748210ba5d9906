//! [`RedisAudit`]: one hash-chained audit trail for every process of a client, in Redis, one
//! chain per shard (wit/gate.wit `audit`: a server's events go to its shard).
//!
//! One chain per shard, not one per process: an append is a Lua script that adds the entry to
//! its shard's stream only if it extends that shard's head (its `seq` follows the head's, its
//! `prev_sha256` is the head's digest), moves the head, and reads the line back from the
//! stream, all as one step on the server. A process whose gate holds an old head gets the new
//! head back (`HeadMoved`) and the gate writes its event again on top of it. So each shard is a
//! single total order that `verify_chain` checks end to end, with nothing to merge and no gap
//! a merge could hide; and writers on different shards never meet.
//!
//! A shard's stream and head carry the shard as their hash tag (`{ns}:{S}#audit:{trail}`): the
//! server's key part, the tag of the store's keys for that server, so on a Cluster a server's
//! records and its trail share a slot. The shards of a trail are listed in a set
//! (`{ns}:{audit-<trail>}:shards`), added to before a process's first append to a shard, so
//! a reader never misses a shard that has lines. Stream entry ids are `<seq>-1`, so an entry
//! is found by its position alone.
//!
//! An append is confirmed only once [`Options::replicas`] replicas hold it (`WAIT`, in the same
//! round trip), and appending the entry the head already is returns it as written: a call the
//! connection retried (a reconnect, a redirection on a Cluster) after the first try landed
//! neither writes the line twice nor reports it lost.

use crate::Options;
use crate::connection::{Conn, write_script};
use mrtr_gate_core::audit::{ROOT_SHARD, shard_ok};
use mrtr_gate_core::digest::sha256_hex;
use mrtr_gate_core::host::{AppendOutcome, Audit, AuditEntry, ChainHead, HostError, ShardHeads};
use redis::Script;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

// An append, as a Lua function (also run by the journal's script, before or after its writes:
// crate::journal). The stream, the head hash; seq, prev_sha256, event_sha256, line. Returns
// {1, stored line} when written (or already the head), {0, head seq, head sha256} when the head
// moved.
pub(crate) const APPEND_FN: &str = r"
local function append(stream, headkey, seq, prev, sha, line)
  local head = redis.call('HMGET', headkey, 'seq', 'sha')
  local at = tonumber(head[1] or '0')
  local hsha = head[2] or string.rep('0', 64)
  if tonumber(seq) == at and sha == hsha then
    local back = redis.call('XRANGE', stream, seq .. '-1', seq .. '-1')
    if back[1] ~= nil and back[1][2][2] == line then return {1, back[1][2][2]} end
  end
  if tonumber(seq) ~= at + 1 or prev ~= hsha then
    return {0, tostring(at), hsha}
  end
  local id = seq .. '-1'
  redis.call('XADD', stream, id, 'line', line)
  redis.call('HSET', headkey, 'seq', seq, 'sha', sha)
  local back = redis.call('XRANGE', stream, id, id)
  if back[1] == nil then return {1, false} end
  return {1, back[1][2][2]}
end
";

// KEYS[1]: the stream, KEYS[2]: the head hash. ARGV: seq, prev_sha256, event_sha256, line.
const APPEND_CALL: &str = "return append(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])";

// KEYS[1]: a shard's head hash, KEYS[2]: its read mark. Returns the head's {seq, sha} (false:
// none) after a write to the mark in the same slot: the `WAIT` after it then counts the
// replicas that hold everything the master took before this read, the head's line included.
const HEAD: &str = r"
local head = redis.call('HMGET', KEYS[1], 'seq', 'sha')
redis.call('INCR', KEYS[2])
return head
";

// KEYS[1]: the trail's set of shards. ARGV[1]: a shard. A script (not a bare SADD) so that it
// goes through `write_script`, confirmed by the same WAIT as every other write: a shard whose
// listing a failover lost would hide its lines from every reader.
const LIST: &str = "return redis.call('SADD', KEYS[1], ARGV[1])";

/// The shared trail on Redis.
pub struct RedisAudit {
    conn: Conn,
    options: Options,
    namespace: String,
    trail: String,
    /// The set of the trail's shards.
    shards: String,
    /// The one stream of a trail written before shards (0.5), read by [`Self::lines`].
    legacy_stream: String,
    url: String,
    /// What this sink shares with every sink of the trail made from it ([`Self::another`]).
    process: Arc<Process>,
    append: Script,
    /// [`APPEND_FN`] with its call: the text `EVAL` sends when the server lacks the script.
    append_source: Arc<str>,
    list: Script,
    head: Script,
}

/// What the sinks of one trail in one process know, shared by the gates they serve.
#[derive(Default)]
struct Process {
    /// The shards added to the trail's set (`RedisAudit::list`).
    listed: Mutex<BTreeSet<String>>,
    /// The newest head each shard was last seen at, written or answered (at most
    /// [`MAX_SEEN`]). Another gate of the process holds an older one after this one appends,
    /// and its entry at or below the head seen is answered `head moved` without a round trip:
    /// a chain only grows. A head Redis names replaces it, even a lower one (a failover that
    /// lost lines), so what is seen never stays ahead of the trail.
    seen: Mutex<HashMap<String, ChainHead>>,
}

/// The most shards whose heads [`Process::seen`] holds (then it starts again, empty).
const MAX_SEEN: usize = 4096;

impl Process {
    fn saw(&self, shard: &str, head: ChainHead) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= MAX_SEEN && !seen.contains_key(shard) {
            seen.clear();
        }
        seen.insert(shard.to_owned(), head);
    }
}

impl std::fmt::Debug for RedisAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAudit")
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl RedisAudit {
    /// The trail `trail` under `namespace` at `url` (`redis://…` or `redis-cluster://…`), with
    /// [`Options::for_url`]. Every process of one client names the same trail.
    pub fn connect(url: &str, namespace: &str, trail: &str) -> Result<Self, HostError> {
        Self::connect_with(url, namespace, trail, Options::for_url(url))
    }

    /// [`RedisAudit::connect`] with `options`.
    pub fn connect_with(
        url: &str,
        namespace: &str,
        trail: &str,
        options: Options,
    ) -> Result<Self, HostError> {
        let bad = |s: &str| s.is_empty() || s.contains(['{', '}', ':', '*', '?', '[', ']']);
        if bad(namespace) || bad(trail) {
            return Err(HostError::new(
                "a redis namespace and trail name are non-empty, without `{}:*?[]`",
            ));
        }
        Ok(Self {
            conn: Conn::open(url, options.timeout, "redis audit")?,
            options,
            namespace: namespace.to_owned(),
            trail: trail.to_owned(),
            shards: format!("{namespace}:{{audit-{trail}}}:shards"),
            legacy_stream: format!("{namespace}:{{audit-{trail}}}:stream"),
            url: url.to_owned(),
            process: Arc::default(),
            append: Script::new(&format!("{APPEND_FN}{APPEND_CALL}")),
            append_source: format!("{APPEND_FN}{APPEND_CALL}").into(),
            list: Script::new(LIST),
            head: Script::new(HEAD),
        })
    }

    /// A sink for another gate of this process: the same trail through a connection of its
    /// own (one connection serialises its calls), knowing the heads this one saw, so that the
    /// gates of one process do not each pay a refused append to learn the other's last line.
    pub fn another(&self) -> Result<Self, HostError> {
        Ok(Self {
            conn: Conn::open(&self.url, self.options.timeout, "redis audit")?,
            options: self.options,
            namespace: self.namespace.clone(),
            trail: self.trail.clone(),
            shards: self.shards.clone(),
            legacy_stream: self.legacy_stream.clone(),
            url: self.url.clone(),
            process: Arc::clone(&self.process),
            append: self.append.clone(),
            append_source: Arc::clone(&self.append_source),
            list: self.list.clone(),
            head: self.head.clone(),
        })
    }

    /// A shard's stream and head: one hash tag, the shard's, so one Cluster slot for the
    /// script (the slot of the store's keys of the server the shard is).
    pub(crate) fn keys_of(&self, shard: &str) -> [String; 2] {
        let (ns, trail) = (&self.namespace, &self.trail);
        [
            format!("{ns}:{{{shard}}}#audit:{trail}"),
            format!("{ns}:{{{shard}}}#audit-head:{trail}"),
        ]
    }

    /// The trail's shards, in order ([`mrtr_gate_core::audit::ROOT_SHARD`] last: the root
    /// anchors the others).
    pub fn shard_names(&self) -> Result<Vec<String>, HostError> {
        let mut names: Vec<String> = self
            .conn
            .with(|c| redis::cmd("SMEMBERS").arg(&self.shards).query(c))?;
        names.sort_by_key(|s| (s == ROOT_SHARD, s.clone()));
        Ok(names)
    }

    /// A shard's read mark: written by every confirmed read of its head ([`HEAD`]), in the
    /// head's slot.
    fn mark_of(&self, shard: &str) -> String {
        format!("{}:{{{shard}}}#audit-mark:{}", self.namespace, self.trail)
    }

    /// Every shard's head, the root's read first ([`ShardHeads::heads`]). With writes that wait
    /// for replicas ([`Options::replicas`]), each head is read by a script confirmed by the same
    /// `WAIT` as an append, so a head is returned only once the replicas hold its line: a
    /// master takes a line before its `WAIT` ends, and may die before a replica copies it, so a
    /// root line anchoring a head read straight from it would read as a cut after a failover
    /// that lost a line nobody was told was written. A head the replicas do not hold within
    /// the timeout is an error naming its shard (no root line is written).
    pub fn heads(&self) -> Result<BTreeMap<String, ChainHead>, HostError> {
        let mut heads = BTreeMap::new();
        let mut names = self.shard_names()?;
        names.sort_by_key(|s| (s != ROOT_SHARD, s.clone()));
        for shard in names {
            let [_, head] = self.keys_of(&shard);
            let (seq, sha): (Option<u64>, Option<String>) = if self.options.replicas == 0 {
                self.conn.with(|c| {
                    redis::cmd("HMGET")
                        .arg(&head)
                        .arg("seq")
                        .arg("sha")
                        .query(c)
                })?
            } else {
                let reply = write_script(
                    &self.conn,
                    &self.options,
                    &|_| {},
                    (&self.head, HEAD),
                    &[head, self.mark_of(&shard)],
                    &[],
                )
                .map_err(|e| {
                    HostError::new(format!("the head of audit shard {shard}: {}", e.message))
                })?;
                redis::from_redis_value(reply)
                    .map_err(|_| HostError::new("redis audit returned a bad head"))?
            };
            if let (Some(seq), Some(event_sha256)) = (seq, sha) {
                heads.insert(shard, ChainHead { seq, event_sha256 });
            }
        }
        Ok(heads)
    }

    /// Calls made to Redis so far (each one round trip, as [`RedisStorage::round_trips`]).
    ///
    /// [`RedisStorage::round_trips`]: crate::RedisStorage::round_trips
    pub fn round_trips(&self) -> u64 {
        self.conn.calls()
    }

    /// The whole trail, each shard oldest first (for `verify_chain` and reconciliation): the
    /// stream of a trail written before shards (0.5, one chain, read as the shard `""`), the
    /// root, then the other shards. The root is read before the set of shards and their
    /// streams: a root line anchors heads its writer read before writing it, and heads only
    /// grow, so every line a root line read here anchors is in what is read after it (reading
    /// the root last, a process's newer line and the root line anchoring it could land between
    /// the two reads: a `Cut` that is not one).
    pub fn lines(&self) -> Result<Vec<String>, HostError> {
        let mut lines = self.stream_lines(&self.legacy_stream)?;
        let [root, _] = self.keys_of(ROOT_SHARD);
        lines.extend(self.stream_lines(&root)?);
        for shard in self.shard_names()? {
            if shard != ROOT_SHARD {
                let [stream, _] = self.keys_of(&shard);
                lines.extend(self.stream_lines(&stream)?);
            }
        }
        Ok(lines)
    }

    /// A stream's lines, oldest first.
    fn stream_lines(&self, stream: &str) -> Result<Vec<String>, HostError> {
        let entries: Vec<(String, Vec<(String, String)>)> = self
            .conn
            .with(|c| redis::cmd("XRANGE").arg(stream).arg("-").arg("+").query(c))?;
        Ok(entries
            .into_iter()
            .filter_map(|(_, fields)| {
                fields
                    .into_iter()
                    .find(|(k, _)| k == "line")
                    .map(|(_, v)| v)
            })
            .collect())
    }

    /// Add `shard` to the trail's set before this process's first append to it.
    pub(crate) fn list(&self, shard: &str) -> Result<(), HostError> {
        let mut listed = self
            .process
            .listed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if listed.contains(shard) {
            return Ok(());
        }
        write_script(
            &self.conn,
            &self.options,
            &|_| {},
            (&self.list, LIST),
            std::slice::from_ref(&self.shards),
            &[shard.to_owned()],
        )?;
        listed.insert(shard.to_owned());
        Ok(())
    }
}

impl ShardHeads for RedisAudit {
    fn heads(&self) -> Result<BTreeMap<String, ChainHead>, HostError> {
        RedisAudit::heads(self)
    }
    fn last_root(&self) -> Result<Option<String>, HostError> {
        let [stream, _] = self.keys_of(ROOT_SHARD);
        let newest: Vec<(String, Vec<(String, String)>)> = self.conn.with(|c| {
            redis::cmd("XREVRANGE")
                .arg(&stream)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query(c)
        })?;
        Ok(newest.into_iter().next().and_then(|(_, fields)| {
            fields
                .into_iter()
                .find(|(k, _)| k == "line")
                .map(|(_, v)| v)
        }))
    }
}

impl RedisAudit {
    /// The checks every append makes before Redis is asked: an entry's digest must be its
    /// line's (the same rule as the file sink), its shard one its line carries.
    pub(crate) fn check(entry: &AuditEntry) -> Result<(), HostError> {
        if entry.line.contains('\n') || sha256_hex(entry.line.as_bytes()) != entry.event_sha256 {
            return Err(HostError::new("the entry's digest is not its line's"));
        }
        if !shard_ok(entry) {
            return Err(HostError::new(
                "the entry's shard is not a shard name its line carries",
            ));
        }
        Ok(())
    }

    /// The head another gate of this process saw past `entry` (an append answered without a
    /// round trip: a chain only grows). The entry itself at the head (a call re-offered after
    /// an error) is not: Redis returns it as written.
    pub(crate) fn seen_past(&self, entry: &AuditEntry) -> Option<ChainHead> {
        self.process
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&entry.shard)
            .filter(|head| {
                head.seq > entry.seq
                    || (head.seq == entry.seq && head.event_sha256 != entry.event_sha256)
            })
            .cloned()
    }

    /// The arguments [`APPEND_FN`] takes for `entry`, after its two keys.
    pub(crate) fn append_args(entry: &AuditEntry) -> [String; 4] {
        [
            entry.seq.to_string(),
            entry.prev_sha256.clone(),
            entry.event_sha256.clone(),
            entry.line.clone(),
        ]
    }

    /// What [`APPEND_FN`]'s reply says was done with `entry` (the head it names noted).
    pub(crate) fn outcome(
        &self,
        entry: &AuditEntry,
        reply: redis::Value,
    ) -> Result<AppendOutcome, HostError> {
        let reply: Vec<redis::Value> = redis::from_redis_value(reply)
            .map_err(|_| HostError::new("redis audit returned an unknown reply"))?;
        let text = |v: Option<&redis::Value>| -> Option<String> {
            match v? {
                redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
                redis::Value::SimpleString(s) => Some(s.clone()),
                redis::Value::Int(n) => Some(n.to_string()),
                _ => None,
            }
        };
        match text(reply.first()).as_deref() {
            Some("1") => {
                let head = ChainHead {
                    seq: entry.seq,
                    event_sha256: entry.event_sha256.clone(),
                };
                self.process.saw(&entry.shard, head);
                Ok(AppendOutcome::written(entry, text(reply.get(1))))
            }
            Some("0") => {
                let seq = text(reply.get(1))
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| HostError::new("redis audit returned a bad head"))?;
                let event_sha256 = text(reply.get(2))
                    .ok_or_else(|| HostError::new("redis audit returned a bad head"))?;
                let head = ChainHead { seq, event_sha256 };
                self.process.saw(&entry.shard, head.clone());
                Ok(AppendOutcome::head_moved(head))
            }
            _ => Err(HostError::new("redis audit returned an unknown reply")),
        }
    }

    /// The URL and options the trail was opened with: a store at the same URL with the same
    /// confirmation rule may append to it in its own scripts (crate::journal).
    pub(crate) fn opened_as(&self) -> (&str, &Options) {
        (&self.url, &self.options)
    }
}

impl Audit for RedisAudit {
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        Self::check(entry)?;
        if let Some(head) = self.seen_past(entry) {
            return Ok(AppendOutcome::head_moved(head));
        }
        self.list(&entry.shard)?;
        let reply = write_script(
            &self.conn,
            &self.options,
            &|_| {},
            (&self.append, &*self.append_source),
            &self.keys_of(&entry.shard),
            &Self::append_args(entry),
        )?;
        self.outcome(entry, reply)
    }

    /// Itself: a Redis store at the same URL appends to this trail in its write scripts.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
