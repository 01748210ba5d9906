// The JavaScript package's own behaviour: the API, hostile services (every bad value is a
// host error, never a trap), traps and fresh instances.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Gate, GateError, HostError } from "mrtr-gate";
import { CallbackConsent, DecidedConsent, ManualClock, MemoryAudit, MemoryStorage } from "mrtr-gate/hosts";
import { ANSWERS, META, PARAMS, SERVER, complete, formRound } from "./support.js";

async function fx(overrides = {}) {
  const clock = new ManualClock();
  const services = { clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new MemoryAudit(), ...overrides };
  const gate = await Gate.create(services);
  return {
    gate, ...services,
    register: (id = 1) => gate.register({ requestId: id, server: SERVER, user: "alice", tenant: "acme", method: "tools/call", params: PARAMS }),
    retry: (id = 1, retryId = 2) => gate.buildRetry({ server: SERVER, requestId: id, retryId, user: "alice", tenant: "acme", responses: ANSWERS }),
  };
}

async function denied(code, promise) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof GateError, `not a GateError: ${e}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

test("a form round end to end", async () => {
  const f = await fx();
  const sent = await f.register();
  assert.deepEqual(JSON.parse(sent.requestJson).params.arguments, { party: 4 });
  const v = await f.gate.acceptResponse(SERVER, formRound(1));
  assert.equal(v.kind, "input_required");
  assert.deepEqual(v.inputKeys, ["contact"]);
  assert.equal(v.view.request.name, "book");
  assert.strictEqual(v.view, v.view, "the view is parsed once, every reader gets that parse");
  const r = await f.retry();
  assert.deepEqual(JSON.parse(r.requestJson).params.inputResponses, ANSWERS);
  assert.equal(r.consentReceiptId, "consent-1");
  assert.deepEqual(await f.gate.acceptResponse(SERVER, complete(2)), { kind: "complete" });
  assert.equal(f.storage.size, 0);
  assert.deepEqual(f.audit.lines.map((l) => JSON.parse(l).event), ["received", "consented", "submitted", "terminal"]);
});

test("a client's own retry is held to its round and goes out as the gate writes it", async () => {
  const f = await fx();
  await f.register();
  await f.gate.acceptResponse(SERVER, formRound(1));
  const mine = { name: "book", arguments: { party: 4 }, _meta: { progressToken: 3 }, inputResponses: ANSWERS };
  const args = { server: SERVER, retryId: "c-2", user: "alice", tenant: "acme", method: "tools/call" };
  await assert.rejects(f.gate.retryFromClient({ ...args, requestId: null, params: mine }),
    (e) => e.code === "inactive_mrtr_round" && e.audited);
  assert.equal(JSON.parse(f.audit.lines.at(-1)).retry_id, "c-2");
  await assert.rejects(f.gate.retryFromClient({ ...args, requestId: 1, params: { ...mine, arguments: { party: 40 } } }),
    (e) => e.code === "mrtr_identity_or_argument_mismatch" && e.audited);
  const r = await f.gate.retryFromClient({ ...args, requestId: 1, params: JSON.stringify(mine) });
  const sent = JSON.parse(r.requestJson);
  assert.equal(sent.id, "c-2");
  assert.deepEqual(sent.params._meta, META);
  assert.deepEqual(sent.params.inputResponses, ANSWERS);
  assert.equal(r.consentReceiptId, "consent-1");
});

test("a server's request outside a round is refused and audited", async () => {
  const f = await fx();
  const e = await f.gate.refuseUnbound({ server: SERVER, user: "alice", tenant: "acme", refusal: "server-request", method: "roots/list" });
  assert.ok(e instanceof GateError);
  assert.equal(e.code, "legacy_server_request");
  assert.equal(e.cause, "peer");
  assert.equal(e.audited, true);
  assert.equal(JSON.parse(f.audit.lines.at(-1)).method, "roots/list");
});

test("each input channel outside a round is refused and audited", async () => {
  const f = await fx();
  for (const [refusal, code, cause] of [
    ["input-required", "input_required_not_allowed", "peer"],
    ["input-requests-notified", "input_requests_not_bound", "peer"],
    ["input-responses", "input_responses_not_bound", "caller"],
  ]) {
    const e = await f.gate.refuseUnbound({ server: SERVER, user: "alice", tenant: "acme", refusal });
    assert.deepEqual([e.code, e.cause, e.audited], [code, cause, true]);
    const line = JSON.parse(f.audit.lines.at(-1));
    assert.deepEqual([line.event, line.reason, line.method], ["rejected", code, null]);
  }
});

test("refuseUnbound takes a method with a server request, and only then", async () => {
  const f = await fx();
  for (const args of [
    { refusal: "server-request" },
    { refusal: "input-required", method: "roots/list" },
    { refusal: "serverRequest", method: "roots/list" },
    { refusal: "server-request", method: 7 },
  ]) {
    await assert.rejects(f.gate.refuseUnbound({ server: SERVER, user: "alice", tenant: "acme", ...args }), (e) => e instanceof GateError && e.code === "invalid_argument" && e.cause === "caller" && !e.audited);
  }
  assert.deepEqual(f.audit.lines, []);
});

test("consent decided in advance by a dialog is found for exactly what it showed", async () => {
  const consent = new DecidedConsent();
  const f = await fx({ consent });
  await f.register();
  const v = await f.gate.acceptResponse(SERVER, formRound(1));
  // Nobody decided yet: no receipt, no retry; the round stays open.
  await denied("consent_unavailable", f.retry());
  const responsesJson = JSON.stringify({ contact: ANSWERS.contact });
  const digest = async (t) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(t)))].map((b) => b.toString(16).padStart(2, "0")).join("");
  // The gate hashes the canonical answers; these answers are canonical already.
  consent.decide(v.viewSha256, await digest(responsesJson), true);
  const r = await f.retry();
  assert.equal(r.consentReceiptId, "consent-1");
});

test("the consented event names how the decision was made", async () => {
  for (const [method, recorded] of [[undefined, "user_at_screen"], ["preset-answers", "preset_answers"],
    ["delegated-to-client", "delegated_to_client"], ["policy-hook", "policy_hook"]]) {
    const f = await fx({ consent: new CallbackConsent(() => true, method) });
    await f.register();
    await f.gate.acceptResponse(SERVER, formRound(1));
    await f.retry();
    const events = f.audit.lines.map((l) => JSON.parse(l));
    assert.deepEqual(events.map((e) => e.consent_method), [null, recorded, null]);
  }
});

test("a receipt with no method, or one the WIT does not know, denies", async () => {
  assert.throws(() => new CallbackConsent(() => true, "a-person-probably"), TypeError);
  for (const method of [undefined, "user_at_screen", "USER-AT-SCREEN", 1]) {
    const f = await fx({ consent: { requestConsent: (p) => ({ receiptId: "r-1", decision: "granted", method,
      viewSha256: p.viewSha256, responsesSha256: p.responsesSha256 }) } });
    await f.register();
    await f.gate.acceptResponse(SERVER, formRound(1));
    await denied("consent_unavailable", f.retry());
    assert.equal(f.gate.traps, 0);
  }
});

for (const bad of [-1, 1.5, "now", null, 2 ** 64]) {
  test(`a clock returning ${bad} denies as clock_out_of_range, never traps`, async () => {
    const f = await fx({ clock: { nowMs: () => bad } });
    await denied("clock_out_of_range", f.register());
    assert.equal(f.gate.traps, 0);
  });
}

for (const how of ["throw", "host_error", "short", "bad_version", "not_a_list"]) {
  test(`a store that fails or lies on read (${how}) denies, audited, and the instance survives`, async () => {
    const clock = new ManualClock();
    const storage = new MemoryStorage(clock);
    const read = storage.read.bind(storage);
    let mode = null;
    storage.read = (keys) => {
      if (mode === "throw") throw new TypeError("boom");
      if (mode === "host_error") throw new HostError("store down");
      if (mode === "short") return read(keys).slice(1);
      if (mode === "bad_version") return keys.map(() => ({ version: -1, value: "x" }));
      if (mode === "not_a_list") return null;
      return read(keys);
    };
    const f = await fx({ clock, storage });
    await f.register();
    mode = how;
    await assert.rejects(f.gate.acceptResponse(SERVER, formRound(1)), (e) => e.code === "storage_failed" && e.audited);
    assert.equal(f.gate.traps, 0);
    mode = null;
    assert.equal((await f.gate.acceptResponse(SERVER, formRound(1))).kind, "input_required");
  });
}

test("a consent provider that answers nonsense denies and the round stays open", async () => {
  let answer = { receiptId: 7 };
  const f = await fx({ consent: { requestConsent: () => answer } });
  await f.register();
  await f.gate.acceptResponse(SERVER, formRound(1));
  await denied("consent_unavailable", f.retry());
  answer = null;
  await denied("consent_unavailable", f.retry());
  assert.equal(f.gate.traps, 0);
});

test("an audit sink that loses writes or answers nonsense denies", async () => {
  const f = await fx();
  await f.register();
  f.audit.fault = "lose_writes";
  await denied("audit_readback_mismatch", f.gate.acceptResponse(SERVER, formRound(1)));
  const g = await fx({ audit: { append: () => ({ written: "yes" }) } });
  await g.register();
  await denied("audit_write_failed", g.gate.acceptResponse(SERVER, formRound(1)));
});

test("a trap denies as guest_trapped and the next call gets a fresh instance", async () => {
  // The sandbox traps when the guest aborts (memory exhausted, a bug); the instance is then
  // dead. Here the first instance's call traps as a trapped instance's does.
  const clock = new ManualClock();
  const services = { clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new MemoryAudit() };
  const real = await Gate.create(services);
  await real.register({ requestId: 1, server: SERVER, user: "alice", tenant: "acme", method: "tools/call", params: PARAMS });
  const { __testImports, componentLoader, instantiate } = await import("mrtr-gate/internal");
  const loadCoreModule = await componentLoader();
  let made = 0;
  const gate = new Gate(async () => {
    made += 1;
    if (made === 1) return { acceptResponse: () => { throw new WebAssembly.RuntimeError("unreachable"); } };
    return (await instantiate(loadCoreModule, __testImports(services)))["mrtr:gate/gate@0.6.0"];
  }, services);
  await assert.rejects(gate.acceptResponse(SERVER, formRound(1)), (e) => e.code === "guest_trapped" && e.cause === "host" && !e.audited);
  assert.equal(gate.traps, 1);
  // Nothing was lost: the binding lives in storage.
  assert.equal((await gate.acceptResponse(SERVER, formRound(1))).kind, "input_required");
  assert.equal(made, 2);
});

test("a service whose values throw when read is a host error, not a trap", async () => {
  const f = await fx({ consent: { requestConsent: () => ({ get receiptId() { throw new Error("getter"); } }) } });
  await f.register();
  await f.gate.acceptResponse(SERVER, formRound(1));
  await denied("consent_unavailable", f.retry());
  assert.equal(f.gate.traps, 0);
});

for (const [args, code] of [
  [{ requestId: 2 ** 60 }, "invalid_jsonrpc_request_id"],
  [{ requestId: 1.5 }, "invalid_jsonrpc_request_id"],
  [{ requestId: true }, "invalid_jsonrpc_request_id"],
  [{ server: "https://mcp.example.com/mcp" }, "invalid_server_identity"],
  [{ user: undefined }, "invalid_argument"],
  [{ params: ["not", "an", "object"] }, "invalid_argument"],
  [{ requestId: 2n ** 53n }, "invalid_jsonrpc_request_id"],
]) {
  test(`arguments the WIT cannot carry are refused: ${JSON.stringify(Object.keys(args))} -> ${code}`, async () => {
    const f = await fx();
    await denied(code, f.gate.register({ requestId: 1, server: SERVER, user: "alice", tenant: "acme", method: "tools/call", params: PARAMS, ...args }));
    assert.equal(f.gate.traps, 0);
  });
}

test("params given as text are sent byte for byte", async () => {
  const f = await fx();
  const text = `{"name":"book","arguments":{"n":9007199254740993},"_meta":${JSON.stringify(META)}}`;
  const sent = await f.gate.register({ requestId: 1, server: SERVER, user: "alice", tenant: "acme", method: "tools/call", params: text });
  assert.ok(sent.requestJson.includes('"n":9007199254740993'));
});

test("a schema mismatch names the field and the rule, escaped where read, never in the trail", async () => {
  const f = await fx();
  await f.register();
  await f.gate.acceptResponse(SERVER, formRound(1));
  const retry = (content) => f.gate.buildRetry({ server: SERVER, requestId: 1, retryId: 2, user: "alice", tenant: "acme",
    responses: { contact: { action: "accept", content } } });
  const refused = async (content) => {
    try {
      await retry(content);
    } catch (e) {
      assert.ok(e instanceof GateError && e.code === "input_response_schema_mismatch", `${e}`);
      return e;
    }
    assert.fail("not refused");
  };
  let e = await refused({ email: "not an address" });
  assert.equal(e.detail, "the content for `contact` does not match its requested schema: `email`: must be a valid email");
  assert.ok(e.message.includes(e.detail));
  const hostile = "em\u202eail";
  e = await refused({ email: "ada@example.com", [hostile]: "x" });
  assert.ok(e.detail.includes(`\`${hostile}\`: not in the schema`), e.detail);
  assert.ok(!e.message.includes("\u202e") && e.message.includes("em\\u{202e}ail"), e.message);
  assert.ok(f.audit.lines.length > 0);
  for (const line of f.audit.lines) {
    for (const text of ["must be a valid", "not in the schema", "\\u202e", hostile]) assert.ok(!line.includes(text), line);
  }
});

test("the answers are digested exactly as the gate digests them", async () => {
  const { readFileSync } = await import("node:fs");
  const { canonical, responsesSha256 } = await import("mrtr-gate/internal");
  const vectors = JSON.parse(readFileSync(new URL("../../../tests/canonical/responses_vectors.json", import.meta.url), "utf8"));
  assert.ok(vectors.length >= 6);
  for (const v of vectors) {
    const parsed = JSON.parse(v.responses_json);
    // A number beyond 2^53 is not held exactly in JavaScript (nor in the text this package
    // sends for it: the host sends what it digested). Every other vector must match.
    if (/\d{16,}/.test(v.responses_json)) {
      assert.notEqual(canonical(parsed), v.canonical);
      continue;
    }
    assert.equal(canonical(parsed), v.canonical, v.responses_json);
    assert.equal(await responsesSha256(v.responses_json), v.sha256);
  }
});

test("a decision recorded for the verdict and the answers is the consent the gate finds", async () => {
  const consent = new DecidedConsent();
  const f = await fx({ consent });
  await f.register();
  const v = await f.gate.acceptResponse(SERVER, formRound(1));
  await denied("consent_unavailable", f.retry());
  await consent.decideFor(v, { contact: { action: "decline" } }, true);
  await denied("consent_unavailable", f.retry());
  // The same answers as text, keys in another order: the same decision.
  const receipt = await consent.decideFor(v, JSON.stringify({ contact: { content: ANSWERS.contact.content, action: "accept" } }), true);
  const r = await f.retry();
  assert.equal(r.consentReceiptId, receipt);
  const consented = f.audit.lines.map((l) => JSON.parse(l)).filter((e) => e.event === "consented");
  assert.deepEqual(consented.map((e) => e.consent_method), ["user_at_screen"]);
});

test("a refusal recorded is consent_refused, and answers that are no object are refused when recorded", async () => {
  const consent = new DecidedConsent();
  const f = await fx({ consent });
  await f.register();
  const v = await f.gate.acceptResponse(SERVER, formRound(1));
  await consent.decideFor(v, ANSWERS, false, "preset-answers");
  await denied("consent_refused", f.retry());
  for (const bad of ["[]", "{", "\"text\"", [], null]) {
    await assert.rejects(consent.decideFor(v, bad, true));
  }
  await assert.rejects(consent.decideFor({}, ANSWERS, true), TypeError);
});

// The `digest` import: the package declines it (docs/performance.md); a host answering it
// through jco, declining it, or answering something that is not 64 lowercase hex digits (asked
// once, then never again) leaves the same trail, byte for byte.
async function roundTrail(sha256Hex) {
  const clock = new ManualClock();
  const services = { clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new MemoryAudit() };
  const { __testImports, componentLoader, instantiate } = await import("mrtr-gate/internal");
  const loadCoreModule = await componentLoader();
  const gate = new Gate(async () => (await instantiate(loadCoreModule, __testImports(services, sha256Hex)))["mrtr:gate/gate@0.6.0"], services);
  await gate.register({ requestId: 1, server: SERVER, user: "alice", tenant: "acme", method: "tools/call", params: PARAMS });
  await gate.acceptResponse(SERVER, formRound(1));
  await gate.buildRetry({ server: SERVER, requestId: 1, retryId: 2, user: "alice", tenant: "acme", responses: ANSWERS });
  await gate.acceptResponse(SERVER, complete(2));
  return services.audit.lines;
}

test("the digest import: answered, declined or malformed, the trail is the same", async () => {
  const { createHash } = await import("node:crypto");
  const hashed = (text) => createHash("sha256").update(text, "utf8").digest("hex");
  const asked = [];
  const answered = await roundTrail((text) => { asked.push(text); return hashed(text); });
  assert.ok(asked.length > 1 && asked.every((t) => Buffer.byteLength(t) >= 128), "only texts worth a call are sent");
  assert.deepEqual(await roundTrail(null), answered);
  for (const answer of [undefined, null, "", "XYZ", "A".repeat(64), "0".repeat(63), "0".repeat(65), "g".repeat(64), 7]) {
    asked.length = 0;
    assert.deepEqual(await roundTrail((text) => { asked.push(text); return answer; }), answered, String(answer));
    assert.equal(asked.length, 1, `${answer}: asked once, then hashed in the guest`);
  }
  // The package's own, as Gate.create links it.
  const f = await fx();
  await f.register();
  await f.gate.acceptResponse(SERVER, formRound(1));
  await f.retry();
  await f.gate.acceptResponse(SERVER, complete(2));
  assert.deepEqual(f.audit.lines, answered);
});
