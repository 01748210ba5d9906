//! The journal on Redis ([`mrtr_gate_core::host::journal`], WIT `journal`): a store write and
//! the audit line that records it in one script, so one round trip and one `WAIT` where the
//! two calls take two of each.
//!
//! The script runs the append and the write batch exactly as their own scripts do
//! ([`APPEND_FN`], [`WRITE_FN`]), in the order asked, the second only when the first allows
//! it (the line written and read back as sent; the first write applied). It fuses only what
//! it can keep in one step: a store and a trail on the same Redis (the same URL, the same
//! confirmation rule) and, on a Cluster, writes whose keys share the slot of the line's shard
//! (the gate's always do: a binding's keys carry its server's key part as their hash tag, and
//! its events go to the shard of that name). Anything else is made as the two calls
//! ([`sequential`]), with the same answers.
//!
//! A script is replicated whole, so a promoted replica holds both steps or neither. The reply
//! confirmed by the `WAIT` or not, the call is `err` when the `WAIT` falls short: the gate then
//! takes it as its first step's failure and denies (docs/redis.md, "The journal").

use crate::audit::{APPEND_FN, RedisAudit};
use crate::connection::write_script;
use crate::storage::{RedisStorage, WRITE_FN, applied_versions, hash_tag};
use mrtr_gate_core::host::{
    AppendOutcome, Audit, AuditEntry, HostError, Journaled, Order, Write, sequential,
};
use redis::{Script, Value};
use std::sync::LazyLock;

// KEYS: the shard's stream and head, then the writes' keys as WRITE_FN reads them. ARGV[1]:
// "a" (append, then write) or "w" (write, then append); ARGV[2..5]: the entry as APPEND_FN
// takes it; then the writes' arguments as WRITE_FN reads them. Returns {append reply or
// false, versions applied or false[, the write's error]}.
const JOURNAL_CALL: &str = r"
local n = (#KEYS - 2) / 3
if ARGV[1] == 'a' then
  local r = append(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
  if r[1] ~= 1 or r[2] ~= ARGV[5] then return {r, false} end
  local out, err = write(2, 6, n)
  if err then return {r, false, err} end
  return {r, out}
end
local out, err = write(2, 6, n)
if err then return redis.error_reply(err) end
if #out == 0 then return {false, out} end
return {append(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5]), out}
";

static JOURNAL: LazyLock<(String, Script)> = LazyLock::new(|| {
    let source = format!("{APPEND_FN}{WRITE_FN}{JOURNAL_CALL}");
    let script = Script::new(&source);
    (source, script)
});

/// [`mrtr_gate_core::host::Storage::journal`] for `store`: one script when `audit` is a Redis
/// trail it can fuse with, the two calls otherwise.
pub(crate) fn journal(
    store: &RedisStorage,
    audit: &dyn Audit,
    order: Order,
    entry: &AuditEntry,
    writes: &[Write<'_>],
) -> Result<Journaled, HostError> {
    let sink = audit
        .as_any()
        .and_then(|a| a.downcast_ref::<RedisAudit>())
        .filter(|sink| fuses(store, sink, entry, writes));
    let Some(sink) = sink.filter(|_| RedisAudit::check(entry).is_ok()) else {
        return sequential(store, audit, order, entry, writes);
    };
    if let Some(head) = sink.seen_past(entry) {
        return match order {
            // Refused without a round trip, as the append alone is: nothing written.
            Order::AppendThenWrite => Ok(Journaled {
                applied: Vec::new(),
                appended: Some(AppendOutcome::head_moved(head)),
                failed: None,
            }),
            // The writes alone; the append is answered from what was seen.
            Order::WriteThenAppend => sequential(store, audit, order, entry, writes),
        };
    }
    sink.list(&entry.shard)?;
    let (write_keys, write_args, tags) = store.write_parts(writes);
    let mut keys = sink.keys_of(&entry.shard).to_vec();
    keys.extend(write_keys);
    let first = match order {
        Order::AppendThenWrite => "a",
        Order::WriteThenAppend => "w",
    };
    let mut args = vec![first.to_owned()];
    args.extend(RedisAudit::append_args(entry));
    args.extend(write_args);
    let (source, script) = &*JOURNAL;
    let reply = store.with_tags(&tags, |before| {
        write_script(
            &store.conn,
            &store.options,
            before,
            (script, source),
            &keys,
            &args,
        )
    })?;
    let malformed = || HostError::new("redis returned a malformed journal reply");
    let parts: Vec<Value> = redis::from_redis_value(reply).map_err(|_| malformed())?;
    let appended = match parts.first() {
        None | Some(Value::Nil) => None,
        Some(v) => Some(sink.outcome(entry, v.clone())?),
    };
    let applied = match parts.get(1) {
        None | Some(Value::Nil) => Vec::new(),
        Some(v) => applied_versions(v.clone(), writes.len())?,
    };
    let failed = match parts.get(2) {
        None | Some(Value::Nil) => None,
        Some(Value::BulkString(b)) => Some(HostError::new(format!(
            "redis: {}",
            String::from_utf8_lossy(b)
        ))),
        Some(_) => return Err(malformed()),
    };
    // The order's own shape: an append-first call always offered its line; a write-first
    // call offered it exactly when its first write applied.
    let shaped = match order {
        Order::AppendThenWrite => appended.is_some(),
        Order::WriteThenAppend => appended.is_some() != applied.is_empty() && failed.is_none(),
    };
    if !shaped {
        return Err(malformed());
    }
    Ok(Journaled {
        applied,
        appended,
        failed,
    })
}

/// Whether one script can make both steps: the same Redis, the same confirmation rule, and on
/// a Cluster every write in the slot of the line's shard.
fn fuses(
    store: &RedisStorage,
    sink: &RedisAudit,
    entry: &AuditEntry,
    writes: &[Write<'_>],
) -> bool {
    let (url, options) = sink.opened_as();
    url == store.url
        && *options == store.options
        && !writes.is_empty()
        && (!store.conn.is_cluster() || writes.iter().all(|w| hash_tag(w.key) == entry.shard))
}
