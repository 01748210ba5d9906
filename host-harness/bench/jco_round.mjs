// Times the mrtr:gate component on Node through jco (transpiled by `scripts/bench`) on the
// same full round as `mrtr-gate bench` (form, schema seen): register, accept the
// `input_required` (a 3-field form with state), consent, audit appends (each read back), build
// the retry, accept `complete`. The host services are the reference ones written in
// JavaScript: a wall clock, a versioned in-memory store with TTL and compare-and-swap, a
// consent provider that grants exactly what it is shown, and an in-memory hash-chained
// audit sink that keeps its newest 1,024 lines. Prints min/median/max in microseconds and
// the heap retained per round, as one JSON line.
//
// Usage: node --expose-gc jco_round.mjs <transpiled-folder> [rounds] [--snapshot-env]
//
// --snapshot-env replaces `process.env` by a plain copy first. jco 1.35's glue reads
// `process.env.JCO_DEBUG` on every import call, and Node's `process.env` reads the
// environment on each access: a large share of a round went there (measured with
// --cpu-prof; the figure is in docs/performance.md).
import { readFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [dir, roundsArg, ...flags] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 2000);
const snapshotEnv = flags.includes("--snapshot-env");
if (snapshotEnv) process.env = { ...process.env };
const { instantiate } = await import(pathToFileURL(path.join(dir, "gate.js")).href);

// ---- host services ---------------------------------------------------------------------
const clock = { nowMs: () => BigInt(Date.now()) };

const slots = new Map();
let nextVersion = 1n;
const live = (key) => {
  const s = slots.get(key);
  if (s && s.expiresAt > Date.now()) return s;
  if (s) slots.delete(key);
  return undefined;
};
const storage = {
  read: (keys) => keys.map((key) => {
    const s = live(key);
    return s ? { version: s.version, value: s.value } : { version: 0n, value: "" };
  }),
  write: (writes) => {
    const applied = [];
    for (const { key, expected, value, ttlMs } of writes) {
      const current = live(key);
      if ((current ? current.version : 0n) !== expected) break;
      if (value === undefined) {
        slots.delete(key);
        applied.push(0n);
        continue;
      }
      const version = nextVersion++;
      slots.set(key, { value, version, expiresAt: Date.now() + Number(ttlMs) });
      applied.push(version);
    }
    return applied;
  },
  listKeys: (prefix) => [...slots.keys()].filter((k) => k.startsWith(prefix) && live(k)),
};

let receipts = 0;
const consent = {
  requestConsent: (prompt) => ({
    receiptId: `consent-${++receipts}`,
    decision: "granted",
    viewSha256: prompt.viewSha256,
    responsesSha256: prompt.responsesSha256,
  }),
};

const WINDOW = 1024;
const lines = new Map();
let head = { seq: 0n, eventSha256: "0".repeat(64) };
const audit = {
  append: (entry) => {
    if (entry.seq !== head.seq + 1n || entry.prevSha256 !== head.eventSha256) {
      return { written: false, stored: undefined, headSeq: head.seq, headSha256: head.eventSha256 };
    }
    lines.set(entry.seq, entry.line);
    lines.delete(entry.seq - BigInt(WINDOW));
    head = { seq: entry.seq, eventSha256: entry.eventSha256 };
    return { written: true, stored: lines.get(entry.seq), headSeq: head.seq, headSha256: head.eventSha256 };
  },
};

const gateModule = await instantiate(
  async (file) => WebAssembly.compile(await readFile(path.join(dir, file))),
  {
    "mrtr:gate/clock": clock,
    "mrtr:gate/storage": storage,
    "mrtr:gate/consent": consent,
    "mrtr:gate/audit": audit,
  },
);
const gate = gateModule.gate;

// ---- the round ---------------------------------------------------------------------------
const server = { tag: "origin", val: "https://flights.example.com/mcp" };
const params = JSON.stringify({ name: "book_flight", arguments: { from: "OSL", to: "SFO" }, _meta: {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {}, url: {} } } } });
const schema = { type: "object", title: "Passenger", properties: {
  full_name: { type: "string", minLength: 1, maxLength: 100 },
  seat: { type: "string", enum: ["aisle", "window"] },
  bags: { type: "integer", minimum: 0, maximum: 3 } }, required: ["full_name", "seat"] };
const policy = { roundTripLifetimeMs: 300000n, maxRequestStateBytes: 65536, maxRounds: 10,
  allowedDeprecated: [], policyVersion: "default" };
const answers = JSON.stringify({ passenger: { action: "accept",
  content: { full_name: "Alice Example", seat: "aisle", bags: 1 } } });

function input(n) {
  const id = BigInt(n * 2);
  return {
    register: { requestId: { tag: "number", val: id }, server, user: "alice", tenant: "acme",
      method: "tools/call", paramsJson: params, policy },
    inputRequired: JSON.stringify({ jsonrpc: "2.0", id: n * 2, result: { resultType: "input_required",
      inputRequests: { passenger: { method: "elicitation/create",
        params: { message: "Who is flying?", requestedSchema: schema } } },
      requestState: "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw" } }),
    retry: { server, requestId: { tag: "number", val: id }, retryId: { tag: "number", val: id + 1n },
      user: "alice", tenant: "acme", responsesJson: answers },
    complete: JSON.stringify({ jsonrpc: "2.0", id: n * 2 + 1, result: { resultType: "complete", content: [] } }),
  };
}

function round(x) {
  gate.register(x.register);
  const v = gate.acceptResponse(server, x.inputRequired);
  if (v.tag !== "input-required") throw new Error(`expected input-required, got ${v.tag}`);
  const retry = gate.buildRetry(x.retry);
  if (!retry.requestJson.includes("inputResponses")) throw new Error("the retry lost its answers");
  const done = gate.acceptResponse(server, x.complete);
  if (done.tag !== "complete") throw new Error(`expected complete, got ${done.tag}`);
}

const warmup = 200;
const inputs = Array.from({ length: warmup + rounds }, (_, n) => input(n));
for (let n = 0; n < warmup; n++) round(inputs[n]);
globalThis.gc?.();
const heapBefore = process.memoryUsage().heapUsed;
const samples = [];
for (let n = warmup; n < warmup + rounds; n++) {
  const x = inputs[n];
  const t = process.hrtime.bigint();
  round(x);
  samples.push(Number(process.hrtime.bigint() - t) / 1000);
}
globalThis.gc?.();
globalThis.gc?.();
const heapAfter = process.memoryUsage().heapUsed;
if (slots.size !== 0) throw new Error(`the store holds ${slots.size} keys after every round ended`);
samples.sort((a, b) => a - b);
console.log(JSON.stringify({
  engine: "component (jco" + (snapshotEnv ? ", env snapshot" : "") + ", node " + process.version + ")",
  workload: "form, schema seen",
  rounds,
  min_us: samples[0],
  median_us: samples[Math.floor(samples.length / 2)],
  max_us: samples[samples.length - 1],
  heap_retained_bytes_per_round: (heapAfter - heapBefore) / rounds,
}));
