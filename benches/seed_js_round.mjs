// Times the seed's JavaScript gate (../shared/peers/seed-js, its code unchanged, Ajv pinned
// by its own package.json) on the same full form round as `mrtr-gate-testkit bench`: register,
// accept a 3-field form with state parsed from the wire (as a client receives it), build
// the retry. Prints min/median/max in microseconds and the heap retained per round.
//
// Usage: node seed_js_round.mjs <path-to-a-copy-of-seed-js> [rounds]
import { pathToFileURL } from "node:url";
import path from "node:path";

const [dir, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 2000);
const gate = await import(pathToFileURL(path.join(dir, "src/mrtr/inputRequiredGate.js")).href);

const params = { name: "book_flight", arguments: { from: "OSL", to: "SFO" }, _meta: {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {} } } } };
const schema = { type: "object", title: "Passenger", properties: {
  full_name: { type: "string", minLength: 1, maxLength: 100 },
  seat: { type: "string", enum: ["aisle", "window"] },
  bags: { type: "integer", minimum: 0, maximum: 3 } }, required: ["full_name", "seat"] };

function round(n) {
  const id = n * 2;
  gate.registerActiveRequest({ requestId: id, serverOrigin: "https://flights.example.com", subject: "alice",
    tenantId: "acme", method: "tools/call", params, maximumRoundTripMs: 300000, maximumRequestStateBytes: 65536 });
  const text = JSON.stringify({ jsonrpc: "2.0", id, result: { resultType: "input_required",
    inputRequests: { passenger: { method: "elicitation/create", params: { message: "Who is flying?", requestedSchema: schema } } },
    requestState: "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw" } });
  const response = JSON.parse(text);
  gate.acceptInputRequired({ requestId: id, serverOrigin: "https://flights.example.com", result: response.result });
  const retry = gate.buildRetry({ requestId: id, retryId: id + 1, subject: "alice", tenantId: "acme",
    inputResponses: { passenger: { action: "accept", content: { full_name: "Alice Example", seat: "aisle", bags: 1 } } } });
  return JSON.stringify(retry);
}

for (let n = 0; n < 50; n++) round(n);
globalThis.gc?.();
const heapBefore = process.memoryUsage().heapUsed;
const samples = [];
for (let n = 50; n < 50 + rounds; n++) {
  const t = process.hrtime.bigint();
  round(n);
  samples.push(Number(process.hrtime.bigint() - t) / 1000);
}
globalThis.gc?.();
const heapAfter = process.memoryUsage().heapUsed;
samples.sort((a, b) => a - b);
console.log(JSON.stringify({
  engine: "seed js gate (node " + process.version + ")",
  rounds,
  min_us: samples[0],
  median_us: samples[Math.floor(samples.length / 2)],
  max_us: samples[samples.length - 1],
  heap_retained_bytes_per_round: (heapAfter - heapBefore) / rounds,
}));
