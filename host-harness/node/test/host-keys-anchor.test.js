// The keyed trail (AnchoredAudit, verifyAnchor of src/host-keys.js) against the Rust host's,
// byte for byte: the trail recorded from a Rust gate round under its AnchoredAudit
// (tests/host_keys/trail.*, by tests/e2e/anchored_trail.rs) verifies intact here, and this
// package keys its lines to the very links and anchor Rust wrote (so the Rust verifier accepts
// what this package writes); a trail keyed before shards (legacy_trail.*) still verifies. Then
// rounds through this package's gate, the tampering the anchor answers (a cut tail, lines past
// the anchor, a line appended without the key), and each shard anchored on its own.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Gate, HostError } from "mrtr-gate";
import { CallbackConsent, ManualClock, MemoryAudit, MemoryStorage } from "mrtr-gate/hosts";
import { AnchoredAudit, HostKeys, verifyAnchor, verifyTrail } from "mrtr-gate/host-keys";
import { ANSWERS, PARAMS, SERVER, formRound } from "./support.js";

const fixture = (name) => readFileSync(new URL(`../../../tests/host_keys/${name}`, import.meta.url), "utf8");
// `k1` of vectors.json, which keyed the recorded trail.
const KEYS = new HostKeys("k1", new Uint8Array(32).fill(7));
const GENESIS = "0".repeat(64);
const sha = (line) => createHash("sha256").update(line, "utf8").digest("hex");
const read = (p) => readFileSync(p, "utf8");
const textOf = (lines) => lines.map((l) => `${l}\n`).join("");

function withDir(body) {
  const dir = mkdtempSync(join(tmpdir(), "mrtr-gate-anchor-"));
  return Promise.resolve(body(dir)).finally(() => rmSync(dir, { recursive: true, force: true }));
}

/** The entry a writer offers for `line` (a trail line: it names its shard, seq and prev_sha256). */
function entryOf(line) {
  const v = JSON.parse(line);
  return { shard: v.shard, seq: BigInt(v.seq), prevSha256: v.prev_sha256, eventSha256: sha(line), line };
}

/** The links and anchor this package's AnchoredAudit writes for `lines`, appended in order. */
function rekey(lines, dir) {
  const links = join(dir, "rekey.links");
  const anchor = join(dir, "rekey.anchor");
  rmSync(links, { force: true });
  rmSync(anchor, { force: true });
  const audit = new AnchoredAudit(new MemoryAudit(), KEYS, anchor, links);
  for (const line of lines) assert.equal(audit.append(entryOf(line)).written, true);
  return [read(links), read(anchor)];
}

/** Writes lines for shards as the gate would: `next("aa")` is the next line of `aa`'s chain. */
function shardWriter() {
  const heads = new Map();
  return (shard, event = "received") => {
    const [seq, prev] = heads.get(shard) ?? [0, GENESIS];
    const line = JSON.stringify({ event, prev_sha256: prev, schema: "mrtr-gate/audit/v4", seq: seq + 1, shard });
    heads.set(shard, [seq + 1, sha(line)]);
    return line;
  };
}

/** The MAC of a link or anchor line in uppercase hex: the same bytes, spelt as no host writes them. */
const upper = (line) => {
  const { mac } = JSON.parse(line);
  return line.replace(mac, mac.toUpperCase());
};

test("the Rust keyed trail is intact and keyed here to the same bytes", () =>
  withDir((dir) => {
    const [trail, links, anchor] = [fixture("trail.jsonl"), fixture("trail.jsonl.links"), fixture("trail.anchor")];
    const lines = trail.split("\n").filter((l) => l !== "");
    assert.ok(lines.length >= 2);
    assert.ok(lines.every((l) => typeof JSON.parse(l).shard === "string"), "the fixture is a sharded trail");
    assert.deepEqual(verifyAnchor(trail, links, anchor, KEYS), { kind: "intact", events: BigInt(lines.length) });
    assert.deepEqual(rekey(lines, dir), [links, anchor]);
    // The MAC in uppercase hex says the same bytes; every host refuses it alike.
    assert.deepEqual(verifyAnchor(trail, links, upper(anchor.trimEnd()), KEYS), { kind: "badAnchor" });
    const [first, ...rest] = links.split("\n");
    const shard = JSON.parse(lines[0]).shard;
    assert.deepEqual(verifyAnchor(trail, [upper(first), ...rest].join("\n"), anchor, KEYS), { kind: "unkeyed", shard, seq: 1n });
  }));

test("a trail keyed before shards (v3 lines, v1 links and anchor) still verifies", () => {
  const [trail, links, anchor] = [fixture("legacy_trail.jsonl"), fixture("legacy_trail.jsonl.links"), fixture("legacy_trail.anchor")];
  const lines = trail.split("\n").filter((l) => l !== "");
  assert.ok(lines.length >= 2);
  assert.ok(!trail.includes('"shard"') && !links.includes('"shard"') && !anchor.includes('"shard"'));
  assert.deepEqual(verifyAnchor(trail, links, anchor, KEYS), { kind: "intact", events: BigInt(lines.length) });
  // Its lines are one chain, the shard "".
  const verified = verifyTrail(trail);
  assert.equal(verified.ok, true);
  assert.deepEqual([...verified.heads], [["", { seq: BigInt(lines.length), sha256: sha(lines.at(-1)) }]]);
  // Read as v1, not as a sharded head: the same MAC under a shard is not the anchor's.
  const sharded = anchor.replace(/}\n$/, ',"shard":""}\n');
  assert.deepEqual(verifyAnchor(trail, links, sharded, KEYS), { kind: "badAnchor" });
  // Cut: the v1 anchor still holds the trail to its end.
  assert.deepEqual(verifyAnchor(textOf(lines.slice(0, -1)), links, anchor, KEYS),
    { kind: "truncated", shard: "", events: BigInt(lines.length - 1), anchored: BigInt(lines.length) });
});

test("a trail keyed before shards still verifies once a sharded line is appended under AnchoredAudit", () =>
  withDir((dir) => {
    // The legacy trail, its links and its v1 anchor copied: the sink writes into the copies.
    const [trailPath, linksPath, anchorPath] = ["legacy_trail.jsonl", "legacy_trail.jsonl.links", "legacy_trail.anchor"].map((name) => {
      const path = join(dir, name);
      copyFileSync(new URL(`../../../tests/host_keys/${name}`, import.meta.url), path);
      return path;
    });
    const legacyAnchor = readFileSync(anchorPath);
    // One v1 anchor line (no `shard`): the line the checkpoint must keep as it is.
    assert.ok(legacyAnchor.toString("utf8").endsWith("\n") && legacyAnchor.toString("utf8").split("\n").length === 2);
    assert.ok(!legacyAnchor.includes('"shard"'));
    // The package has no file sink: a MemoryAudit holding the legacy chain (the shard "", as
    // verifyTrail files lines without `shard`) stands for the trail reopened.
    const legacy = read(trailPath).split("\n").filter((l) => l !== "");
    assert.ok(legacy.length >= 2);
    const inner = new MemoryAudit();
    let prev = GENESIS;
    for (const [i, line] of legacy.entries()) {
      assert.equal(inner.append({ shard: "", seq: BigInt(i + 1), prevSha256: prev, eventSha256: sha(line), line }).written, true);
      prev = sha(line);
    }
    const t0 = JSON.stringify({ body: "1", prev_sha256: GENESIS, seq: 1, shard: "t0" });
    assert.equal(new AnchoredAudit(inner, KEYS, anchorPath, linksPath).append(entryOf(t0)).written, true);
    assert.deepEqual(inner.lines, [...legacy, t0]);
    // Before the v1 line was kept, the first rewrite dropped it: `extended` for the shard "".
    assert.deepEqual(verifyAnchor(textOf(inner.lines), read(linksPath), read(anchorPath), KEYS),
      { kind: "intact", events: BigInt(legacy.length + 1) });
    // The legacy line first (the shard "" sorts before every name), byte for byte, then t0's.
    const checkpoint = readFileSync(anchorPath);
    assert.deepEqual(checkpoint.subarray(0, legacyAnchor.length), legacyAnchor);
    const rest = checkpoint.subarray(legacyAnchor.length).toString("utf8").split("\n").filter((l) => l !== "");
    assert.deepEqual(rest.map((l) => JSON.parse(l).shard), ["t0"]);
  }));

test("a round under AnchoredAudit is intact and each tampering is found", () =>
  withDir(async (dir) => {
    const trail = new MemoryAudit();
    const links = join(dir, "audit.jsonl.links");
    const [first, second] = [join(dir, "first.anchor"), join(dir, "second.anchor")];
    const text = () => textOf(trail.lines);
    const round = async (anchor, id) => {
      const clock = new ManualClock();
      const gate = await Gate.create(
        { clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new AnchoredAudit(trail, KEYS, anchor, links) },
      );
      await gate.register({ requestId: id, server: SERVER, user: "u", tenant: "t", method: "tools/call", params: PARAMS });
      assert.equal((await gate.acceptResponse(SERVER, formRound(id))).kind, "input_required");
      await gate.buildRetry({ server: SERVER, requestId: id, retryId: id + 100, user: "u", tenant: "t", responses: ANSWERS });
    };
    const check = (t = text(), anchor = first, keys = KEYS) => verifyAnchor(t, read(links), read(anchor), keys);

    await round(first, 1);
    const n = BigInt(trail.lines.length);
    assert.ok(n >= 2n);
    const shard = JSON.parse(trail.lines[0]).shard;
    assert.match(shard, /^[0-9a-f]{32}$/);
    assert.deepEqual(check(), { kind: "intact", events: n });
    // What this package writes is what the Rust host writes for the same lines.
    assert.deepEqual(rekey(trail.lines, dir), [read(links), read(first)]);

    // The newest line cut off: the chain of what is left verifies, not against the anchor.
    const cut = textOf(trail.lines.slice(0, -1));
    assert.deepEqual(check(cut), { kind: "truncated", shard, events: n - 1n, anchored: n });
    assert.deepEqual(check(text(), first, new HostKeys("k1", new Uint8Array(32).fill(8))), { kind: "badAnchor" });
    assert.deepEqual(verifyAnchor(text(), read(links), read(first).replace('"seq":', '"seq":1'), KEYS), { kind: "badAnchor" });
    assert.deepEqual(verifyAnchor(text(), read(links), "", KEYS), { kind: "badAnchor" });
    assert.deepEqual(verifyAnchor(text(), "", read(first), KEYS), { kind: "unkeyed", shard, seq: 1n });
    // One anchor line per shard: a second line for the same shard is no anchor.
    assert.deepEqual(verifyAnchor(text(), read(links), read(first) + read(first), KEYS), { kind: "badAnchor" });
    assert.deepEqual(check(text().replace('"seq":1,', '"seq":7,')), { kind: "brokenChain" });

    // Another key holder goes on (its own anchor; its first append learns the trail's head):
    // the first anchor does not cover its lines.
    await round(second, 2);
    const total = BigInt(trail.lines.length);
    assert.ok(total > n);
    assert.deepEqual(check(), { kind: "extended", shard, events: total, anchored: n });
    assert.deepEqual(check(text(), second), { kind: "intact", events: total });

    // A line appended by whoever can write the trail, chained as the core would: no link.
    const last = trail.lines[trail.lines.length - 1];
    const forged = { ...JSON.parse(last), event: "consented", seq: Number(total) + 1, prev_sha256: sha(last) };
    const appended = `${text()}${JSON.stringify(forged)}\n`;
    for (const anchor of [first, second]) assert.deepEqual(check(appended, anchor), { kind: "unkeyed", shard, seq: total + 1n });

    // The line at the anchored position is another keyed one: the anchor of another first
    // line of this shard (the same key) held to this trail, every line of which is keyed.
    const other = join(dir, "other.anchor");
    new AnchoredAudit(new MemoryAudit(), KEYS, other, join(dir, "other.links")).append(entryOf(shardWriter()(shard, "rejected")));
    assert.deepEqual(verifyAnchor(text(), read(links), read(other), KEYS), { kind: "diverged", shard });
  }));

test("an anchor that cannot be written fails the append, after its link, and is not kept", () =>
  withDir((dir) => {
    const [next, inner, links] = [shardWriter(), new MemoryAudit(), join(dir, "links")];
    const anchor = join(dir, "missing", "audit.anchor");
    const audit = new AnchoredAudit(inner, KEYS, anchor, links);
    const a1 = next("aa");
    assert.throws(() => audit.append(entryOf(a1)), (e) => e instanceof HostError && /anchor/.test(e.message));
    assert.ok(read(links).includes(sha(a1)));
    // The shard was not anchored: the next write of the checkpoint (another shard's) leaves it
    // out, and the shard's next append anchors it.
    mkdirSync(join(dir, "missing"));
    audit.append(entryOf(next("bb")));
    const anchored = () => read(anchor).split("\n").filter((l) => l !== "").map((l) => [JSON.parse(l).shard, JSON.parse(l).seq]);
    assert.deepEqual(anchored(), [["bb", 1]]);
    audit.append(entryOf(next("aa")));
    assert.deepEqual(anchored(), [["aa", 2], ["bb", 1]]);
    assert.deepEqual(verifyAnchor(textOf(inner.lines), read(links), read(anchor), KEYS), { kind: "intact", events: 3n });
  }));

/** Two shards interleaved (b1 a1 b2 a2 b3) written under an AnchoredAudit in `dir`. */
function twoShards(dir) {
  const [next, inner] = [shardWriter(), new MemoryAudit()];
  const [anchor, links] = [join(dir, "two.anchor"), join(dir, "two.links")];
  const lines = ["bb", "aa", "bb", "aa", "bb"].map((s) => next(s));
  const audit = new AnchoredAudit(inner, KEYS, anchor, links);
  for (const line of lines) assert.equal(audit.append(entryOf(line)).written, true);
  return { next, inner, anchor, links, lines, text: textOf(lines) };
}

test("each shard keeps its own head and anchor, one checkpoint line each, kept across a restart", () =>
  withDir((dir) => {
    const { next, inner, anchor, links, lines, text } = twoShards(dir);
    assert.deepEqual(inner.head("aa"), { seq: 2n, sha256: sha(lines[3]) });
    assert.deepEqual(inner.head("bb"), { seq: 3n, sha256: sha(lines[4]) });
    const anchored = () => read(anchor).split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)).map((a) => [a.shard, a.seq, a.event_sha256]);
    // In shard order, whatever order the shards were written in.
    assert.deepEqual(anchored(), [["aa", 2, sha(lines[3])], ["bb", 3, sha(lines[4])]]);
    assert.deepEqual(verifyAnchor(text, read(links), read(anchor), KEYS), { kind: "intact", events: 5n });
    // Through the wrapper, a stale offer is refused with its own shard's head.
    const stale = new AnchoredAudit(inner, KEYS, anchor, links).append(entryOf(lines[0]));
    assert.deepEqual([stale.written, stale.headSeq, stale.headSha256], [false, 3n, sha(lines[4])]);

    // A process started again writes `aa` and keeps the anchor of `bb`, which it has not written.
    const a3 = next("aa");
    assert.equal(new AnchoredAudit(inner, KEYS, anchor, links).append(entryOf(a3)).written, true);
    assert.deepEqual(anchored(), [["aa", 3, sha(a3)], ["bb", 3, sha(lines[4])]]);
    assert.deepEqual(verifyAnchor(textOf(inner.lines), read(links), read(anchor), KEYS), { kind: "intact", events: 6n });

    // A shard's anchor only moves forward: an older line of it confirmed by another sink
    // sharing the checkpoint leaves the checkpoint as it was.
    const before = read(anchor);
    assert.equal(new AnchoredAudit(new MemoryAudit(), KEYS, anchor, join(dir, "other.links")).append(entryOf(lines[1])).written, true);
    assert.equal(read(anchor), before);
  }));

test("a shard cut, extended or rewritten is found as that shard's", () =>
  withDir((dir) => {
    const { next, anchor, links, lines, text } = twoShards(dir);
    const check = (t, l = read(links)) => verifyAnchor(t, l, read(anchor), KEYS);
    assert.deepEqual(check(text), { kind: "intact", events: 5n });
    // `aa`'s newest line cut (the others still chain), `bb`'s, then the whole of `aa`.
    assert.deepEqual(check(textOf(lines.filter((_, i) => i !== 3))), { kind: "truncated", shard: "aa", events: 1n, anchored: 2n });
    assert.deepEqual(check(textOf(lines.slice(0, 4))), { kind: "truncated", shard: "bb", events: 2n, anchored: 3n });
    assert.deepEqual(check(textOf(lines.filter((l) => JSON.parse(l).shard !== "aa"))), { kind: "truncated", shard: "aa", events: 0n, anchored: 2n });

    // Another key holder goes on in `bb` (its own checkpoint): `aa` ends at its anchor, `bb` past it.
    const [elsewhere, otherLinks] = [join(dir, "elsewhere.anchor"), join(dir, "elsewhere.links")];
    const other = new AnchoredAudit(new MemoryAudit(), KEYS, elsewhere, otherLinks);
    const linked = (extra) => {
      for (const line of extra) other.append(entryOf(line));
      return read(links) + read(otherLinks);
    };
    const b4 = next("bb");
    assert.deepEqual(check(text + textOf([b4]), linked([...lines.filter((l) => JSON.parse(l).shard === "bb"), b4])),
      { kind: "extended", shard: "bb", events: 4n, anchored: 3n });
    // A shard the checkpoint has no anchor for at all.
    const c1 = next("cc");
    assert.deepEqual(check(text + textOf([c1]), linked([c1])), { kind: "extended", shard: "cc", events: 1n, anchored: 0n });

    // `bb` rewritten whole and keyed again by a key holder: its anchored line is not there.
    const again = shardWriter();
    const rewritten = ["bb", "bb", "bb"].map((s) => again(s, "rejected"));
    const mixed = [lines[1], lines[3], ...rewritten];
    const relinks = join(dir, "re.links");
    const re = new AnchoredAudit(new MemoryAudit(), KEYS, join(dir, "re.anchor"), relinks);
    for (const line of rewritten) re.append(entryOf(line));
    assert.deepEqual(check(textOf(mixed), read(links) + read(relinks)), { kind: "diverged", shard: "bb" });
  }));

test("an entry whose shard is no shard name its line carries is refused before anything is written", () =>
  withDir((dir) => {
    const [inner, links, anchor] = [new MemoryAudit(), join(dir, "links"), join(dir, "anchor")];
    const audit = new AnchoredAudit(inner, KEYS, anchor, links);
    const good = entryOf(shardWriter()("0123abcd"));
    for (const shard of ["", "AB", "a}b", "a:b", 'a"b', "a".repeat(65), "0123abc", "0123abcde", undefined]) {
      assert.throws(() => audit.append({ ...good, shard }), (e) => e instanceof HostError && /shard/.test(e.message), String(shard));
    }
    // Named only inside another field's string: not the line's shard.
    const line = JSON.stringify({ event: "received", prev_sha256: GENESIS, reason: '"shard":"bb"', schema: "mrtr-gate/audit/v4", seq: 1, shard: "aa" });
    assert.ok(line.includes('shard\\":\\"bb'));
    assert.throws(() => audit.append({ ...entryOf(line), shard: "bb" }), (e) => e instanceof HostError && /shard/.test(e.message));
    assert.deepEqual(inner.lines, []);
    assert.throws(() => read(links), { code: "ENOENT" });
    assert.throws(() => read(anchor), { code: "ENOENT" });
    assert.equal(audit.append(good).written, true);
  }));

// tests/host_keys/node_trail.*: a round through this package's gate under its AnchoredAudit
// (re-recorded with MRTR_GATE_BLESS=1), which tests/e2e/anchored_trail.rs verifies with the
// Rust host's verify_anchor.
test("a trail this package keys is recorded for the Rust verifier", () =>
  withDir(async (dir) => {
    const trail = new MemoryAudit();
    const [links, anchor] = [join(dir, "trail.jsonl.links"), join(dir, "trail.anchor")];
    const clock = new ManualClock();
    const gate = await Gate.create(
      { clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new AnchoredAudit(trail, KEYS, anchor, links) },
    );
    await gate.register({ requestId: 1, server: SERVER, user: "u", tenant: "t", method: "tools/call", params: PARAMS });
    assert.equal((await gate.acceptResponse(SERVER, formRound(1))).kind, "input_required");
    await gate.buildRetry({ server: SERVER, requestId: 1, retryId: 2, user: "u", tenant: "t",
      responses: ANSWERS });
    const text = trail.lines.map((l) => `${l}\n`).join("");
    assert.deepEqual(verifyAnchor(text, read(links), read(anchor), KEYS), { kind: "intact", events: 3n });
    const recorded = ["node_trail.jsonl", "node_trail.jsonl.links", "node_trail.anchor"];
    if (process.env.MRTR_GATE_BLESS) {
      for (const [i, made] of [text, read(links), read(anchor)].entries()) {
        writeFileSync(new URL(`../../../tests/host_keys/${recorded[i]}`, import.meta.url), made);
      }
    }
    const [t, l, a] = recorded.map(fixture);
    assert.deepEqual(verifyAnchor(t, l, a, KEYS), { kind: "intact", events: BigInt(t.split("\n").filter((x) => x !== "").length) });
  }));
