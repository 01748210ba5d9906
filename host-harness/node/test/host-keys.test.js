// The host-key wrappers (src/host-keys.js) against the Rust host's formats, byte for byte
// (tests/host_keys/vectors.json, recorded by tests/e2e/host_key_vectors.rs), their key rules
// and rollback marks, and one round through the gate with them on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import { Gate, GateError, HostError } from "mrtr-gate";
import { CallbackConsent, ManualClock, MemoryAudit, MemoryStorage } from "mrtr-gate/hosts";
import { AuthenticatedStorage, HostKeyError, HostKeys, Pseudonyms } from "mrtr-gate/host-keys";
import { ANSWERS, PARAMS, SERVER, formRound } from "./support.js";

const VECTORS = JSON.parse(readFileSync(new URL("../../../tests/host_keys/vectors.json", import.meta.url), "utf8"));
const unhex = (h) => Buffer.from(h, "hex");

function keysOf(entries, current) {
  const [first, ...rest] = entries;
  const keys = new HostKeys(first.id, unhex(first.secret_hex));
  for (const k of rest) keys.add(k.id, unhex(k.secret_hex));
  if (current !== undefined) keys.rotateTo(current);
  return keys;
}

// A store that keeps what it is given and answers one value to every read.
class OneValue {
  constructor(stored = null) {
    this.stored = stored;
    this.written = [];
  }
  read(keys) {
    return keys.map(() => this.stored);
  }
  write(writes) {
    for (const w of writes) if (w.value !== null) this.written.push(w.value);
    return writes.map((w) => BigInt(w.expected) + 1n);
  }
  listDue() {
    throw new HostError("not listed");
  }
}

const openWith = (keys, key, stored, version) =>
  new AuthenticatedStorage(new OneValue({ version, value: stored }), keys).read([{ key, have: 0n }])[0].value;

test("pseudonyms are the Rust host's byte for byte", () => {
  assert.ok(VECTORS.pseudonyms.length >= 3);
  for (const v of VECTORS.pseudonyms) {
    const names = new Pseudonyms(keysOf(VECTORS.keys, v.key_id));
    assert.equal(names.user(v.user), v.user_pseudonym);
    assert.equal(names.tenant(v.tenant), v.tenant_pseudonym);
  }
});

test("sealed values are the Rust host's byte for byte and open back", () => {
  assert.ok(VECTORS.sealed.length >= 3);
  for (const v of VECTORS.sealed) {
    const store = new OneValue();
    const prev = BigInt(v.prev);
    new AuthenticatedStorage(store, keysOf(VECTORS.keys, v.key_id)).write([{ key: v.key, expected: prev, value: v.text, ttlMs: 60_000n }]);
    assert.deepEqual(store.written, [v.sealed]);
    assert.equal(openWith(keysOf(VECTORS.keys), v.key, v.sealed, prev + 1n), v.text);
  }
});

test("every value the Rust host refuses is refused", () => {
  assert.ok(VECTORS.refused.length >= 10);
  for (const v of VECTORS.refused) {
    assert.throws(() => openWith(keysOf(VECTORS.keys), v.key, v.stored, 1n), HostError, v.why);
  }
});

test("key ids, secrets and rotation follow the Rust rules", () => {
  const secret = new Uint8Array(32);
  for (const bad of ["", "a".repeat(33), "k.1", "k 1", "é"]) assert.throws(() => new HostKeys(bad, secret), HostKeyError);
  assert.throws(() => new HostKeys("k1", new Uint8Array(31)), HostKeyError);
  const keys = new HostKeys("a".repeat(32), secret);
  assert.throws(() => keys.rotateTo("k2"), HostKeyError);
  keys.add("k2", Uint8Array.from({ length: 32 }, (_, i) => i));
  keys.rotateTo("k2");
  keys.retire("k2");
  assert.equal(keys.currentId, "k2");
  assert.ok(inspect(keys).includes("k2") && !JSON.stringify(keys).includes("0000000000"));
  // A value sealed under a retired key no longer opens.
  const store = new OneValue();
  new AuthenticatedStorage(store, new HostKeys("k1", new Uint8Array(32).fill(7))).write([{ key: "a", expected: 0n, value: "{}", ttlMs: 1n }]);
  const both = new HostKeys("k2", secret);
  both.add("k1", new Uint8Array(32).fill(7));
  assert.equal(openWith(both, "a", store.written[0], 1n), "{}");
  both.retire("k1");
  assert.throws(() => openWith(both, "a", store.written[0], 1n), HostError);
});

test("a value written back after a newer one was seen is refused as a rollback", () => {
  const inner = new MemoryStorage(new ManualClock());
  const store = new AuthenticatedStorage(inner, new HostKeys("k1", new Uint8Array(32).fill(7)));
  const versions = [0n];
  const sealed = [];
  for (const text of ["round open", "round answered", "round used"]) {
    versions.push(...store.write([{ key: "r", expected: versions.at(-1), value: text, ttlMs: 60_000n }]));
    sealed.push(inner.read([{ key: "r", have: 0n }])[0].value);
  }
  assert.equal(store.read([{ key: "r", have: 0n }])[0].value, "round used");
  // The store's writer puts the sealed "round answered" back: its MAC holds, its prev is old.
  assert.equal(inner.write([{ key: "r", expected: versions.at(-1), value: sealed[1], ttlMs: 60_000n }]).length, 1);
  assert.throws(() => store.read([{ key: "r", have: 0n }]), /rollback/);
  // A wrapper that never saw the key has no mark to hold it to (docs/host-keys.md).
  const fresh = new AuthenticatedStorage(inner, new HostKeys("k1", new Uint8Array(32).fill(7)));
  assert.equal(fresh.read([{ key: "r", have: 0n }])[0].value, "round answered");
});

test("the gate runs a round over authenticated storage and pseudonyms and refuses a rewritten value", async () => {

  const keys = new HostKeys("k1", new Uint8Array(32).fill(7));
  const names = new Pseudonyms(keys);
  const clock = new ManualClock();
  const inner = new MemoryStorage(clock);
  const audit = new MemoryAudit();
  const gate = await Gate.create(
    { clock, storage: new AuthenticatedStorage(inner, keys), consent: new CallbackConsent(() => true), audit },
  );
  const user = names.user("ada@example.com");
  const tenant = names.tenant("acme");
  const open = async (id, retryId) => {
    await gate.register({ requestId: id, server: SERVER, user, tenant, method: "tools/call", params: PARAMS });
    assert.equal((await gate.acceptResponse(SERVER, formRound(id))).kind, "input_required");
    for (const k of inner.liveKeys()) assert.ok(inner.read([{ key: k, have: 0n }])[0].value.startsWith("mac2.k1."));
    return () => gate.buildRetry({ server: SERVER, requestId: id, retryId, user, tenant, responses: ANSWERS });
  };

  await (await open(1, 2))();
  const done = JSON.stringify({ jsonrpc: "2.0", id: 2, result: { resultType: "complete", content: [] } });
  assert.deepEqual(await gate.acceptResponse(SERVER, done), { kind: "complete" });
  assert.equal(inner.size, 0);
  assert.ok(!audit.lines.some((l) => l.includes("ada@example.com") || l.includes('"acme"')));

  const retry = await open(3, 4);
  let rewritten = 0;
  for (const k of inner.liveKeys()) {
    const found = inner.read([{ key: k, have: 0n }])[0];
    const forged = found.value.replace('"party":4', '"party":40');
    if (forged !== found.value) rewritten += inner.write([{ key: k, expected: found.version, value: forged, ttlMs: 60_000n }]).length;
  }
  assert.ok(rewritten > 0);
  await assert.rejects(retry(), (e) => e instanceof GateError && e.code === "storage_failed");
});
