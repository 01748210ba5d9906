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
//! - Versions come from one counter per hash tag (`INCR`), so a key's version is never
//!   reused, not even after the key was deleted and written again.
//! - Keys are `<namespace>:{<tag>}:<gate key>`; the tag is the server part of the gate's key
//!   (its 128-bit key part), so every key of one server, and so every key of a batch, lives
//!   in one Redis Cluster slot with its counter. Values are opaque to Redis: hashes of
//!   `v` (version), `e` (expiry, host ms) and `d` (the gate's text).

use crate::connection::Conn;
use mrtr_gate_host::core::host::{Clock, HostError, ReadKey, Storage, Versioned, Write};
use redis::Script;
use std::sync::Arc;
use std::time::Duration;

/// How long a value outlives its TTL in Redis before Redis drops it on its own (the gate sees
/// it dead at its TTL, by the host clock; the grace covers clocks that disagree).
pub const GRACE_MS: u64 = 60_000;

/// How long one Redis call may take by default before it fails (and the gate denies with
/// `storage_failed`). Well under the gate's default call deadline (1 s, which counts the time
/// spent in storage), so a stalled store is named as such rather than as a guest that ran
/// out of time; a remote store can be given more ([`RedisStorage::connect_with_timeout`],
/// with the deadline raised to match).
pub const TIMEOUT: Duration = Duration::from_millis(250);

// KEYS: the Redis keys. ARGV[1]: now (host ms); ARGV[1 + i]: the version the reader holds of
// key i ("0": none). Returns, per key, {version, value} ({0, ""}: absent or dead; a value of
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

// KEYS: per write, its key then its tag's version counter. ARGV[1]: now; ARGV[2]: grace;
// then per write: expected version ("0": absent), "1" to store or "0" to delete, the value,
// the TTL. Applies in order, stopping at the first whose key is not at its expected version;
// returns the new version of each write applied ("0" for a delete).
const WRITE: &str = r"
local now = tonumber(ARGV[1])
local grace = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS / 2 do
  local key, counter = KEYS[2 * i - 1], KEYS[2 * i]
  local a = 2 + 4 * (i - 1)
  local h = redis.call('HMGET', key, 'v', 'e')
  local current = '0'
  if h[1] and tonumber(h[2]) > now then current = h[1] end
  if current ~= ARGV[a + 1] then break end
  if ARGV[a + 2] == '0' then
    redis.call('DEL', key)
    out[#out + 1] = '0'
  else
    local ttl = tonumber(ARGV[a + 4])
    local version = redis.call('INCR', counter)
    redis.call('HSET', key, 'v', tostring(version), 'e', tostring(now + ttl), 'd', ARGV[a + 3])
    redis.call('PEXPIRE', key, ttl + grace)
    out[#out + 1] = tostring(version)
  end
end
return out
";

// KEYS: the Redis keys. ARGV[1]: now. The keys among them still live.
const LIVE: &str = r"
local now = tonumber(ARGV[1])
local out = {}
for _, key in ipairs(KEYS) do
  local e = redis.call('HGET', key, 'e')
  if e and tonumber(e) > now then out[#out + 1] = key end
end
return out
";

/// The gate's storage on Redis.
pub struct RedisStorage {
    conn: Conn,
    namespace: String,
    clock: Arc<dyn Clock + Send + Sync>,
    read: Script,
    write: Script,
    live: Script,
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
        .strip_prefix(mrtr_gate_host::core::ID_PREFIX)
        .and_then(|rest| rest.split_once('/'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty() && !tag.contains(['{', '}']))
        .unwrap_or("_")
}

impl RedisStorage {
    /// Connect to `url` (`redis://host:port/db`). Every key lives under `namespace`: stores
    /// that must see each other's rounds share it, unrelated deployments do not.
    pub fn connect(
        url: &str,
        namespace: &str,
        clock: Arc<dyn Clock + Send + Sync>,
    ) -> Result<Self, HostError> {
        Self::connect_with_timeout(url, namespace, clock, TIMEOUT)
    }

    /// [`RedisStorage::connect`], with each call allowed `timeout`.
    pub fn connect_with_timeout(
        url: &str,
        namespace: &str,
        clock: Arc<dyn Clock + Send + Sync>,
        timeout: Duration,
    ) -> Result<Self, HostError> {
        if namespace.is_empty() || namespace.contains(['{', '}', ':', '*', '?', '[', ']']) {
            return Err(HostError::new(
                "a redis namespace is non-empty, without `{}:*?[]`",
            ));
        }
        Ok(Self {
            conn: Conn::open(url, timeout, "redis")?,
            namespace: namespace.to_owned(),
            clock,
            read: Script::new(READ),
            write: Script::new(WRITE),
            live: Script::new(LIVE),
        })
    }

    /// Calls made to Redis so far (each one round trip; a script's first use on a connection
    /// may take a second, to load it).
    pub fn round_trips(&self) -> u64 {
        self.conn.calls()
    }

    /// The Redis key of a gate key.
    pub fn redis_key(&self, gate_key: &str) -> String {
        format!("{}:{{{}}}:{gate_key}", self.namespace, hash_tag(gate_key))
    }

    fn counter_key(&self, gate_key: &str) -> String {
        format!("{}:{{{}}}#version", self.namespace, hash_tag(gate_key))
    }

    fn gate_key<'a>(&self, redis_key: &'a str) -> Option<&'a str> {
        let rest = redis_key
            .strip_prefix(self.namespace.as_str())?
            .strip_prefix(":{")?;
        let (_, key) = rest.split_once("}:")?;
        Some(key)
    }
}

fn version(text: &str) -> Result<u64, HostError> {
    text.parse()
        .map_err(|_| HostError::new("redis returned a version that is not a number"))
}

impl Storage for RedisStorage {
    fn read(&self, keys: &[ReadKey<'_>]) -> Result<Vec<Option<Versioned>>, HostError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.clock.now_ms();
        let mut call = self.read.prepare_invoke();
        call.arg(now);
        for k in keys {
            call.key(self.redis_key(k.key));
            call.arg(k.have.unwrap_or(0));
        }
        let flat: Vec<String> = self.conn.with(|c| call.invoke(c))?;
        if flat.len() != keys.len() * 2 {
            return Err(HostError::new("redis returned a short read"));
        }
        flat.chunks(2)
            .map(|pair| match pair {
                [v, d] => {
                    let v = version(v)?;
                    Ok((v != 0).then(|| Versioned {
                        value: d.clone(),
                        version: v,
                    }))
                }
                _ => Err(HostError::new("redis returned a short read")),
            })
            .collect()
    }

    fn write(&self, writes: &[Write<'_>]) -> Result<Vec<u64>, HostError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.clock.now_ms();
        let mut call = self.write.prepare_invoke();
        call.arg(now).arg(GRACE_MS);
        for w in writes {
            call.key(self.redis_key(w.key)).key(self.counter_key(w.key));
            call.arg(w.expected.unwrap_or(0))
                .arg(if w.value.is_some() { "1" } else { "0" })
                .arg(w.value.unwrap_or(""))
                .arg(w.ttl_ms.max(1));
        }
        let applied: Vec<String> = self.conn.with(|c| call.invoke(c))?;
        if applied.len() > writes.len() {
            return Err(HostError::new("redis applied more writes than asked"));
        }
        applied.iter().map(|v| version(v)).collect()
    }

    fn list_keys(&self, prefix: &str) -> Result<Vec<String>, HostError> {
        let pattern = format!("{}:{{*}}:{}*", self.namespace, glob_escape(prefix));
        let found: Vec<String> = self.conn.with(|c| {
            let iter: redis::Iter<'_, String> = redis::cmd("SCAN")
                .cursor_arg(0)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .clone()
                .iter(c)?;
            iter.collect()
        })?;
        let now = self.clock.now_ms();
        let mut live = Vec::with_capacity(found.len());
        for chunk in found.chunks(512) {
            let mut call = self.live.prepare_invoke();
            call.arg(now);
            for k in chunk {
                call.key(k);
            }
            let keys: Vec<String> = self.conn.with(|c| call.invoke(c))?;
            live.extend(keys);
        }
        Ok(live
            .iter()
            .filter_map(|k| self.gate_key(k))
            .filter(|k| k.starts_with(prefix))
            .map(str::to_owned)
            .collect())
    }
}

/// `text` with Redis's glob characters escaped, for a `MATCH` pattern.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_server_share_a_tag_and_others_do_not() {
        let a = format!(
            "{}0123456789abcdef0123456789abcdef/1",
            mrtr_gate_host::core::ID_PREFIX
        );
        let b = format!(
            "{}0123456789abcdef0123456789abcdef/\"r\"",
            mrtr_gate_host::core::ID_PREFIX
        );
        assert_eq!(hash_tag(&a), "0123456789abcdef0123456789abcdef");
        assert_eq!(hash_tag(&a), hash_tag(&b));
        assert_eq!(hash_tag("other/key"), "_");
        assert_eq!(
            hash_tag(&format!("{}{{x}}/1", mrtr_gate_host::core::ID_PREFIX)),
            "_"
        );
        assert_eq!(hash_tag(mrtr_gate_host::core::ID_PREFIX), "_");
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]{d}\\"), "a\\*b\\?\\[c\\]\\{d\\}\\\\");
    }
}
