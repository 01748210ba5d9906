// The sharded audit trail (audit v4, wit/gate.wit `audit`): MemoryAudit keeps one chain per
// shard, a gate serving two servers writes two chains that interleave, shardOk is the core's
// `shard_ok`, and verifyTrail finds what the core's `verify_trail` finds (its unit tests in
// guest/core/src/audit.rs, case for case, and the recorded trails of
// tests/audit/trail_vectors.json, break for break).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Gate } from "mrtr-gate";
import { CallbackConsent, GENESIS_SHA256, ManualClock, MemoryAudit, MemoryStorage, shardOk } from "mrtr-gate/hosts";
import { verifyTrail } from "mrtr-gate/host-keys";
import { PARAMS, SERVER, formRound } from "./support.js";

const sha = (line) => createHash("sha256").update(line, "utf8").digest("hex");
const OTHER = { origin: "https://other.example.com/mcp" };

/** An entry of `shard` after `head` (an entry, or null: genesis), its line built as the writer builds one. */
function next(shard, head, n) {
  const [seq, prev] = head === null ? [0n, GENESIS_SHA256] : [head.seq, head.eventSha256];
  const line = JSON.stringify({ event: "rejected", prev_sha256: prev, reason: null, round: n, schema: "mrtr-gate/audit/v4", seq: Number(seq + 1n), shard });
  return { shard, seq: seq + 1n, prevSha256: prev, eventSha256: sha(line), line };
}

/** The root's anchor line after `prev` (an entry or null), anchoring `heads` ([shard, entry]). */
function root(prev, heads, atMs) {
  const [seq, prevSha] = prev === null ? [0n, GENESIS_SHA256] : [prev.seq, prev.eventSha256];
  const anchored = Object.fromEntries([...heads].sort(([a], [b]) => (a < b ? -1 : 1)).map(([s, e]) => [s, { seq: Number(e.seq), sha256: e.eventSha256 }]));
  const line = JSON.stringify({ at_ms: atMs, event: "anchor", heads: anchored, prev_sha256: prevSha, schema: "mrtr-gate/audit/v4", seq: Number(seq + 1n), shard: "root" });
  return { shard: "root", seq: seq + 1n, prevSha256: prevSha, eventSha256: sha(line), line };
}

/** Two shards interleaved (a1 b1 a2 b2 a3) and a root anchoring both heads. */
function twoShards() {
  const a1 = next("aa", null, 1);
  const b1 = next("bb", null, 2);
  const a2 = next("aa", a1, 3);
  const b2 = next("bb", b1, 4);
  const a3 = next("aa", a2, 5);
  return [a1, b1, a2, b2, a3, root(null, [["aa", a3], ["bb", b2]], 6)];
}

const verify = (entries) => verifyTrail(entries.map((e) => e.line));
const broken = (kind, at) => ({ ok: false, kind, at });

test("MemoryAudit keeps one head per shard", () => {
  const audit = new MemoryAudit();
  const [a1, b1, a2, b2, a3] = twoShards();
  for (const e of [a1, b1, a2, b2]) assert.equal(audit.append(e).written, true);
  assert.deepEqual(audit.head("aa"), { seq: 2n, sha256: a2.eventSha256 });
  assert.deepEqual(audit.head("bb"), { seq: 2n, sha256: b2.eventSha256 });
  assert.deepEqual(audit.head("cc"), { seq: 0n, sha256: GENESIS_SHA256 });
  // A refusal names the head of the entry's own shard, not the newest line's.
  assert.deepEqual(audit.append(a2), { written: false, stored: null, headSeq: 2n, headSha256: a2.eventSha256 });
  assert.deepEqual(audit.append(next("bb", null, 9)), { written: false, stored: null, headSeq: 2n, headSha256: b2.eventSha256 });
  // A shard's first entry goes on genesis whatever the other shards hold.
  const c1 = next("cc", null, 7);
  assert.deepEqual(audit.append(c1), { written: true, stored: c1.line, headSeq: 1n, headSha256: c1.eventSha256 });
  assert.deepEqual(audit.append(a3), { written: true, stored: a3.line, headSeq: 3n, headSha256: a3.eventSha256 });
  assert.deepEqual(audit.lines, [a1, b1, a2, b2, c1, a3].map((e) => e.line));

  // The window drops old lines, never a shard's head.
  const windowed = new MemoryAudit(1);
  for (const e of [a1, b1, a2]) assert.equal(windowed.append(e).written, true);
  assert.deepEqual(windowed.lines, [a2.line]);
  assert.deepEqual(windowed.head("bb"), { seq: 1n, sha256: b1.eventSha256 });
  assert.equal(windowed.append(b2).written, true);
});

test("a gate serving two servers writes one chain per server, each from 1, interleaved", async () => {
  const clock = new ManualClock();
  const audit = new MemoryAudit();
  const gate = await Gate.create({ clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit });
  for (const [id, server] of [[1, SERVER], [2, OTHER], [3, SERVER]]) {
    await gate.register({ requestId: id, server, user: "u", tenant: "t", method: "tools/call", params: PARAMS });
    assert.equal((await gate.acceptResponse(server, formRound(id))).kind, "input_required");
  }
  const events = audit.lines.map((l) => JSON.parse(l));
  const shards = [...new Set(events.map((e) => e.shard))];
  assert.equal(shards.length, 2);
  for (const s of shards) assert.match(s, /^[0-9a-f]{32}$/);
  for (const s of shards) {
    const mine = events.filter((e) => e.shard === s);
    assert.deepEqual(mine.map((e) => e.seq), mine.map((_, i) => i + 1), s);
  }
  // Interleaved: the second server's lines sit between the first's.
  const first = events.map((e) => e.shard === events[0].shard);
  assert.ok(first.indexOf(false) < first.lastIndexOf(true));
  const verified = verifyTrail(audit.lines);
  assert.equal(verified.ok, true);
  assert.equal(verified.lines, BigInt(events.length));
  for (const s of shards) assert.deepEqual(verified.heads.get(s), audit.head(s));
});

test("shardOk takes only a shard a sink can key on that the line names", () => {
  const e = next("0123abcd", null, 1);
  assert.equal(shardOk(e), true);
  assert.equal(shardOk(root(null, [["0123abcd", e]], 1)), true);
  assert.equal(shardOk({ ...next("a".repeat(64), null, 1) }), true);
  for (const bad of ["", "AB", "a}b", "a:b", "a".repeat(65), "0123abc", undefined, 7]) {
    assert.equal(shardOk({ ...e, shard: bad }), false, String(bad));
  }
  // The name inside another field's string does not count.
  const inside = next("aa", null, 1);
  const line = inside.line.replace('"reason":null', '"reason":"\\"shard\\":\\"bb\\""');
  assert.ok(line.includes('shard\\":\\"bb'), line);
  assert.equal(shardOk({ ...inside, shard: "bb", line }), false);
  // A nested key of that name (a form input called `shard`) is not the line's shard: the
  // verifier files the line under its top-level `shard`, `aa`.
  const nested = JSON.stringify({ ...JSON.parse(inside.line), input_kinds: { shard: "form" } });
  assert.ok(nested.includes('"input_kinds":{"shard":"form"}') && nested.includes('"shard":"aa"'), nested);
  assert.equal(shardOk({ ...inside, shard: "form", line: nested, eventSha256: sha(nested) }), false);
  assert.equal(shardOk({ ...inside, line: nested, eventSha256: sha(nested) }), true);
  // A line that does not parse names no shard, though it holds the key and the name.
  const torn = inside.line.slice(0, -1);
  assert.ok(torn.includes('"shard":"aa"'), torn);
  assert.equal(shardOk({ ...inside, line: torn, eventSha256: sha(torn) }), false);
  assert.equal(shardOk({ ...inside, line: undefined }), false);
});

test("verifyTrail: each shard is its own chain and the root anchors their heads", () => {
  const trail = twoShards();
  const [, , , b2, a3, r] = trail;
  assert.deepEqual(verify(trail), {
    ok: true,
    lines: 6n,
    heads: new Map([["aa", { seq: 3n, sha256: a3.eventSha256 }], ["bb", { seq: 2n, sha256: b2.eventSha256 }], ["root", { seq: 1n, sha256: r.eventSha256 }]]),
  });
  // Shards may come one after the other (a sharded store read shard by shard).
  const byShard = [...trail].sort((x, y) => (x.shard < y.shard ? -1 : x.shard > y.shard ? 1 : 0));
  assert.equal(verify(byShard).lines, 6n);
  // The text of a trail, as a file holds it.
  assert.equal(verifyTrail(trail.map((e) => `${e.line}\n`).join("")).lines, 6n);
});

test("verifyTrail: a shard cut below its anchor is cut", () => {
  const trail = twoShards();
  trail.splice(4, 1); // a3, the head of `aa` the root anchors
  assert.deepEqual(verify(trail), broken("cut", 4));
  assert.deepEqual(verify(twoShards().filter((e) => e.shard !== "bb")), broken("cut", 3));
});

test("verifyTrail: a shard rewritten and rechained is rewritten", () => {
  const trail = twoShards();
  trail[4] = next("aa", trail[2], 99);
  assert.deepEqual(verify(trail), broken("rewritten", 5));
});

test("verifyTrail: a shard reordered, or a line moved to another shard, breaks its chain", () => {
  const swapped = twoShards();
  [swapped[0], swapped[2]] = [swapped[2], swapped[0]];
  assert.deepEqual(verify(swapped), broken("gap", 0));
  const moved = twoShards();
  moved[3] = { ...moved[3], line: moved[3].line.replace('"shard":"bb"', '"shard":"aa"') };
  assert.deepEqual(verify(moved), broken("gap", 3));
  const relinked = twoShards();
  relinked[2] = { ...relinked[2], line: relinked[2].line.replace(relinked[0].eventSha256, relinked[1].eventSha256) };
  assert.deepEqual(verify(relinked), broken("broken", 2));
});

test("verifyTrail: a root that goes back, anchors seq 0 or the root, and a shard not named right, are malformed", () => {
  const trail = twoShards();
  const back = root(trail[5], [["aa", trail[2]]], 7);
  assert.deepEqual(verify([...trail, back]), broken("malformed", 6));
  const zero = root(null, [["aa", { seq: 0n, eventSha256: GENESIS_SHA256 }]], 7);
  assert.deepEqual(verify([...trail.slice(0, 5), zero]), broken("malformed", 5));
  const itself = root(trail[5], [["root", trail[5]]], 7);
  assert.deepEqual(verify([...trail, itself]), broken("malformed", 6));
  const noHeads = { ...trail[5], line: trail[5].line.replace(/"heads":\{.*?\}\},/, '"heads":[],') };
  assert.ok(noHeads.line.includes('"heads":[]'), noHeads.line);
  assert.deepEqual(verify([...trail.slice(0, 5), noHeads]), broken("malformed", 5));
  for (const shard of ['""', "null", "7"]) {
    const t = twoShards();
    t[1] = { ...t[1], line: t[1].line.replace('"shard":"bb"', `"shard":${shard}`) };
    assert.deepEqual(verify(t), broken("malformed", 1), shard);
  }
  assert.deepEqual(verifyTrail(["{}"]), broken("malformed", 0));
  assert.deepEqual(verifyTrail(["[1]"]), broken("malformed", 0));
  assert.deepEqual(verifyTrail(["not json"]), broken("malformed", 0));
});

test("verifyTrail: lines before the sharded format are one chain of their own", () => {
  const old = [];
  let prev = GENESIS_SHA256;
  for (const n of [1, 2]) {
    const line = JSON.stringify({ event: "received", prev_sha256: prev, schema: "mrtr-gate/audit/v3", seq: n });
    prev = sha(line);
    old.push(line);
  }
  const verified = verifyTrail([...old, ...twoShards().map((e) => e.line)]);
  assert.equal(verified.lines, 8n);
  assert.deepEqual(verified.heads.get(""), { seq: 2n, sha256: prev });
});

test("verifyTrail finds in every recorded trail what the Rust core finds (tests/audit/trail_vectors.json)", () => {
  const vectors = JSON.parse(readFileSync(new URL("../../../tests/audit/trail_vectors.json", import.meta.url), "utf8"));
  assert.ok(vectors.length >= 40);
  for (const { name, lines, expect } of vectors) {
    const found = verifyTrail(lines);
    if (expect.break !== undefined) {
      assert.deepEqual(found, broken(expect.break, expect.at), name);
    } else {
      assert.equal(found.ok, true, name);
      assert.equal(found.lines, BigInt(expect.lines), name);
      const heads = Object.fromEntries([...found.heads].map(([s, h]) => [s, { seq: String(h.seq), sha256: h.sha256 }]));
      assert.deepEqual(heads, expect.heads, name);
    }
  }
});

test("shardOk reads a line as verifyTrail does: a line the Rust core refuses names no shard", () => {
  const vectors = JSON.parse(readFileSync(new URL("../../../tests/audit/trail_vectors.json", import.meta.url), "utf8"));
  let checked = 0;
  for (const { name, lines, shard_ok_as_aa: taken } of vectors) {
    if (taken === undefined) continue;
    const entry = { shard: "aa", seq: 1n, prevSha256: GENESIS_SHA256, eventSha256: sha(lines[0]), line: lines[0] };
    assert.equal(shardOk(entry), taken, name);
    checked += 1;
  }
  assert.ok(checked >= 30);
});
