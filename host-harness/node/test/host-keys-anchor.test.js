// The keyed trail (AnchoredAudit, verifyAnchor of src/host-keys.js) against the Rust host's,
// byte for byte: the trail recorded from a Rust gate round under its AnchoredAudit
// (tests/host_keys/trail.*, by tests/e2e/anchored_trail.rs) verifies intact here, and this
// package keys its lines to the very links and anchor Rust wrote (so the Rust verifier accepts
// what this package writes). Then rounds through this package's gate, and the tampering the
// anchor answers: a cut tail, lines past the anchor, a line appended without the key.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Gate, HostError } from "mrtr-gate";
import { CallbackConsent, ManualClock, MemoryAudit, MemoryStorage } from "mrtr-gate/hosts";
import { AnchoredAudit, HostKeys, verifyAnchor } from "mrtr-gate/host-keys";
import { ANSWERS, PARAMS, SERVER, formRound } from "./support.js";

const fixture = (name) => readFileSync(new URL(`../../../tests/host_keys/${name}`, import.meta.url), "utf8");
// `k1` of vectors.json, which keyed the recorded trail.
const KEYS = new HostKeys("k1", new Uint8Array(32).fill(7));
const GENESIS = "0".repeat(64);
const sha = (line) => createHash("sha256").update(line, "utf8").digest("hex");
const read = (p) => readFileSync(p, "utf8");

function withDir(body) {
  const dir = mkdtempSync(join(tmpdir(), "mrtr-gate-anchor-"));
  return Promise.resolve(body(dir)).finally(() => rmSync(dir, { recursive: true, force: true }));
}

/** The links and anchor this package's AnchoredAudit writes for `lines`, appended in order. */
function rekey(lines, dir) {
  const links = join(dir, "rekey.links");
  const anchor = join(dir, "rekey.anchor");
  rmSync(links, { force: true });
  const audit = new AnchoredAudit(new MemoryAudit(), KEYS, anchor, links);
  let prev = GENESIS;
  for (const [i, line] of lines.entries()) {
    assert.equal(audit.append({ seq: BigInt(i + 1), prevSha256: prev, eventSha256: sha(line), line }).written, true);
    prev = sha(line);
  }
  return [read(links), read(anchor)];
}

test("the Rust keyed trail is intact and keyed here to the same bytes", () =>
  withDir((dir) => {
    const [trail, links, anchor] = [fixture("trail.jsonl"), fixture("trail.jsonl.links"), fixture("trail.anchor")];
    const lines = trail.split("\n").filter((l) => l !== "");
    assert.ok(lines.length >= 2);
    assert.deepEqual(verifyAnchor(trail, links, anchor, KEYS), { kind: "intact", events: BigInt(lines.length) });
    assert.deepEqual(rekey(lines, dir), [links, anchor]);
    // The MAC in uppercase hex says the same bytes; every host refuses it alike.
    const { mac } = JSON.parse(anchor);
    assert.deepEqual(verifyAnchor(trail, links, anchor.replace(mac, mac.toUpperCase()), KEYS), { kind: "badAnchor" });
    const first = JSON.parse(links.split("\n")[0]).mac;
    assert.deepEqual(verifyAnchor(trail, links.replace(first, first.toUpperCase()), anchor, KEYS), { kind: "unkeyed", seq: 1n });
  }));

test("a round under AnchoredAudit is intact and each tampering is found", () =>
  withDir(async (dir) => {
    const trail = new MemoryAudit();
    const links = join(dir, "audit.jsonl.links");
    const [first, second] = [join(dir, "first.anchor"), join(dir, "second.anchor")];
    const text = () => trail.lines.map((l) => `${l}\n`).join("");
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
    assert.deepEqual(check(), { kind: "intact", events: n });
    // What this package writes is what the Rust host writes for the same lines.
    assert.deepEqual(rekey(trail.lines, dir), [read(links), read(first)]);

    // The newest line cut off: the chain of what is left verifies, not against the anchor.
    const cut = trail.lines.slice(0, -1).map((l) => `${l}\n`).join("");
    assert.deepEqual(check(cut), { kind: "truncated", events: n - 1n, anchored: n });
    assert.deepEqual(check(text(), first, new HostKeys("k1", new Uint8Array(32).fill(8))), { kind: "badAnchor" });
    assert.deepEqual(verifyAnchor(text(), read(links), read(first).replace('"seq":', '"seq":1'), KEYS), { kind: "badAnchor" });
    assert.deepEqual(verifyAnchor(text(), read(links), "", KEYS), { kind: "badAnchor" });
    assert.deepEqual(verifyAnchor(text(), "", read(first), KEYS), { kind: "unkeyed", seq: 1n });
    assert.deepEqual(check(text().replace('"seq":1,', '"seq":7,')), { kind: "brokenChain" });

    // Another key holder goes on (its own anchor; its first append learns the trail's head):
    // the first anchor does not cover its lines.
    await round(second, 2);
    const total = BigInt(trail.lines.length);
    assert.ok(total > n);
    assert.deepEqual(check(), { kind: "extended", events: total, anchored: n });
    assert.deepEqual(check(text(), second), { kind: "intact", events: total });

    // A line appended by whoever can write the trail, chained as the core would: no link.
    const last = trail.lines[trail.lines.length - 1];
    const forged = { ...JSON.parse(last), event: "consented", seq: Number(total) + 1, prev_sha256: sha(last) };
    const appended = `${text()}${JSON.stringify(forged)}\n`;
    for (const anchor of [first, second]) assert.deepEqual(check(appended, anchor), { kind: "unkeyed", seq: total + 1n });

    // The line at the anchored position is another keyed one: the Rust trail's anchor (the
    // same key) over this trail, every line of which is keyed.
    assert.ok(BigInt(JSON.parse(fixture("trail.anchor")).seq) <= total);
    assert.deepEqual(verifyAnchor(text(), read(links), fixture("trail.anchor"), KEYS), { kind: "diverged" });
  }));

test("an anchor that cannot be written fails the append, after its link", () =>
  withDir((dir) => {
    const links = join(dir, "links");
    const audit = new AnchoredAudit(new MemoryAudit(), KEYS, join(dir, "missing", "audit.anchor"), links);
    const line = `{"prev_sha256":"${GENESIS}","seq":1}`;
    assert.throws(() => audit.append({ seq: 1n, prevSha256: GENESIS, eventSha256: sha(line), line }), (e) => e instanceof HostError && /anchor/.test(e.message));
    assert.ok(read(links).includes(sha(line)));
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
