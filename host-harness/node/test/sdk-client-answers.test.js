// The bytes the gate judged are the bytes the application receives: the official TypeScript
// SDK client (@modelcontextprotocol/client 2.4.0, through src/sdk-client.js) against
// tests/peers/python_sdk/differential_server.py, whose answers hold a harmless result where one
// reader looks and the real one where another looks. The application gets the harmless result
// or an error with the refusal's code, never `REAL-UNJUDGED`; a refusal after a round is
// audited as the binding's terminal event.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Gate } from "mrtr-gate";
import { CallbackConsent, MemoryAudit, MemoryStorage, SystemClock } from "mrtr-gate/hosts";
import { GatedSdkClient, SdkAdapterError } from "mrtr-gate/sdk-client";
import { StreamRefused, readAnswer, reframe } from "mrtr-gate/internal";

const serverPath = fileURLToPath(new URL("../../../tests/peers/python_sdk/differential_server.py", import.meta.url));
const REFUSED = [
  ["typed", "typed_event"],
  ["second", "duplicate_response"],
  ["other_id", "foreign_response"],
  ["batch", "batch_message"],
  ["batch_body", "batch_message"],
  ["other_id_body", "foreign_response"],
];
let server;
let url;

before(async () => {
  server = spawn(process.env.PYTHON ?? "python3", [serverPath], { stdio: ["pipe", "pipe", "inherit"] });
  const [port] = await once(server.stdout, "data");
  url = `http://127.0.0.1:${String(port).trim()}/mcp`;
});

after(() => server.stdin.end());

async function call(tool) {
  const clock = new SystemClock();
  const audit = new MemoryAudit();
  const gate = await Gate.create({ clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit });
  const gated = new GatedSdkClient({ gate, url, user: "alice", tenant: "acme", answer: () => ({}) });
  const client = new Client({ name: "gated-test", version: "1" },
    GatedSdkClient.clientOptions({ capabilities: { elicitation: { form: {}, url: {} } } }));
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: gated.fetch }));
  gated.attach(client);
  let outcome;
  try {
    outcome = await gated.callTool({ name: tool, arguments: {} });
  } catch (e) {
    outcome = e;
  }
  await client.close();
  return { outcome, events: audit.lines.map((l) => JSON.parse(l)) };
}

const seen = (o) => JSON.stringify(o?.content ?? o?.message ?? o);

test("a retry whose connection breaks fails with a typed error, once, and the binding ends", async () => {
  const { outcome, events } = await call("retry:close");
  assert.ok(outcome instanceof SdkAdapterError && outcome.code === "transport_failed", String(outcome));
  assert.deepEqual(events.map((e) => [e.event, e.outcome, e.reason ?? null]), [
    ["received", "accepted", null], ["submitted", "accepted", null], ["terminal", "error", "transport_failed"]]);
});

test("an answer another reader reads differently is refused on the first response", async (t) => {
  for (const [name, code] of REFUSED) {
    await t.test(name, async () => {
      const { outcome, events } = await call(`first:${name}`);
      assert.ok(!seen(outcome).includes("REAL-UNJUDGED"), seen(outcome));
      assert.ok(outcome instanceof SdkAdapterError && outcome.code === code, `${outcome?.code}: ${seen(outcome)}`);
      // Nothing says the call completed: the binding ended with the refusal's code on record.
      assert.deepEqual(events.map((e) => [e.event, e.outcome, e.reason, e.round]), [["terminal", "error", code, 0]]);
    });
  }
});

test("an answer another reader reads differently is refused and audited after a round", async (t) => {
  for (const [name, code] of REFUSED) {
    await t.test(name, async () => {
      const { outcome, events } = await call(`retry:${name}`);
      assert.ok(!seen(outcome).includes("REAL-UNJUDGED"), seen(outcome));
      assert.ok(outcome instanceof SdkAdapterError && outcome.code === code, `${outcome?.code}: ${seen(outcome)}`);
      assert.deepEqual(events.map((e) => [e.event, e.outcome, e.reason ?? null]),
        [["received", "accepted", null], ["submitted", "accepted", null], ["terminal", "error", code]]);
    });
  }
});

test("a clean stream passes its notification and the judged response", async () => {
  const { outcome, events } = await call("retry:clean");
  assert.ok(!(outcome instanceof Error), seen(outcome));
  assert.equal(outcome.content[0].text, "harmless");
  assert.deepEqual(events.map((e) => [e.event, e.outcome]), [["received", "accepted"], ["submitted", "accepted"], ["terminal", "complete"]]);
});

test("a GET stream is never opened", async () => {
  const gated = new GatedSdkClient({ gate: null, url, user: "alice", tenant: "acme", answer: () => ({}) });
  const res = await gated.fetch(url, { method: "GET", headers: { accept: "text/event-stream" } });
  assert.equal(res.status, 405);
  assert.ok(!(await res.text()).includes("REAL-UNJUDGED"));
  const methods = await (await fetch(url.replace("/mcp", "/seen"))).json();
  assert.ok(!methods.includes("GET"), "the adapter never asks the server for a GET stream");
});

test("a client the adapter did not connect is refused, and so is a batch of requests", async () => {
  const gated = new GatedSdkClient({ gate: null, url, user: "alice", tenant: "acme", answer: () => ({}) });
  assert.throws(() => gated.attach({}), (e) => e instanceof SdkAdapterError && e.code === "usage");
  const batch = JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "first:clean" } }]);
  await assert.rejects(gated.fetch(url, { method: "POST", body: batch }), (e) => e instanceof SdkAdapterError && e.code === "batch_message");
});

test("the SDK reads the adapter's framing", () => {
  const stream = '\ufeffevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1},"x":2}\n\n'
    + "id: 1\ndata:\n\n: note\r\nevent: ping\r\ndata: not json\r\n\r\n"
    + 'data: {"jsonrpc":"2.0","id":7,\ndata: "result":{}}\n\nretry: 10\n';
  const answer = readAnswer(stream, "text/event-stream; charset=utf-8", 7);
  assert.equal(answer.response, '{"jsonrpc":"2.0","id":7,\n"result":{}}');
  assert.deepEqual(reframe(answer), ["text/event-stream",
    'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}\n\n'
    + 'event: message\ndata: {"jsonrpc":"2.0","id":7,\ndata: "result":{}}\n\n']);
  assert.notEqual(readAnswer('{"jsonrpc":"2.0","id":7,"result":{}}', "application/json", 7).response, null);
  assert.equal(readAnswer("", "application/json", 7).response, null);
  assert.equal(readAnswer("<html>", "text/html", 7).response, null);
  const refusals = {
    'data: {"jsonrpc":"2.0","id":"7","result":{}}\n\n': "foreign_response",
    'data: {"jsonrpc":"2.0","id":7,"result":{}}\n\ndata: {"jsonrpc":"2.0","id":7,"error":{}}\n\n': "duplicate_response",
    'event: Message\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n': "typed_event",
    'data: {"jsonrpc":"2.0","id":7,"method":"x","result":{}}\n\n': "malformed_message",
    "data: not json\n\n": "malformed_message",
    'data: {"jsonrpc":"2.0","method":"n","params":{"a":NaN}}\n\n': "malformed_message",
    // No blank line after the last event: a reader may still dispatch it.
    'data: {"jsonrpc":"2.0","id":7,"result":{}}\n\ndata: {"jsonrpc":"2.0","id":7,"result":{}}': "duplicate_response",
  };
  for (const [text, code] of Object.entries(refusals)) {
    assert.throws(() => readAnswer(text, "text/event-stream", 7), (e) => e instanceof StreamRefused && e.code === code, text);
  }
});
