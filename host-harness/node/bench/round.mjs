// Times the mrtr:gate component on Node through the mrtr-gate package (jco glue, reference
// hosts) on the same full round as `mrtr-gate-testkit bench` and host-harness/python/bench/round.py
// (form, schema seen): register, accept the `input_required` (a 3-field form with state),
// consent, audit appends (each read back), build the retry, accept `complete`. The hosts: a
// wall clock, the in-memory store, a consent callback that grants, the in-memory audit sink
// keeping its newest 1,024 lines. Prints min/median/max in microseconds and the heap retained
// per round as one JSON line (the format `mrtr-gate-testkit bench --external` reads).
//
// Usage: node --expose-gc bench/round.mjs [rounds]
import { readFileSync } from "node:fs";
import { Gate } from "../src/index.js";
import { CallbackConsent, MemoryAudit, MemoryStorage, SystemClock } from "../src/hosts.js";

const rounds = Number(process.argv[2] ?? 2000);
const jco = JSON.parse(readFileSync(new URL("../package-lock.json", import.meta.url))).packages["node_modules/@bytecodealliance/jco"].version;
const clock = new SystemClock();
const storage = new MemoryStorage(clock);
const gate = await Gate.create({ clock, storage, consent: new CallbackConsent(() => true), audit: new MemoryAudit(1024) });

const server = { origin: "https://flights.example.com/mcp" };
const params = JSON.stringify({ name: "book_flight", arguments: { from: "OSL", to: "SFO" }, _meta: {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {}, url: {} } } } });
const schema = { type: "object", title: "Passenger", properties: {
  full_name: { type: "string", minLength: 1, maxLength: 100 },
  seat: { type: "string", enum: ["aisle", "window"] },
  bags: { type: "integer", minimum: 0, maximum: 3 } }, required: ["full_name", "seat"] };
const answers = JSON.stringify({ passenger: { action: "accept", content: { full_name: "Alice Example", seat: "aisle", bags: 1 } } });

const input = (n) => ({
  id: n * 2,
  inputRequired: JSON.stringify({ jsonrpc: "2.0", id: n * 2, result: { resultType: "input_required",
    inputRequests: { passenger: { method: "elicitation/create", params: { message: "Who is flying?", requestedSchema: schema } } },
    requestState: "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw" } }),
  complete: JSON.stringify({ jsonrpc: "2.0", id: n * 2 + 1, result: { resultType: "complete", content: [] } }),
});

async function round(x) {
  await gate.register({ requestId: x.id, server, user: "alice", tenant: "acme", method: "tools/call", params });
  const v = await gate.acceptResponse(server, x.inputRequired);
  if (v.kind !== "input_required") throw new Error(`expected input_required, got ${v.kind}`);
  const retry = await gate.buildRetry({ server, requestId: x.id, retryId: x.id + 1, user: "alice", tenant: "acme", responses: answers });
  if (!retry.requestJson.includes("inputResponses")) throw new Error("the retry lost its answers");
  const done = await gate.acceptResponse(server, x.complete);
  if (done.kind !== "complete") throw new Error(`expected complete, got ${done.kind}`);
}

const warmup = 200;
const inputs = Array.from({ length: warmup + rounds }, (_, n) => input(n));
for (let n = 0; n < warmup; n++) await round(inputs[n]);
globalThis.gc?.();
const heapBefore = process.memoryUsage().heapUsed;
const samples = [];
for (let n = warmup; n < warmup + rounds; n++) {
  const t = process.hrtime.bigint();
  await round(inputs[n]);
  samples.push(Number(process.hrtime.bigint() - t) / 1000);
}
globalThis.gc?.();
globalThis.gc?.();
const heapAfter = process.memoryUsage().heapUsed;
if (storage.size !== 0) throw new Error(`the store holds ${storage.size} keys after every round ended`);
samples.sort((a, b) => a - b);
console.log(JSON.stringify({
  engine: `component (jco ${jco}, node ${process.version})`,
  workload: "form, schema seen",
  rounds,
  min_us: samples[0],
  median_us: samples[Math.floor(samples.length / 2)],
  max_us: samples[samples.length - 1],
  heap_retained_bytes_per_round: (heapAfter - heapBefore) / rounds,
}));
