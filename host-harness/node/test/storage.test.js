// MemoryStorage.listDue, held to the storage contract's list-due cases (the same as
// host-harness/redis/tests/storage_contract.rs runs against the Rust stores): only due keys,
// deadline order, paging at any limit visits every due key once, deletes and rewrites move
// keys in the index, keys past their TTL are gone, hostile cursors and limits are errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HostError } from "mrtr-gate";
import { ManualClock, MemoryStorage } from "mrtr-gate/hosts";

const A = "mrtr-gate/v3/id/0123456789abcdef0123456789abcdef/";
const MAX = (1n << 64n) - 1n;

function fresh() {
  const clock = new ManualClock(1_700_000_000_000);
  return { clock, s: new MemoryStorage(clock) };
}
const put = (s, key, ttl, expected = 0n, value = "v") => s.write([{ key, expected, value, ttlMs: BigInt(ttl) }])[0];

function due(s, dueBy, limit) {
  const out = [];
  let cursor = null;
  for (let n = 0; n < 10_000; n++) {
    const page = s.listDue(BigInt(dueBy), cursor, limit);
    assert.ok(page.keys.length <= limit, "a page over its limit");
    out.push(...page.keys);
    if (page.next === null) return out;
    assert.notEqual(page.next, cursor, "a cursor that does not move");
    cursor = page.next;
  }
  throw new Error("listDue never finished");
}

test("an empty store has nothing due", () => {
  const { s } = fresh();
  assert.deepEqual(s.listDue(MAX, null, 64), { keys: [], next: null });
});

test("only due keys, in deadline order", () => {
  const { clock, s } = fresh();
  const now = clock.nowMs();
  [3_000, 1_000, 2_000, 10_000, 3_001].forEach((ttl, i) => put(s, `${A}${i}`, ttl));
  assert.deepEqual(due(s, now + 3_000, 64), [`${A}1`, `${A}2`, `${A}0`]);
  assert.deepEqual(due(s, now, 64), []);
  assert.equal(due(s, MAX, 64).length, 5);
});

test("paging visits every due key exactly once at any limit", () => {
  const { clock, s } = fresh();
  const now = clock.nowMs();
  const want = [];
  for (let i = 0; i < 36; i++) {
    const ttl = 1_000 + (i % 4) * 1_000;
    put(s, `${A}${i}`, ttl);
    if (ttl <= 3_500) want.push(`${A}${i}`);
  }
  for (const limit of [1, 2, 3, 5, 64]) {
    const got = due(s, now + 3_500, limit);
    assert.equal(new Set(got).size, got.length, `limit ${limit}`);
    assert.deepEqual([...got].sort(), [...want].sort(), `limit ${limit}`);
  }
});

test("deletes leave the index and rewrites move", () => {
  const { clock, s } = fresh();
  const now = clock.nowMs();
  const va = put(s, `${A}a`, 1_000);
  const vb = put(s, `${A}b`, 1_000);
  const vc = put(s, `${A}c`, 60_000);
  assert.deepEqual(due(s, now + 1_000, 64), [`${A}a`, `${A}b`]);
  s.write([{ key: `${A}a`, expected: va, value: null, ttlMs: 60_000n }]);
  put(s, `${A}b`, 60_000, vb, "b2");
  put(s, `${A}c`, 500, vc, "c2");
  assert.deepEqual(due(s, now + 1_000, 64), [`${A}c`]);
  assert.deepEqual(due(s, now + 60_000, 64), [`${A}c`, `${A}b`]);
});

test("keys past their TTL are gone", () => {
  const { clock, s } = fresh();
  put(s, `${A}1`, 1_000);
  put(s, `${A}2`, 5_000);
  clock.advance(1_000);
  assert.deepEqual(due(s, MAX, 1), [`${A}2`]);
  clock.advance(4_000);
  assert.deepEqual(due(s, MAX, 1), []);
  assert.equal(s.size, 0);
});

test("a cursor the store did not make, or a limit of 0, is an error", () => {
  const { s } = fresh();
  put(s, `${A}1`, 1_000);
  for (const bad of ["", "garbage", "x:y z", "\0", "-1 -1 ", 7, {}]) {
    assert.throws(() => s.listDue(MAX, bad, 64), HostError, String(bad));
  }
  assert.throws(() => s.listDue(MAX, null, 0), HostError);
  assert.deepEqual(due(s, MAX, 1), [`${A}1`]);
});
