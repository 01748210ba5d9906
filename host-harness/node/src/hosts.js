// Reference host services for the gate (the four WIT imports, in JavaScript): a wall clock and
// a manual one, storage in memory (TTL, compare-and-swap, versions never reused), an audit sink
// in memory (one chain per shard), and consent from a decision the page or the user already
// made. Versions and audit sequence numbers are bigints (WIT `u64`). A service reports a
// failure by throwing `HostError`; the gate denies. The in-memory services inject the corpus's
// faults (docs/corpus.md) through their `fault` fields.

import { HostError } from "./index.js";
import { responsesSha256 } from "./canonical.js";
import { parseTrailJson } from "./trail-json.js";

export const GENESIS_SHA256 = "0".repeat(64);

export class SystemClock {
  nowMs() {
    return Date.now();
  }
}

export class ManualClock {
  constructor(startMs = 1_700_000_000_000) {
    this.now = startMs;
  }
  nowMs() {
    return this.now;
  }
  advance(ms) {
    this.now += ms;
  }
}

// Order of the time index: by deadline, then by key.
const before = (a, b) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
// The first position in the sorted `index` whose entry is not before `entry`
// (`strictly`: not before and not equal).
function search(index, entry, strictly = false) {
  let lo = 0;
  let hi = index.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const e = index[mid];
    const left = strictly ? !before(entry, e) : before(e, entry);
    if (left) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class MemoryStorage {
  #slots = new Map();
  // Every key in #slots as [deadline, key], sorted: listDue visits only what is due.
  #due = [];
  #next = 1n;
  constructor(clock = new SystemClock()) {
    this.clock = clock;
    /** `"fail"`, `"lose_cas"`, `"fail_deletes"` or null (fault injection). */
    this.fault = null;
    /** Writes that would apply still let through before one loses (null: none). */
    this.loseCasAfter = null;
  }
  get size() {
    return this.#slots.size;
  }
  #check() {
    if (this.fault === "fail") throw new HostError("storage unavailable (injected)");
  }
  #live(key, now) {
    const s = this.#slots.get(key);
    return s && s.expiresAt > now ? s : undefined;
  }
  /** `keys`: `{ key, have }`; a key still at the version `have` comes back with an empty value. */
  read(keys) {
    this.#check();
    const now = this.clock.nowMs();
    return keys.map(({ key, have }) => {
      const s = this.#live(key, now);
      if (!s) return null;
      // The reader holds this version already: the value stays here.
      return { version: s.version, value: s.version === BigInt(have ?? 0) ? "" : s.value };
    });
  }
  write(writes) {
    this.#check();
    const now = this.clock.nowMs();
    const applied = [];
    for (const w of writes) {
      const current = this.#live(w.key, now)?.version ?? 0n;
      if (current !== BigInt(w.expected) || this.fault === "lose_cas") break;
      if (this.loseCasAfter !== null) {
        if (this.loseCasAfter === 0) {
          this.loseCasAfter = null;
          break;
        }
        this.loseCasAfter -= 1;
      }
      if (w.value === null || w.value === undefined) {
        if (this.fault === "fail_deletes") throw new HostError("storage delete failed (injected)");
        this.#unindex(w.key);
        this.#slots.delete(w.key);
        applied.push(0n);
      } else {
        const version = this.#next++;
        const expiresAt = now + Number(w.ttlMs);
        this.#unindex(w.key);
        this.#slots.set(w.key, { value: w.value, version, expiresAt });
        const entry = [expiresAt, w.key];
        this.#due.splice(search(this.#due, entry), 0, entry);
        applied.push(version);
      }
    }
    return applied;
  }
  #unindex(key) {
    const s = this.#slots.get(key);
    if (!s) return;
    const i = search(this.#due, [s.expiresAt, key]);
    const e = this.#due[i];
    if (e && e[0] === s.expiresAt && e[1] === key) this.#due.splice(i, 1);
  }
  /**
   * One page of the live keys whose TTL deadline (write time + `ttlMs`, by this store's
   * clock) is at or before `dueByMs`: at most `limit` keys, in deadline order, and the
   * cursor of the next page (`next`: null when done). The contract: `storage.list-due` in
   * wit/gate.wit.
   */
  listDue(dueByMs, cursor, limit) {
    this.#check();
    const max = Number(limit);
    if (!Number.isInteger(max) || max < 1) throw new HostError("list-due limit is below 1");
    let after = null;
    if (cursor !== null && cursor !== undefined) {
      const m = typeof cursor === "string" ? /^([0-9]+):/.exec(cursor) : null;
      if (!m) throw new HostError("list-due cursor not made by this store");
      after = [Number(m[1]), cursor.slice(m[0].length)];
    }
    const dueBy = Number(dueByMs);
    const now = this.clock.nowMs();
    // What is past its TTL is gone: the front of the index, nothing else.
    const dead = search(this.#due, [now + 1, ""]);
    for (const [, key] of this.#due.slice(0, dead)) this.#slots.delete(key);
    this.#due.splice(0, dead);
    let i = after === null ? 0 : search(this.#due, after, true);
    const keys = [];
    while (i < this.#due.length && this.#due[i][0] <= dueBy && keys.length < max) {
      keys.push(this.#due[i][1]);
      i += 1;
    }
    const more = i < this.#due.length && this.#due[i][0] <= dueBy;
    const last = this.#due[i - 1];
    return { keys, next: more && keys.length > 0 ? `${last[0]}:${last[1]}` : null };
  }
  /** The live keys starting with `prefix` (for tests that look inside the store). */
  liveKeys(prefix = "") {
    const now = this.clock.nowMs();
    return [...this.#slots.keys()].filter((k) => k.startsWith(prefix) && this.#live(k, now)).sort();
  }
}

const GENESIS_HEAD = Object.freeze({ seq: 0n, sha256: GENESIS_SHA256 });

// A shard a sink can key on: a server's key part (32 lowercase hex digits) or `root`.
const SHARD_NAME = /^[0-9a-z]{1,64}$/;

/**
 * Whether a durable sink may take `entry` on its shard (the core's `shard_ok`): the shard is a
 * name a sink can key on (1 to 64 lowercase letters and digits) and the line's top-level
 * `shard`, the line parsed as `verifyTrail` parses it (`parseTrailJson`), is that name. A sink that
 * filed a line under another shard than the line names would hold a trail that no longer
 * verifies, so a durable sink refuses (throws) such an entry.
 */
export function shardOk(entry) {
  const shard = entry?.shard;
  const line = entry?.line;
  if (typeof shard !== "string" || typeof line !== "string" || !SHARD_NAME.test(shard)) return false;
  // Parsed, not searched: the verifier files a line by its top-level `shard` alone, and a
  // nested key of that name (a form input called `shard`, inside `input_kinds`) would pass a
  // search for `"shard":"` while the line is filed elsewhere. A line that does not parse names
  // no shard.
  const v = parseTrailJson(line);
  return v !== null && typeof v === "object" && !Array.isArray(v) && Object.hasOwn(v, "shard") && v.shard === shard;
}

/**
 * An audit sink in memory with one chain per shard (the WIT's `audit`): an entry is written
 * only on its shard's head, and an outcome names that shard's head. `lines` holds every
 * shard's lines in the order written.
 */
export class MemoryAudit {
  #lines = [];
  #heads = new Map();
  /** @param window keep only the newest `window` lines (benchmarks); null keeps all. */
  constructor(window = null) {
    this.window = window;
    /** `"fail_append"`, `"corrupt_readback"`, `"lose_writes"`, `"fail_readback"` or null. */
    this.fault = null;
  }
  get lines() {
    return [...this.#lines];
  }
  /** The head of `shard`: `{ seq, sha256 }` of its last line (`0n` and 64 zeros when it has none). */
  head(shard) {
    return { ...(this.#heads.get(shard) ?? GENESIS_HEAD) };
  }
  append(entry) {
    if (this.fault === "fail_append") throw new HostError("audit sink unavailable (injected)");
    const { seq, sha256 } = this.#heads.get(entry.shard) ?? GENESIS_HEAD;
    if (entry.seq !== seq + 1n || entry.prevSha256 !== sha256) {
      return { written: false, stored: null, headSeq: seq, headSha256: sha256 };
    }
    this.#lines.push(entry.line);
    // The window drops lines, never heads: a shard's chain goes on from its last line.
    if (this.window !== null && this.#lines.length > this.window) this.#lines.shift();
    this.#heads.set(entry.shard, { seq: entry.seq, sha256: entry.eventSha256 });
    let stored = this.#lines[this.#lines.length - 1];
    if (this.fault === "lose_writes" || this.fault === "fail_readback") stored = null;
    else if (this.fault === "corrupt_readback") stored = entry.line.replace('"event"', '"evnt"');
    return { written: true, stored, headSeq: entry.seq, headSha256: entry.eventSha256 };
  }
}

/**
 * Consent from decisions already made (a dialog the host showed, answered before
 * `buildRetry`): `await decideFor(verdict, responses, granted)` records the user's decision for
 * the round `verdict` showed and the answers the host will send (the package digests them as
 * the gate does); the gate's `request-consent` then finds exactly that decision, once (the
 * WIT's "find the decision the user already made"). A prompt nobody decided on is a host
 * error: the gate denies as `consent_unavailable`. `method` says how the decision was made
 * (`"user-at-screen"` unless given: see `CONSENT_METHODS`); the trail records it.
 * `decide(viewSha256, responsesSha256, granted)` is the same with digests the caller made.
 */
export class DecidedConsent {
  #decisions = new Map();
  #count = 0;
  decide(viewSha256, responsesSha256, granted, method = "user-at-screen") {
    if (!CONSENT_METHODS.includes(method)) throw new TypeError(`unknown consent method ${JSON.stringify(method)}`);
    this.#count += 1;
    const receiptId = `consent-${this.#count}`;
    this.#decisions.set(`${viewSha256}/${responsesSha256}`, { receiptId, granted: granted === true, method });
    return receiptId;
  }
  async decideFor(verdict, responses, granted, method = "user-at-screen") {
    if (typeof verdict?.viewSha256 !== "string") throw new TypeError("`verdict` must be the input_required verdict shown");
    return this.decide(verdict.viewSha256, await responsesSha256(responses), granted, method);
  }
  requestConsent(prompt) {
    const key = `${prompt.viewSha256}/${prompt.responsesSha256}`;
    const d = this.#decisions.get(key);
    if (!d) throw new HostError("no decision was made for this view and these answers");
    this.#decisions.delete(key);
    return {
      receiptId: d.receiptId,
      decision: d.granted ? "granted" : "refused",
      method: d.method,
      viewSha256: prompt.viewSha256,
      responsesSha256: prompt.responsesSha256,
    };
  }
}

/**
 * How a consent decision was made, as the WIT's `consent-method` spells it: a person at a
 * screen the host rendered, answers preset before the round was seen, another client's UI,
 * or an automatic policy hook.
 */
export const CONSENT_METHODS = Object.freeze(["user-at-screen", "preset-answers", "delegated-to-client", "policy-hook"]);

/**
 * Consent from a synchronous callback `(prompt) => boolean` (a terminal, a test). `method` says
 * how the callback decides (`"user-at-screen"` unless given); a callback that answers without
 * showing anyone the prompt must say so (`"preset-answers"` or `"policy-hook"`).
 */
export class CallbackConsent {
  #count = 0;
  constructor(ask, method = "user-at-screen") {
    if (!CONSENT_METHODS.includes(method)) throw new TypeError(`unknown consent method ${JSON.stringify(method)}`);
    this.ask = ask;
    this.method = method;
  }
  requestConsent(prompt) {
    const granted = this.ask(prompt) === true;
    this.#count += 1;
    return {
      receiptId: `consent-${this.#count}`,
      decision: granted ? "granted" : "refused",
      method: this.method,
      viewSha256: prompt.viewSha256,
      responsesSha256: prompt.responsesSha256,
    };
  }
}
