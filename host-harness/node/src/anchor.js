// The audit trail under a host key (docs/host-keys.md, "The keyed trail"), as the Rust host's
// host-harness/host/src/host_keys/anchor.rs, byte for byte (tests/host_keys/trail.* pins it).
// Exported by host-keys.js (Node only: node:fs, and the keys' node:crypto HMAC).
//
// - A link is one JSON line in the links file, written (and synced) before the line it covers
//   is appended: {"event_sha256":H,"key_id":K,"mac":M,"seq":N,"shard":S}, M = HMAC-SHA256(key;
//   "mrtr-gate/audit-link/v2", S, N, H). H names the line before it in its shard
//   (prev_sha256), so a link covers the shard's chain up to its line: a line appended without
//   the key has no link that verifies.
// - The anchor (checkpoint) is one line per shard, in shard order, the same shape over
//   "mrtr-gate/audit-anchor/v2": each shard's head when the gate last wrote to it. The whole
//   file is replaced after every append that was written.
// - A trail keyed before shards (audit v2/v3 lines, no `shard`) was keyed without one:
//   {"event_sha256":H,"key_id":K,"mac":M,"seq":N} over "mrtr-gate/audit-link/v1" and
//   "mrtr-gate/audit-anchor/v1" with (N, H). Those lines and that anchor still verify, as the
//   shard "".
//
// Every MAC input is length-prefixed (8 bytes, big-endian): the context, S in ASCII, N as 8
// bytes big-endian, H as its 64 hex digits in ASCII.

import { createHash } from "node:crypto";
import { closeSync, fdatasyncSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { join, parse } from "node:path";
import { HostError } from "./index.js";
import { shardOk } from "./hosts.js";
import { NotU64, parseTrailJson } from "./trail-json.js";

const ANCHOR_CONTEXT = Buffer.from("mrtr-gate/audit-anchor/v2");
const LINK_CONTEXT = Buffer.from("mrtr-gate/audit-link/v2");
// The contexts of a trail keyed before shards (no `shard` in the link or the anchor).
const ANCHOR_CONTEXT_V1 = Buffer.from("mrtr-gate/audit-anchor/v1");
const LINK_CONTEXT_V1 = Buffer.from("mrtr-gate/audit-link/v1");
const GENESIS = "0".repeat(64);
// The shard of the host's `anchor` lines, which record every other shard's head.
const ROOT_SHARD = "root";
const U64_MAX = (1n << 64n) - 1n;
const LOWER_HEX_BYTES = /^(?:[0-9a-f]{2})*$/;
const LINK = "link";
const ANCHOR = "anchor";

const u64be = (n) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(n);
  return b;
};

const sha256 = (line) => createHash("sha256").update(line, "utf8").digest("hex");

// Shards in the Rust host's order (a BTreeMap of Strings: by UTF-8 bytes, which is not
// JavaScript's UTF-16 order past the BMP).
const byBytes = (a, b) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));

/** The MAC input of a keyed head: (S, N, H) in the v2 context, or (N, H) in the v1 one (shard null: keyed before shards). */
function macParts(kind, shard, seq, digest) {
  const [n, h] = [u64be(seq), Buffer.from(digest, "utf8")];
  if (shard === null) return [kind === LINK ? LINK_CONTEXT_V1 : ANCHOR_CONTEXT_V1, n, h];
  return [kind === LINK ? LINK_CONTEXT : ANCHOR_CONTEXT, Buffer.from(shard, "utf8"), n, h];
}

/**
 * `{"event_sha256":H,"key_id":K,"mac":M,"seq":N,"shard":S}` (keys in canonical order), MAC'd
 * with the current key. `shard` passed `shardOk` (lowercase letters and digits: nothing to
 * escape).
 */
function keyedHead(keys, kind, shard, seq, eventSha256) {
  const id = keys.currentId;
  const mac = keys.mac(id, macParts(kind, shard, seq, eventSha256));
  if (mac === null) throw new HostError("the current host key is missing");
  return `{"event_sha256":"${eventSha256}","key_id":"${id}","mac":"${mac.toString("hex")}","seq":${seq},"shard":"${shard}"}`;
}

/** The text of `path`, or null: missing, unreadable, or not UTF-8 (as Rust's `read_to_string` fails). */
function readUtf8(path) {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(readFileSync(path));
  } catch {
    return null;
  }
}

/**
 * An audit sink under a host key: each line keyed by a link written beside the trail (in
 * `links`), each shard's head anchored apart from it (in `checkpoint`, kept where the trail's
 * writer cannot reach), with `keys`' current key. Wraps any audit sink of this package
 * (`MemoryAudit`, or yours). The checkpoint's lines that verify when it is made are kept, byte
 * for byte, for the shards it has not written to yet, a `v1` anchor (a trail keyed before
 * shards) among them as the shard "". The gate calls it synchronously, and one call runs
 * link, append and anchor to the end; a shard's anchor only moves forward.
 */
export class AnchoredAudit {
  #inner;
  #keys;
  #checkpoint;
  #links;
  // Each shard's anchor line as last written, by shard: `{ seq, line }`. A `v1` line (a trail
  // keyed before shards) is held under the shard "", which sorts first.
  #anchored = new Map();
  constructor(inner, keys, checkpoint, links) {
    this.#inner = inner;
    this.#keys = keys;
    this.#checkpoint = String(checkpoint);
    this.#links = String(links);
    // A process started again keeps the anchors of the shards it has not written to yet: the
    // file is rewritten whole, and would otherwise lose them at the first append. That holds
    // for a `v1` anchor too (a trail keyed before shards, its chain the shard ""): dropped, the
    // legacy chain would verify as `extended` once a sharded line went in. Each line is kept
    // as its original text: a `v1` MAC covers (N, H) without a shard, and no line this sink
    // writes could stand in for it.
    for (const line of lines(readUtf8(this.#checkpoint) ?? "")) {
      const head = parseKeyedHead(line);
      if (head === null || !verifies(keys, ANCHOR, head)) continue;
      this.#anchored.set(head.shard ?? "", { seq: head.seq, line });
    }
  }
  #link(entry) {
    const line = Buffer.from(`${keyedHead(this.#keys, LINK, entry.shard, BigInt(entry.seq), entry.eventSha256)}\n`, "utf8");
    // One write of one line, synced: the line it covers is never in the trail without it.
    let fd = null;
    try {
      fd = openSync(this.#links, "a");
      writeSync(fd, line);
      fdatasyncSync(fd);
    } catch {
      throw new HostError("the audit link could not be written");
    } finally {
      if (fd !== null) closeSync(fd);
    }
  }
  #anchor(entry) {
    const seq = BigInt(entry.seq);
    const before = this.#anchored.get(entry.shard);
    // A later line of the shard is anchored already (a checkpoint kept from before).
    if (before !== undefined && seq <= before.seq) return;
    this.#anchored.set(entry.shard, { seq, line: keyedHead(this.#keys, ANCHOR, entry.shard, seq, entry.eventSha256) });
    const text = [...this.#anchored.keys()].sort(byBytes).map((s) => `${this.#anchored.get(s).line}\n`).join("");
    // Written aside and renamed over: a reader never sees the checkpoint half written.
    const { dir, name } = parse(this.#checkpoint);
    const tmp = join(dir, `${name}.tmp`);
    try {
      writeFileSync(tmp, text);
      renameSync(tmp, this.#checkpoint);
    } catch {
      // Not anchored: the next append of the shard writes it again.
      if (before === undefined) this.#anchored.delete(entry.shard);
      else this.#anchored.set(entry.shard, before);
      throw new HostError("the audit anchor could not be written");
    }
  }
  append(entry) {
    // The shard goes into the link and the anchor as it is, and names the chain a verifier
    // files the line under: one the line does not carry is refused before anything is written.
    if (!shardOk(entry)) throw new HostError("the audit entry's shard is not a shard name its line carries");
    // The link first: an append the sink then refuses (its head moved) leaves a link to a line
    // that is nowhere in the trail, which matches nothing and is ignored.
    this.#link(entry);
    const outcome = this.#inner.append(entry);
    // An anchor that cannot be written is a failed append (the gate then denies).
    if (outcome?.written === true && typeof outcome.stored === "string") this.#anchor(entry);
    return outcome;
  }
}

/** The lines of `text` as the Rust host splits them (`str::lines`). */
function lines(text) {
  const parts = text.split("\n");
  if (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
  return parts.map((p) => (p.endsWith("\r") ? p.slice(0, -1) : p));
}

/** A JSON integer as a u64 (bigint), or null (serde_json's `as_u64`: see `parseTrailJson`). */
const u64Of = (v) => (typeof v === "bigint" && v <= U64_MAX ? v : null);

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof NotU64);

/** A line parsed as the Rust core parses it, when it is a JSON object; else null. */
const parseJson = (text) => {
  const v = parseTrailJson(text);
  return isObject(v) ? v : null;
};

/** `{ shard, seq, digest, id, mac }` of a link or anchor line (shard null: keyed before shards), or null. */
function parseKeyedHead(text) {
  const v = parseJson(text);
  if (v === null) return null;
  let shard = null;
  if (Object.hasOwn(v, "shard")) {
    if (typeof v.shard !== "string") return null;
    shard = v.shard;
  }
  const seq = u64Of(v.seq);
  const { event_sha256: digest, key_id: id, mac } = v;
  if (seq === null || typeof digest !== "string" || typeof id !== "string" || typeof mac !== "string") return null;
  // Only the spelling a host writes: lowercase hex, whole bytes.
  if (!LOWER_HEX_BYTES.test(mac)) return null;
  return { shard, seq, digest, id, mac: Buffer.from(mac, "hex") };
}

const verifies = (keys, kind, h) => keys.verify(h.id, macParts(kind, h.shard, h.seq, h.digest), h.mac);

/** A chain break at line `at` (0-based): `malformed`, `gap`, `broken`, `cut` or `rewritten`. */
const chainBreak = (kind, at) => ({ ok: false, kind, at });

/**
 * Verify a whole trail (JSON lines, oldest first) without a key, as the core's `verify_trail`:
 * each shard's lines form a chain from genesis in the order they appear (shards may
 * interleave; lines without `shard`, from before shards, are one chain under the shard `""`),
 * and every head a `root` line anchors is one its shard holds. Answers
 * `{ ok: true, lines, heads }` (`heads`: a Map of each shard's `{ seq, sha256 }`, numbers as
 * bigint) or the first break, `{ ok: false, kind, at }` (`at`: the line's index from 0):
 * `malformed` (no JSON object with `seq` and `prev_sha256`, an empty or non-string `shard`, or
 * a root line whose `heads` are not `{ shard: { seq, sha256 } }`, go back, anchor seq 0 or the
 * root itself), `gap` (not the next `seq` of its shard), `broken` (`prev_sha256` is not the
 * digest of its shard's line before), `cut` (a root line anchors a head its shard never
 * reaches) or `rewritten` (a root line anchors a line its shard holds with another digest).
 */
export function verifyTrail(trail) {
  // Each shard's line digests by seq (index seq - 1): the anchors are checked at the end.
  const shards = new Map();
  // [root line position, shard, seq, digest], and each shard's last anchored seq.
  const anchors = [];
  const anchored = new Map();
  let count = 0n;
  for (const [i, line] of (typeof trail === "string" ? lines(trail) : trail).entries()) {
    const v = parseJson(line);
    const seq = v === null ? null : u64Of(v.seq);
    if (seq === null || typeof v.prev_sha256 !== "string") return chainBreak("malformed", i);
    let shard = "";
    if (Object.hasOwn(v, "shard")) {
      if (typeof v.shard !== "string" || v.shard === "") return chainBreak("malformed", i);
      shard = v.shard;
    }
    if (!shards.has(shard)) shards.set(shard, []);
    const chain = shards.get(shard);
    const prev = chain.length > 0 ? chain[chain.length - 1] : GENESIS;
    if (seq !== BigInt(chain.length) + 1n) return chainBreak("gap", i);
    if (v.prev_sha256 !== prev) return chainBreak("broken", i);
    chain.push(sha256(line));
    if (shard === ROOT_SHARD) {
      if (!isObject(v.heads)) return chainBreak("malformed", i);
      // In the order Rust's serde_json map holds them (sorted by key), not JavaScript's.
      for (const s of Object.keys(v.heads).sort(byBytes)) {
        const head = v.heads[s];
        const at = isObject(head) ? u64Of(head.seq) : null;
        const sha = isObject(head) ? head.sha256 : undefined;
        if (at === null || typeof sha !== "string") return chainBreak("malformed", i);
        // An anchor never goes back: a root that does was not written by one host's schedule
        // from one sink's heads.
        const last = anchored.get(s) ?? 0n;
        if (at < last || s === ROOT_SHARD || at === 0n) return chainBreak("malformed", i);
        anchored.set(s, at);
        anchors.push([i, s, at, sha]);
      }
    }
    count += 1n;
  }
  for (const [i, shard, seq, sha] of anchors) {
    const held = shards.get(shard)?.[Number(seq - 1n)];
    if (held === undefined) return chainBreak("cut", i);
    if (held !== sha) return chainBreak("rewritten", i);
  }
  const heads = new Map();
  for (const s of [...shards.keys()].sort(byBytes)) {
    const chain = shards.get(s);
    if (chain.length > 0) heads.set(s, { seq: BigInt(chain.length), sha256: chain[chain.length - 1] });
  }
  return { ok: true, lines: count, heads };
}

/**
 * Check `trail` (JSON lines) against its `links` and the `checkpoint` text with `keys`. In
 * order: every anchor line's MAC (one per shard), the chains (`verifyTrail`), a verifying link
 * for every line, then where each shard ends against its anchored head (shards in order); the
 * first that fails is the answer: `{ kind: "badAnchor" }`, `{ kind: "brokenChain" }`,
 * `{ kind: "unkeyed", shard, seq }`, `{ kind: "truncated", shard, events, anchored }`,
 * `{ kind: "diverged", shard }`, `{ kind: "extended", shard, events, anchored }` or
 * `{ kind: "intact", events }` (numbers as bigint; `events` of a shard are its lines, of
 * `intact` the trail's; shard `""`: lines from before shards).
 */
export function verifyAnchor(trail, links, checkpoint, keys) {
  const anchors = new Map();
  for (const line of lines(checkpoint)) {
    const head = parseKeyedHead(line);
    if (head === null || !verifies(keys, ANCHOR, head)) return { kind: "badAnchor" };
    const shard = head.shard ?? "";
    if (anchors.has(shard)) return { kind: "badAnchor" };
    anchors.set(shard, { seq: head.seq, digest: head.digest });
  }
  if (anchors.size === 0) return { kind: "badAnchor" };
  const trailLines = lines(trail);
  const verified = verifyTrail(trailLines);
  if (!verified.ok) return { kind: "brokenChain" };
  const keyedAs = (shard, seq, digest) => JSON.stringify([shard, String(seq), digest]);
  const keyed = new Set();
  for (const text of lines(links)) {
    const link = parseKeyedHead(text);
    if (link !== null && verifies(keys, LINK, link)) keyed.add(keyedAs(link.shard ?? "", link.seq, link.digest));
  }
  // Each shard's line digests, by seq (the chains verified above: seq is the position).
  const digests = new Map();
  for (const line of trailLines) {
    const v = parseJson(line);
    const shard = typeof v.shard === "string" ? v.shard : "";
    const seq = u64Of(v.seq);
    const digest = sha256(line);
    if (!keyed.has(keyedAs(shard, seq, digest))) return { kind: "unkeyed", shard, seq };
    if (!digests.has(shard)) digests.set(shard, []);
    digests.get(shard).push(digest);
  }
  const shards = [...new Set([...anchors.keys(), ...verified.heads.keys()])].sort(byBytes);
  for (const shard of shards) {
    const events = verified.heads.get(shard)?.seq ?? 0n;
    const { seq: anchored, digest: head } = anchors.get(shard) ?? { seq: 0n, digest: "" };
    if (events < anchored) return { kind: "truncated", shard, events, anchored };
    if (anchored > 0n && digests.get(shard)?.[Number(anchored - 1n)] !== head) return { kind: "diverged", shard };
    if (events > anchored) return { kind: "extended", shard, events, anchored };
  }
  return { kind: "intact", events: verified.lines };
}
