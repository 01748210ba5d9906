// The audit trail under a host key (docs/host-keys.md, "The keyed trail"), as the Rust host's
// host-harness/host/src/host_keys/anchor.rs, byte for byte (tests/host_keys/trail.* pins it).
// Exported by host-keys.js (Node only: node:fs, and the keys' node:crypto HMAC).
//
// - A link is one JSON line in the links file, written (and synced) before the line it covers
//   is appended: {"event_sha256":H,"key_id":K,"mac":M,"seq":N}, M = HMAC-SHA256(key;
//   "mrtr-gate/audit-link/v1", N, H). H names the line before it (prev_sha256), so a link
//   covers the chain up to its line: a line appended without the key has no link that verifies.
// - The anchor is the same shape over "mrtr-gate/audit-anchor/v1", the whole file, replaced
//   after every append that was written: the head the trail had when the gate last wrote.
//
// Every MAC input is length-prefixed (8 bytes, big-endian): the context, N as 8 bytes
// big-endian, H as its 64 hex digits in ASCII.

import { createHash } from "node:crypto";
import { closeSync, fdatasyncSync, openSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { join, parse } from "node:path";
import { HostError } from "./index.js";

const ANCHOR_CONTEXT = Buffer.from("mrtr-gate/audit-anchor/v1");
const LINK_CONTEXT = Buffer.from("mrtr-gate/audit-link/v1");
const GENESIS = "0".repeat(64);
const U64_MAX = (1n << 64n) - 1n;
const LOWER_HEX_BYTES = /^(?:[0-9a-f]{2})*$/;

const u64be = (n) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(n);
  return b;
};

const sha256 = (line) => createHash("sha256").update(line, "utf8").digest("hex");

/** `{"event_sha256":H,"key_id":K,"mac":M,"seq":N}` (keys in canonical order), MAC'd with the current key in `context`. */
function keyedHead(keys, context, seq, eventSha256) {
  const id = keys.currentId;
  const mac = keys.mac(id, [context, u64be(seq), Buffer.from(eventSha256, "utf8")]);
  if (mac === null) throw new HostError("the current host key is missing");
  return `{"event_sha256":"${eventSha256}","key_id":"${id}","mac":"${mac.toString("hex")}","seq":${seq}}`;
}

/**
 * An audit sink under a host key: each line keyed by a link written beside the trail (in
 * `links`), the head anchored apart from it (in `checkpoint`, kept where the trail's writer
 * cannot reach), with `keys`' current key. Wraps any audit sink of this package (`MemoryAudit`,
 * or yours). The gate calls it synchronously, and one call runs link, append and anchor to the
 * end: within a process the anchor only moves forward.
 */
export class AnchoredAudit {
  #inner;
  #keys;
  #checkpoint;
  #links;
  constructor(inner, keys, checkpoint, links) {
    this.#inner = inner;
    this.#keys = keys;
    this.#checkpoint = String(checkpoint);
    this.#links = String(links);
  }
  #link(entry) {
    const line = Buffer.from(`${keyedHead(this.#keys, LINK_CONTEXT, BigInt(entry.seq), entry.eventSha256)}\n`, "utf8");
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
    const text = `${keyedHead(this.#keys, ANCHOR_CONTEXT, BigInt(entry.seq), entry.eventSha256)}\n`;
    // Written aside and renamed over: the checkpoint is never half there (the same aside name
    // as the Rust host's `with_extension("tmp")`).
    const { dir, name } = parse(this.#checkpoint);
    const tmp = join(dir, `${name}.tmp`);
    try {
      writeFileSync(tmp, text);
      renameSync(tmp, this.#checkpoint);
    } catch {
      throw new HostError("the audit anchor could not be written");
    }
  }
  append(entry) {
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

/** A JSON integer as a u64 (bigint), or null: a safe integer only, which every trail's `seq` is. */
const u64Of = (v) => (Number.isSafeInteger(v) && v >= 0 && BigInt(v) <= U64_MAX ? BigInt(v) : null);

const parseJson = (text) => {
  try {
    const v = JSON.parse(text);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
};

/** `{ seq, digest, id, mac }` of a link or anchor line, or null. */
function parseKeyedHead(text) {
  const v = parseJson(text);
  if (v === null) return null;
  const seq = u64Of(v.seq);
  const { event_sha256: digest, key_id: id, mac } = v;
  if (seq === null || typeof digest !== "string" || typeof id !== "string" || typeof mac !== "string") return null;
  // Only the spelling a host writes: lowercase hex, whole bytes.
  if (!LOWER_HEX_BYTES.test(mac)) return null;
  return { seq, digest, id, mac: Buffer.from(mac, "hex") };
}

const verifies = (keys, context, h) =>
  keys.verify(h.id, [context, u64be(h.seq), Buffer.from(h.digest, "utf8")], h.mac);

/** The number of events (bigint) of a chain that verifies without a key, or null (the core's `verify_chain`). */
function verifyChain(trail) {
  let seq = 0n;
  let sha = GENESIS;
  for (const line of trail) {
    const v = parseJson(line);
    const next = v === null ? null : u64Of(v.seq);
    if (next === null || typeof v.prev_sha256 !== "string" || next !== seq + 1n || v.prev_sha256 !== sha) return null;
    seq = next;
    sha = sha256(line);
  }
  return seq;
}

/**
 * Check `trail` (JSON lines) against its `links` and the `checkpoint` text with `keys`. In
 * order: the anchor's MAC, the chain, a verifying link for every line, then where the trail
 * ends against the anchored head; the first that fails is the answer: `{ kind: "badAnchor" }`,
 * `{ kind: "brokenChain" }`, `{ kind: "unkeyed", seq }`, `{ kind: "truncated", events, anchored }`,
 * `{ kind: "diverged" }`, `{ kind: "extended", events, anchored }` or `{ kind: "intact", events }`
 * (numbers as bigint).
 */
export function verifyAnchor(trail, links, checkpoint, keys) {
  const anchor = parseKeyedHead(checkpoint.trimEnd());
  if (anchor === null || !verifies(keys, ANCHOR_CONTEXT, anchor)) return { kind: "badAnchor" };
  const trailLines = lines(trail);
  const events = verifyChain(trailLines);
  if (events === null) return { kind: "brokenChain" };
  const keyed = new Set();
  for (const text of lines(links)) {
    const link = parseKeyedHead(text);
    if (link !== null && verifies(keys, LINK_CONTEXT, link)) keyed.add(`${link.seq}/${link.digest}`);
  }
  for (const [i, line] of trailLines.entries()) {
    const seq = BigInt(i + 1);
    if (!keyed.has(`${seq}/${sha256(line)}`)) return { kind: "unkeyed", seq };
  }
  const { seq, digest } = anchor;
  if (events < seq) return { kind: "truncated", events, anchored: seq };
  if (seq > 0n && sha256(trailLines[Number(seq) - 1]) !== digest) return { kind: "diverged" };
  if (events > seq) return { kind: "extended", events, anchored: seq };
  return { kind: "intact", events };
}
