//! [`RedisStorage`]: the gate's `storage` service on Redis, shared by every process that
//! connects to the same server and namespace.
//!
//! - Every operation is one round trip: reads and each write batch are Lua scripts, so a
//!   batch's compare-and-swaps are checked and applied atomically on the server, stopping at
//!   the first that loses, exactly as the in-memory store does under its lock.
//! - Liveness follows the host's clock, not Redis's: each value carries its expiry in host
//!   milliseconds and the scripts take "now" as an argument, so every store a gate can run
//!   over answers alike (a test clock included). Redis's own `PEXPIRE` (the TTL plus a grace)
//!   only collects what is long dead.
//! - Versions come from one counter per hash tag, so a key's version is never reused, not
//!   even after the key was deleted and written again; and carry the counter's life, so
//!   they are not reused after Redis lost its data or the counter either (restarted empty,
//!   `FLUSHALL`, the counter evicted, restarted from an older snapshot, a replica promoted
//!   without the master's last writes). The counter is a hash `<namespace>:{<tag>}#epoch` of
//!   `e`, a random non-zero 32-bit epoch (8 hex digits), `n`, the count, and `r`, the run id
//!   of the server that last wrote it (read by the script itself, from `INFO server`). A
//!   version is `e` and `n` as 16 hex digits (epoch high, count low; stored so in each
//!   value's `v`, read back as the `u64` they spell: exact, where Lua's numbers are not).
//!   Every write script call checks the counter: missing, run out, or last written by another
//!   server run (a restart from a snapshot keeps the counter but not the writes after it; a
//!   promoted replica has a run id of its own), it starts again at 1 under a new epoch the
//!   host drew.
//! - A write is confirmed only once `replicas` replicas hold it ([`Options`]): the same
//!   round trip ends with `WAIT`, and a write fewer replicas acknowledged is an error (the
//!   gate denies), so a failover cannot bring back a round whose use was confirmed.
//! - Keys are `<namespace>:{<tag>}:<gate key>`; the tag is the server part of the gate's key
//!   (its 128-bit key part), so every key of one server, and so every key of a batch, lives
//!   in one Redis Cluster slot with its counter. Values are opaque to Redis: hashes of
//!   `v` (version), `e` (expiry, host ms) and `d` (the gate's text).
//! - The time index for `list-due`: per hash tag a sorted set `<namespace>:{<tag>}#due`
//!   (score: the key's expiry `e`, member: the gate key), changed by the write script in
//!   the same step as the value; and the set `<namespace>:tags` of every tag written, added
//!   to in the same round trip as the write, before it. See [`RedisStorage::list_due`].

use crate::Options;
use crate::connection::{Conn, send, write_script};
use mrtr_gate_core::host::{Clock, DuePage, HostError, ReadKey, Storage, Versioned, Write};
use redis::Script;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a value outlives its TTL in Redis before Redis drops it on its own (the gate sees
/// it dead at its TTL, by the host clock; the grace covers clocks that disagree).
pub const GRACE_MS: u64 = 60_000;

/// How long one Redis call may take by default before it fails (and the gate denies with
/// `storage_failed`). Well under the gate's default call deadline (1 s, which counts the time
/// spent in storage), so a stalled store is named as such rather than as a guest that ran
/// out of time; a remote store can be given more ([`Options::timeout`], with the deadline
/// raised to match).
pub const TIMEOUT: Duration = Duration::from_millis(250);

// KEYS: the Redis keys. ARGV[1]: now (host ms); ARGV[1 + i]: the version the reader holds of
// key i, 16 hex digits ("0": none). Returns, per key, {version, value} ({0, ""}: absent or dead; a value of
// "" when the reader holds that version already).
const READ: &str = r"
local now = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local h = redis.call('HMGET', key, 'v', 'e', 'd')
  if h[1] and tonumber(h[2]) > now then
    if h[1] == ARGV[i + 1] then
      out[#out + 1] = h[1]
      out[#out + 1] = ''
    else
      out[#out + 1] = h[1]
      out[#out + 1] = h[3]
    end
  else
    out[#out + 1] = '0'
    out[#out + 1] = ''
  end
end
return out
";

// The write of a batch, as a Lua function (also run by the journal's script, after or before
// its append: crate::journal). KEYS from `k0 + 1`: per write, its key, its tag's version
// counter and its tag's due set. ARGV from `a0`: now; grace; a fresh epoch (8 hex digits, not
// 0) for a counter that starts a new life; then per write: expected version (16 hex digits;
// "0": absent), "1" to store or "0" to delete, the value, the TTL, the gate key. Applies in
// order, stopping at the first whose key is not at its expected version; returns the new
// version of each write applied ("0" for a delete), or nil and an error. The server's run id
// comes from `INFO server` ("" where a managed Redis refuses it: then not checked). The due
// set follows every applied write (the key's expiry as its score, removed with the key) and
// sheds what is past its TTL, so it never holds more than is live. A counter missing, run
// out, or last written under another run of the server starts a new life: the epoch given,
// the count at 1.
pub(crate) const WRITE_FN: &str = r"
local function write(k0, a0, n)
  local now = tonumber(ARGV[a0])
  local grace = tonumber(ARGV[a0 + 1])
  local fresh = ARGV[a0 + 2]
  local info = redis.pcall('INFO', 'server')
  local run = ''
  if type(info) == 'string' then run = string.match(info, 'run_id:(%x+)') or '' end
  local out = {}
  for i = 1, n do
    local key, counter, due = KEYS[k0 + 3 * i - 2], KEYS[k0 + 3 * i - 1], KEYS[k0 + 3 * i]
    local a = a0 + 2 + 5 * (i - 1)
    local h = redis.call('HMGET', key, 'v', 'e')
    local current = '0'
    if h[1] and tonumber(h[2]) > now then current = h[1] end
    if current ~= ARGV[a + 1] then break end
    redis.call('ZREMRANGEBYSCORE', due, '-inf', ARGV[a0])
    if ARGV[a + 2] == '0' then
      redis.call('DEL', key)
      redis.call('ZREM', due, ARGV[a + 5])
      out[#out + 1] = '0'
    else
      local ttl = tonumber(ARGV[a + 4])
      local e = tostring(now + ttl)
      local c = redis.call('HMGET', counter, 'e', 'n', 'r')
      local epoch, count = c[1], tonumber(c[2])
      if not epoch or not count or count >= 4294967295 or (run ~= '' and c[3] ~= run) then
        if epoch == fresh then return nil, 'the fresh epoch is the current one' end
        epoch, count = fresh, 0
      end
      count = count + 1
      if run ~= '' then
        redis.call('HSET', counter, 'e', epoch, 'n', count, 'r', run)
      else
        redis.call('HSET', counter, 'e', epoch, 'n', count)
      end
      local version = epoch .. string.format('%08x', count)
      redis.call('HSET', key, 'v', version, 'e', e, 'd', ARGV[a + 3])
      redis.call('PEXPIRE', key, ttl + grace)
      redis.call('ZADD', due, e, ARGV[a + 5])
      out[#out + 1] = version
    end
  end
  return out
end
";

// A batch on its own: KEYS and ARGV as [`WRITE_FN`] reads them from the start.
const WRITE_CALL: &str = r"
local out, err = write(0, 1, #KEYS / 3)
if err then return redis.error_reply(err) end
return out
";

// KEYS[1]: one tag's due set. ARGV[1]: now; ARGV[2]: due by; ARGV[3]: the most to return
// (n); ARGV[4], ARGV[5]: the score and member listed last ("" for none: from the start).
// Drops the members past their TTL (score <= now: no longer live), then returns up to n + 1
// of the rest with a score <= due by, after the one listed last, in (score, member) order, as
// member, score pairs (n + 1: so the caller knows whether there is more). Members of the
// cursor's own score that sort before or at its member were listed already and are skipped:
// only those cost a step each, and they are due.
const DUE: &str = r"
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
local want = tonumber(ARGV[3]) + 1
local min, cs, cm = '-inf', nil, ARGV[5]
if ARGV[4] ~= '' then
  min = ARGV[4]
  cs = tonumber(ARGV[4])
end
local out = {}
local offset = 0
while #out < 2 * want do
  local got = redis.call('ZRANGEBYSCORE', key, min, ARGV[2], 'WITHSCORES', 'LIMIT', offset, want)
  for j = 1, #got, 2 do
    local sc = tonumber(got[j + 1])
    if #out < 2 * want and not (cs and sc == cs and got[j] <= cm) then
      out[#out + 1] = got[j]
      out[#out + 1] = got[j + 1]
    end
  end
  if #got < 2 * want then break end
  offset = offset + want
end
return out
";

/// A `list-due` cursor: where the listing stopped (the tag, and the score and member listed
/// last in it), as `<score> <tag length> <tag><member>`.
#[derive(Debug, PartialEq, Eq)]
struct DueCursor {
    tag: String,
    score: u64,
    member: String,
}

impl DueCursor {
    fn encode(&self) -> String {
        format!(
            "{} {} {}{}",
            self.score,
            self.tag.len(),
            self.tag,
            self.member
        )
    }
    fn decode(text: &str) -> Result<Self, HostError> {
        let bad = || HostError::new("list-due cursor not made by this store");
        let (score, rest) = text.split_once(' ').ok_or_else(bad)?;
        let (len, rest) = rest.split_once(' ').ok_or_else(bad)?;
        let len: usize = len.parse().map_err(|_| bad())?;
        let tag = rest.get(..len).ok_or_else(bad)?;
        let member = rest.get(len..).ok_or_else(bad)?;
        Ok(Self {
            tag: tag.to_owned(),
            score: score.parse().map_err(|_| bad())?,
            member: member.to_owned(),
        })
    }
}

/// The gate's storage on Redis.
pub struct RedisStorage {
    pub(crate) conn: Conn,
    pub(crate) options: Options,
    /// The URL connected to: a trail at the same URL is the same Redis (crate::journal).
    pub(crate) url: String,
    namespace: String,
    clock: Arc<dyn Clock + Send + Sync>,
    read: Script,
    write: Script,
    /// [`WRITE_FN`] with its call: the text `EVAL` sends when the server lacks the script.
    write_source: String,
    due: Script,
    /// On a Cluster, the tags this process added to `<namespace>:tags` through the current
    /// connection (its count of lives first): the set lives in another slot than the write,
    /// so adding it costs a round trip of its own, paid once per tag and connection.
    tags_added: Mutex<(u64, HashSet<String>)>,
}

impl std::fmt::Debug for RedisStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStorage")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The hash tag of a gate key: the server part of `mrtr-gate/v3/id/<key part>/…`, so every
/// key of one server shares a Cluster slot; `_` for any other key.
pub fn hash_tag(gate_key: &str) -> &str {
    gate_key
        .strip_prefix(mrtr_gate_core::ID_PREFIX)
        .and_then(|rest| rest.split_once('/'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty() && !tag.contains(['{', '}']))
        .unwrap_or("_")
}

impl RedisStorage {
    /// Connect to `url` (`redis://host:port/db`, or `redis-cluster://host:port,…/` for a
    /// Cluster) with [`Options::for_url`]. Every key lives under `namespace`: stores that must
    /// see each other's rounds share it, unrelated deployments do not.
    pub fn connect(
        url: &str,
        namespace: &str,
        clock: Arc<dyn Clock + Send + Sync>,
    ) -> Result<Self, HostError> {
        Self::connect_with(url, namespace, clock, Options::for_url(url))
    }

    /// [`RedisStorage::connect`] with `options`.
    pub fn connect_with(
        url: &str,
        namespace: &str,
        clock: Arc<dyn Clock + Send + Sync>,
        options: Options,
    ) -> Result<Self, HostError> {
        if namespace.is_empty() || namespace.contains(['{', '}', ':', '*', '?', '[', ']']) {
            return Err(HostError::new(
                "a redis namespace is non-empty, without `{}:*?[]`",
            ));
        }
        Ok(Self {
            conn: Conn::open(url, options.timeout, "redis")?,
            options,
            url: url.to_owned(),
            namespace: namespace.to_owned(),
            clock,
            read: Script::new(READ),
            write: Script::new(&format!("{WRITE_FN}{WRITE_CALL}")),
            write_source: format!("{WRITE_FN}{WRITE_CALL}"),
            due: Script::new(DUE),
            tags_added: Mutex::new((0, HashSet::new())),
        })
    }

    /// Calls made to Redis so far (each one round trip; a script's first use on a connection
    /// may take a second, to load it).
    pub fn round_trips(&self) -> u64 {
        self.conn.calls()
    }

    /// `items` as the batches one script call takes: all of them on one server; on a Cluster,
    /// each run of consecutive items whose keys share a tag (a slot).
    fn runs<'i, T>(&self, items: &'i [T], key: impl Fn(&T) -> &str) -> Vec<&'i [T]> {
        if !self.conn.is_cluster() {
            return (!items.is_empty()).then_some(items).into_iter().collect();
        }
        items
            .chunk_by(|a, b| hash_tag(key(a)) == hash_tag(key(b)))
            .collect()
    }

    /// One write script call (see [`WRITE_FN`]): the new versions of the writes applied.
    fn write_run(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let (keys, args, tags) = self.write_parts(writes);
        let reply = self.with_tags(&tags, |before| {
            write_script(
                &self.conn,
                &self.options,
                before,
                (&self.write, self.write_source.as_str()),
                &keys,
                &args,
            )
        })?;
        applied_versions(reply, writes.len())
    }

    /// The keys and arguments [`WRITE_FN`] reads for `writes`, and their tags (each once).
    pub(crate) fn write_parts<'w>(
        &self,
        writes: &'w [Write<'_>],
    ) -> (Vec<String>, Vec<String>, Vec<&'w str>) {
        let now = self.clock.now_ms();
        let mut keys = Vec::with_capacity(writes.len() * 3);
        let mut args = vec![now.to_string(), GRACE_MS.to_string(), fresh_epoch()];
        let mut tags: Vec<&str> = Vec::new();
        for w in writes {
            let tag = hash_tag(w.key);
            if !tags.contains(&tag) {
                tags.push(tag);
            }
            keys.extend([
                self.redis_key(w.key),
                self.counter_key(w.key),
                self.due_key(tag),
            ]);
            args.extend([
                version_text(w.expected),
                if w.value.is_some() { "1" } else { "0" }.to_owned(),
                w.value.unwrap_or("").to_owned(),
                w.ttl_ms.max(1).to_string(),
                w.key.to_owned(),
            ]);
        }
        (keys, args, tags)
    }

    /// Runs `call` (one round trip) with `tags` added to `<namespace>:tags` first, so a sweep
    /// that lists the tags after the write can see its key's due set (tags are never removed:
    /// list_due). On one server they go in the call's own round trip (`call` puts what it is
    /// given at the head of its pipeline); on a Cluster the set is in another slot, so a tag
    /// new to this connection is added (and confirmed) in a round trip before.
    pub(crate) fn with_tags<T>(
        &self,
        tags: &[&str],
        call: impl FnOnce(&dyn Fn(&mut redis::Pipeline)) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let cluster = self.conn.is_cluster();
        if cluster {
            self.add_tags(tags)?;
        }
        let tags_key = self.tags_key();
        let before = |pipe: &mut redis::Pipeline| {
            if !cluster {
                pipe.cmd("SADD").arg(&tags_key).arg(tags);
            }
        };
        call(&before)
    }

    /// One read script call (see [`READ`]).
    fn read_run(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        let now = self.clock.now_ms();
        let mut call = self.read.prepare_invoke();
        call.arg(now);
        for k in keys {
            call.key(self.redis_key(k.key));
            call.arg(version_text(k.have));
        }
        let flat: Vec<String> = self.conn.with(|c| call.invoke(c))?;
        if flat.len() != keys.len() * 2 {
            return Err(HostError::new("redis returned a short read"));
        }
        flat.chunks(2)
            .map(|pair| match pair {
                [v, d] => {
                    let v = version(v)?;
                    Ok(if v == 0 {
                        Versioned::absent()
                    } else {
                        Versioned {
                            value: d.clone(),
                            version: v,
                        }
                    })
                }
                _ => Err(HostError::new("redis returned a short read")),
            })
            .collect()
    }

    /// Adds the tags this connection has not added yet to `<namespace>:tags` (a Cluster's
    /// round trip of its own, confirmed like a write).
    fn add_tags(&self, tags: &[&str]) -> Result<(), HostError> {
        let lives = self.conn.lives();
        let new: Vec<&str> = {
            let mut added = self
                .tags_added
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if added.0 != lives {
                *added = (lives, HashSet::new());
            }
            tags.iter()
                .copied()
                .filter(|t| !added.1.contains(*t))
                .collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.cmd("SADD").arg(self.tags_key()).arg(&new);
        self.options.wait(&mut pipe);
        let replies = self.conn.with(|c| send(&pipe, c))?;
        self.options
            .confirmed(replies.get(1..).unwrap_or_default(), "redis")?;
        let mut added = self
            .tags_added
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Remembered under the connection they went through; a reconnect since forgets them.
        if added.0 == lives && self.conn.lives() == lives {
            added.1.extend(new.iter().map(|t| (*t).to_owned()));
        }
        Ok(())
    }

    /// The Redis key of a gate key.
    pub fn redis_key(&self, gate_key: &str) -> String {
        format!("{}:{{{}}}:{gate_key}", self.namespace, hash_tag(gate_key))
    }

    fn counter_key(&self, gate_key: &str) -> String {
        format!("{}:{{{}}}#epoch", self.namespace, hash_tag(gate_key))
    }

    /// The due set of a tag: its keys by expiry.
    fn due_key(&self, tag: &str) -> String {
        format!("{}:{{{tag}}}#due", self.namespace)
    }

    /// The set of every tag written under the namespace.
    fn tags_key(&self) -> String {
        format!("{}:tags", self.namespace)
    }
}

/// The versions a write script returned for a batch of `asked` writes.
pub(crate) fn applied_versions(reply: redis::Value, asked: usize) -> Result<Vec<u64>, HostError> {
    let applied: Vec<String> = redis::from_redis_value(reply)
        .map_err(|_| HostError::new("redis returned a malformed write reply"))?;
    if applied.len() > asked {
        return Err(HostError::new("redis applied more writes than asked"));
    }
    applied.iter().map(|v| version(v)).collect()
}

/// A version as Redis holds it (16 hex digits, the epoch first), read back: "0" is absent; a
/// version of epoch 0 was not made by this store (an older one's plain counter, say) and is
/// refused rather than compared.
fn version(text: &str) -> Result<u64, HostError> {
    if text == "0" {
        return Ok(0);
    }
    let v = (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
        .filter(|v| v >> 32 != 0)
        .ok_or_else(|| HostError::new("redis holds a version this store did not make"))?;
    Ok(v)
}

/// A version as the scripts compare it ("0": none).
fn version_text(v: u64) -> String {
    match v {
        0 => "0".to_owned(),
        v => format!("{v:016x}"),
    }
}

/// A fresh epoch for a counter that starts a new life: 32 random bits, not 0, as 8 hex
/// digits. Drawn per call (a new life is rare; the draw is cheap), from the standard
/// library's per-process random seed, varied per draw.
fn fresh_epoch() -> String {
    use std::hash::{BuildHasher, Hasher};
    static DRAWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(DRAWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    format!("{:08x}", (h.finish() >> 32).max(1))
}

impl Storage for RedisStorage {
    /// One script with its Redis trail (crate::journal); the two calls with any other sink.
    fn journal(
        &self,
        audit: &dyn mrtr_gate_core::host::Audit,
        order: mrtr_gate_core::host::Order,
        entry: &mrtr_gate_core::host::AuditEntry,
        writes: &[Write<'_>],
    ) -> Result<mrtr_gate_core::host::Journaled, HostError> {
        crate::journal::journal(self, audit, order, entry, writes)
    }

    /// One script call on one server; on a Cluster one per run of keys of one tag.
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Versioned>, HostError> {
        let mut out = Vec::with_capacity(keys.len());
        for run in self.runs(keys, |k| k.key) {
            out.extend(self.read_run(run)?);
        }
        Ok(out)
    }

    /// One script call for the batch on one server. On a Cluster, one per run of
    /// consecutive writes of one tag (one slot), in order, stopping at the first run that did
    /// not apply whole: each run is atomic, the batch as a whole is not (the gate's batches
    /// are one binding's keys, so one tag; the contract's results are the same).
    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        let mut applied = Vec::with_capacity(writes.len());
        for run in self.runs(writes, |w| w.key) {
            let done = self.write_run(run)?;
            let whole = done.len() == run.len();
            applied.extend(done);
            if !whole {
                break;
            }
        }
        Ok(applied)
    }

    /// The due keys tag by tag (tags in byte order, each tag's keys by expiry, then by key):
    /// for each tag from the cursor's on, one script call that drops the tag's keys past
    /// their TTL and returns its due ones after the cursor. A page costs one `SMEMBERS` of the
    /// tags plus one call per tag it passes, and the keys it lists; never a read of every
    /// key. Tags are never removed from `<namespace>:tags`: removing one when its due set is
    /// empty would race with a write that has added the tag but not yet run its script (that
    /// key would be missed by every later sweep). A tag is a server's key part, so the set
    /// grows with the servers a client has ever used, not with its bindings.
    fn list_due(
        &self,
        due_by_ms: u64,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<DuePage, HostError> {
        if limit == 0 {
            return Err(HostError::new("list-due limit is 0"));
        }
        let after = cursor.map(DueCursor::decode).transpose()?;
        let now = self.clock.now_ms();
        let mut tags: Vec<String> = self
            .conn
            .with(|c| redis::cmd("SMEMBERS").arg(self.tags_key()).query(c))?;
        tags.sort_unstable();
        let start = after
            .as_ref()
            .map_or(0, |a| tags.partition_point(|t| t.as_str() < a.tag.as_str()));
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut keys = Vec::new();
        for (i, tag) in tags.iter().enumerate().skip(start) {
            let want = limit - keys.len();
            let mut call = self.due.prepare_invoke();
            call.key(self.due_key(tag))
                .arg(now)
                .arg(due_by_ms)
                .arg(want);
            match after.as_ref().filter(|a| a.tag == *tag) {
                Some(a) => call.arg(a.score).arg(&a.member),
                None => call.arg("").arg(""),
            };
            let flat: Vec<String> = self.conn.with(|c| call.invoke(c))?;
            if !flat.len().is_multiple_of(2) || flat.len() > 2 * (want + 1) {
                return Err(HostError::new("redis returned a malformed due listing"));
            }
            let more_here = flat.len() > 2 * want;
            let mut last = None;
            for pair in flat.chunks(2).take(want) {
                if let [member, score] = pair {
                    keys.push(member.clone());
                    last = Some((score, member));
                }
            }
            if keys.len() == limit {
                let later_tags = i + 1 < tags.len();
                let next = match last {
                    Some((score, member)) if more_here || later_tags => Some(
                        DueCursor {
                            tag: tag.clone(),
                            score: score.parse().map_err(|_| {
                                HostError::new("redis returned a score that is not a number")
                            })?,
                            member: member.clone(),
                        }
                        .encode(),
                    ),
                    _ => None,
                };
                return Ok(DuePage { keys, next });
            }
        }
        Ok(DuePage { keys, next: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_server_share_a_tag_and_others_do_not() {
        let a = format!(
            "{}0123456789abcdef0123456789abcdef/1",
            mrtr_gate_core::ID_PREFIX
        );
        let b = format!(
            "{}0123456789abcdef0123456789abcdef/\"r\"",
            mrtr_gate_core::ID_PREFIX
        );
        assert_eq!(hash_tag(&a), "0123456789abcdef0123456789abcdef");
        assert_eq!(hash_tag(&a), hash_tag(&b));
        assert_eq!(hash_tag("other/key"), "_");
        assert_eq!(
            hash_tag(&format!("{}{{x}}/1", mrtr_gate_core::ID_PREFIX)),
            "_"
        );
        assert_eq!(hash_tag(mrtr_gate_core::ID_PREFIX), "_");
    }

    #[test]
    fn due_cursors_round_trip_and_garbage_is_an_error() {
        let c = DueCursor {
            tag: "0123 {x}".into(),
            score: 1_800_000_000_000,
            member: "mrtr-gate/v3/id/a b/1".into(),
        };
        assert_eq!(DueCursor::decode(&c.encode()).unwrap(), c);
        for bad in ["", "x", "1 2", "1 99 ab", "-1 0 k", "1 x k", "1 1 é"] {
            assert!(DueCursor::decode(bad).is_err(), "{bad:?}");
        }
    }
}
