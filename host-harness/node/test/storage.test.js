// MemoryStorage held to the storage contract's shared cases (tests/storage/contract.json, the
// same the Rust stores, memory and Redis, are held to by
// host-harness/redis/tests/storage_contract.rs): compare-and-swap batches that stop at the
// first loser, versions never reused by a key, the reader's version elided, liveness by the
// host's clock, opaque values, and listDue (only due keys, deadline order, paging at any limit
// visits every due key once, hostile cursors and limits are errors).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { HostError } from "mrtr-gate";
import { ManualClock, MemoryStorage } from "mrtr-gate/hosts";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/storage/contract.json", import.meta.url), "utf8"));
const MAX = (1n << 64n) - 1n;

// Every key listed by dueBy, page after page, each within its limit, each cursor moving on.
function due(s, dueBy, limit) {
  const out = [];
  let cursor = null;
  for (let n = 0; n < 10_000; n++) {
    const page = s.listDue(dueBy, cursor, limit);
    assert.ok(page.keys.length <= limit, "a page over its limit");
    out.push(...page.keys);
    if (page.next === null) return out;
    assert.notEqual(page.next, cursor, "a cursor that does not move");
    cursor = page.next;
  }
  throw new Error("listDue never finished");
}

// A version named in a case: 0, NAME or NAME+N.
function version(bound, v) {
  if (typeof v === "number") return BigInt(v);
  const [name, plus] = v.split("+");
  return bound.get(name) + BigInt(plus ?? 0);
}

for (const c of vectors.cases) {
  test(c.name, () => {
    const t0 = vectors.t0_ms;
    const clock = new ManualClock(t0);
    const s = new MemoryStorage(clock);
    const bound = new Map();
    const seen = new Set();
    c.steps.forEach((step, i) => {
      const at = `step ${i}: ${JSON.stringify(step)}`;
      if (step.write) {
        const ops = step.write.map((w) => ({ key: w.key, expected: version(bound, w.expected), value: w.value, ttlMs: BigInt(w.ttl_ms) }));
        const got = s.write(ops);
        assert.equal(got.length, step.versions.length, at);
        got.forEach((v, j) => {
          const want = step.versions[j];
          if (typeof want === "string" && want.startsWith("new:")) {
            const id = `${ops[j].key}\n${v}`;
            assert.ok(v !== 0n && !seen.has(id), `${at}: version ${v} is 0 or came back`);
            seen.add(id);
            bound.set(want.slice("new:".length), v);
          } else {
            assert.equal(v, BigInt(want), at);
          }
        });
      } else if (step.read) {
        const got = s.read(step.read.map((r) => ({ key: r.key, have: version(bound, r.have) })));
        const want = step.expect.map((e) => (e === null ? null : { version: version(bound, e.version), value: e.value }));
        assert.deepEqual(got.map((e) => (e === null ? null : { version: e.version, value: e.value })), want, at);
      } else if (step.advance_ms !== undefined) {
        clock.advance(step.advance_ms);
      } else if (step.due) {
        const by = step.due.by === "max" ? MAX : BigInt(t0 + step.due.by);
        let got = due(s, by, step.due.limit);
        if (step.due.only) got = got.filter((k) => k.startsWith(step.due.only));
        let want = [...step.expect];
        if (step.order === "any") {
          got = [...got].sort();
          want = want.sort();
        }
        assert.deepEqual(got, want, at);
      } else if (step.due_error) {
        assert.throws(() => s.listDue(MAX, step.due_error.cursor, step.due_error.limit), HostError, at);
      } else {
        throw new Error(`${at}: an unknown step`);
      }
    });
  });
}
