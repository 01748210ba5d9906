// The gate inside the official TypeScript SDK client (src/sdk-client.js over
// @modelcontextprotocol/client 2.4.0 in manual mode), against the official TypeScript SDK's
// server over streamable HTTP (tests/peers/ts_sdk/server.mjs http) and against a raw HTTP
// server that sends what no SDK sends. Each case asserts what the app ends up with, what went
// on the wire (the gate's own text, never the SDK's re-encoding) and the audit trail.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Gate, GateError } from "mrtr-gate";
import { CallbackConsent, MemoryAudit, MemoryStorage, SystemClock } from "mrtr-gate/hosts";
import { GatedSdkClient, SdkAdapterError } from "mrtr-gate/sdk-client";

const serverPath = fileURLToPath(new URL("../../../tests/peers/ts_sdk/server.mjs", import.meta.url));
const SECRETS = ["SECRET-SESSION", "Ada Lovelace"];
let peer;
let url;

// The peer listens on a port it picks and prints its URL once it listens: no port is picked
// and freed first (another process could take it) and nothing polls (a poll can connect to
// itself, or give up under load).
before(async () => {
  peer = spawn(process.execPath, [serverPath, "http", "0"], { stdio: ["ignore", "pipe", "ignore"] });
  url = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: peer.stdout });
    lines.once("line", (line) => {
      const rest = line.startsWith("listening on ") ? line.slice("listening on ".length) : null;
      if (rest) resolve(rest);
      else reject(new Error(`not a ready line: ${line}`));
      // Drained, never left to fill the pipe.
      lines.on("line", () => {});
    });
    peer.once("exit", () => reject(new Error("the peer exited before it listened")));
  });
});

after(() => peer.kill());

async function setup(target, { answer, consent = () => true, openUrl = () => {} } = {}) {
  const clock = new SystemClock();
  const audit = new MemoryAudit();
  const gate = await Gate.create({ clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(consent), audit });
  const wire = [];
  const recording = async (input, init) => {
    if (typeof init?.body === "string") wire.push(JSON.parse(init.body));
    return fetch(input, init);
  };
  const shown = [];
  const gated = new GatedSdkClient({
    gate, url: target, user: "alice", tenant: "acme",
    answer: async (view) => { shown.push(view); return answer(view); },
    openUrl, fetch: recording,
  });
  const client = new Client({ name: "gated-test", version: "1" },
    GatedSdkClient.clientOptions({ capabilities: { elicitation: { form: {}, url: {} } } }));
  await client.connect(new StreamableHTTPClientTransport(new URL(target), { fetch: gated.fetch }));
  gated.attach(client);
  const events = () => audit.lines.map((l) => JSON.parse(l));
  const checkTrail = () => {
    const all = events();
    for (const id of new Set(all.filter((e) => e.event === "received").map((e) => e.request_id))) {
      assert.equal(all.filter((e) => e.event === "terminal" && e.request_id === id).length, 1, `binding ${id}`);
    }
    for (const line of audit.lines) for (const s of SECRETS) assert.ok(!line.includes(s), s);
  };
  return { gated, client, wire, shown, events, checkTrail };
}

const text = (result) => result.content[0].text;

test("a form round: the retry on the wire is the gate's, on a new id", async () => {
  const c = await setup(url, { answer: () => ({ passenger: { action: "accept", content: { full_name: "Ada Lovelace", seat: "window" } } }) });
  const result = await c.gated.callTool({ name: "book_flight", arguments: { origin: "OSL", destination: "SFO" } });
  assert.equal(text(result), 'booked OSL-SFO: {"passenger":{"action":"accept","content":{"full_name":"Ada Lovelace","seat":"window"}}}');
  assert.equal(c.shown[0].inputs[0].fields.find((f) => f.name === "seat").type, "single_select");
  const calls = c.wire.filter((m) => m.method === "tools/call");
  assert.equal(calls.length, 2);
  const [first, retry] = calls;
  assert.notEqual(first.id, retry.id);
  assert.equal(first.params.inputResponses, undefined);
  assert.equal(retry.params.requestState, "OSL-SFO");
  assert.deepEqual(Object.keys(retry.params.inputResponses), ["passenger"]);
  for (const m of calls) assert.equal(m.params._meta["mrtr-gate/call"], undefined, "the adapter's mark never reaches the server");
  assert.equal(retry.params._meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
  assert.deepEqual(c.events().map((e) => e.event), ["received", "consented", "submitted", "terminal"]);
  c.checkTrail();
  await c.client.close();
});

test("a url round: opened only after consent, and only the url the user saw", async () => {
  const opened = [];
  const c = await setup(url, { answer: () => ({ pay: { action: "accept" } }), openUrl: (u) => opened.push(u) });
  const result = await c.gated.callTool({ name: "pay", arguments: { amount: 42 } });
  assert.equal(text(result), 'paid 42: {"pay":{"action":"accept"}}');
  assert.deepEqual(opened, ["https://pay.example.com/authorize?session=SECRET-SESSION"]);
  c.checkTrail();
  await c.client.close();
});

test("a refused consent sends nothing and opens nothing", async () => {
  const opened = [];
  const c = await setup(url, { answer: () => ({ pay: { action: "accept" } }), consent: () => false, openUrl: (u) => opened.push(u) });
  await assert.rejects(c.gated.callTool({ name: "pay", arguments: { amount: 42 } }),
    (e) => e instanceof GateError && e.code === "consent_refused");
  assert.deepEqual(opened, []);
  assert.equal(c.wire.filter((m) => m.method === "tools/call").length, 1, "no retry went out");
  assert.deepEqual(c.events().map((e) => [e.event, e.outcome]), [["received", "accepted"], ["rejected", "denied"], ["terminal", "cancelled"]]);
  c.checkTrail();
  await c.client.close();
});

test("a state-only round is retried without asking the app", async () => {
  const c = await setup(url, { answer: () => assert.fail("nothing to answer") });
  const result = await c.gated.callTool({ name: "continue_job", arguments: {} });
  assert.equal(text(result), "job done after step-1");
  assert.deepEqual(c.events().map((e) => e.event), ["received", "submitted", "terminal"]);
  c.checkTrail();
  await c.client.close();
});

test("cancelling in the app ends the binding and sends nothing", async () => {
  const c = await setup(url, { answer: () => null });
  await assert.rejects(c.gated.callTool({ name: "book_flight", arguments: { origin: "A", destination: "B" } }),
    (e) => e instanceof SdkAdapterError && e.code === "cancelled");
  assert.deepEqual(c.events().map((e) => [e.event, e.outcome]), [["received", "accepted"], ["terminal", "cancelled"]]);
  await c.client.close();
});

test("a gated method sent around the adapter is refused before it leaves", async () => {
  const c = await setup(url, { answer: () => ({}) });
  await assert.rejects(c.client.callTool({ name: "continue_job", arguments: {} }), (e) => e instanceof SdkAdapterError && e.code === "not_gated");
  assert.equal(c.wire.filter((m) => m.method === "tools/call").length, 0);
  await c.client.close();
});

// A server no SDK would write: raw JSON-RPC over HTTP (discover is answered so the SDK's era
// pin is met).
async function rawServer(answers) {
  const srv = createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    const m = JSON.parse(body);
    if (m.id === undefined) { res.writeHead(202).end(); return; }
    const out = m.method === "server/discover"
      ? JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { resultType: "complete", supportedVersions: ["2026-07-28"], capabilities: { tools: {}, resources: {} }, serverInfo: { name: "raw", version: "1" }, ttlMs: 0, cacheScope: "private" } })
      : answers[m.method](JSON.stringify(m.id), m);
    res.writeHead(200, { "content-type": "application/json" }).end(out);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${srv.address().port}/mcp`, close: () => srv.close() };
}

test("bytes the SDK would re-encode are judged as received: a duplicate resultType is refused", async () => {
  const raw = await rawServer({
    "tools/call": (id) => `{"jsonrpc":"2.0","id":${id},"result":{"resultType":"input_required","requestState":"s","resultType":"complete","content":[]}}`,
  });
  const c = await setup(raw.url, { answer: () => ({}) });
  await assert.rejects(c.gated.callTool({ name: "x", arguments: {} }), (e) => e instanceof GateError && e.code === "duplicate_json_key");
  c.checkTrail();
  await c.client.close();
  raw.close();
});

test("input_required on tools/list is refused before the SDK sees it", async () => {
  const raw = await rawServer({
    "tools/list": (id) => `{"jsonrpc":"2.0","id":${id},"result":{"resultType":"input_required","requestState":"list-state"}}`,
  });
  const c = await setup(raw.url, { answer: () => ({}) });
  await assert.rejects(c.client.listTools(), (e) => e instanceof GateError && e.code === "input_required_not_allowed" && e.audited);
  const refused = c.events().at(-1);
  assert.deepEqual([refused.event, refused.reason], ["rejected", "input_required_not_allowed"]);
  await c.client.close();
  raw.close();
});

test("every read passes the gate: the SDK's cache neither serves a gated read nor keeps a retry's result", async () => {
  const hints = { ttlMs: 600000, cacheScope: "private" };
  const raw = await rawServer({
    "resources/read": (id, m) => {
      const uri = m.params.uri;
      const result = uri === "probe://plain" || m.params.requestState !== undefined
        ? { resultType: "complete", ...hints, contents: [{ uri, text: m.params.requestState ?? "plain" }] }
        : { resultType: "input_required", requestState: `S-${id}`, inputRequests: { ok: { method: "elicitation/create", params: { mode: "form", message: "Show it?", requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] } } } } };
      return JSON.stringify({ jsonrpc: "2.0", id: JSON.parse(id), result });
    },
  });
  const c = await setup(raw.url, { answer: () => ({ ok: { action: "accept", content: { ok: true } } }) });
  const first = await c.gated.readResource({ uri: "probe://quote" });
  const second = await c.gated.readResource({ uri: "probe://quote" });
  assert.notEqual(first.contents[0].text, second.contents[0].text, "the second read was answered by a round of its own");
  await c.gated.readResource({ uri: "probe://plain" });
  await c.gated.readResource({ uri: "probe://plain" });
  const reads = c.wire.filter((m) => m.method === "resources/read");
  assert.deepEqual(reads.map((m) => [m.params.uri, m.params.requestState !== undefined]), [
    ["probe://quote", false], ["probe://quote", true], ["probe://quote", false], ["probe://quote", true],
    ["probe://plain", false], ["probe://plain", false],
  ]);
  c.checkTrail();
  await c.client.close();
  raw.close();
});
