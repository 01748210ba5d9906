// The official TypeScript SDK's server (../server.mjs, @modelcontextprotocol/server 2.4.0) over
// stdio, every round through the JavaScript package's gate: a second SDK's encoding of the
// rounds. The client reads each raw line, so the gate checks the bytes the SDK sent; the gate
// binds to the command (an endpoint id). Each case asserts what the user ends up with and the
// audit trail (one terminal event per received round, no secret in any line).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Gate } from "mrtr-gate";
import { CallbackConsent, MemoryAudit, MemoryStorage, SystemClock } from "mrtr-gate/hosts";

const serverPath = fileURLToPath(new URL("../server.mjs", import.meta.url));
const server = { endpoint: "stdio:ts-sdk-peer" };
const meta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {}, url: {} } },
};
const SECRETS = ["SECRET-SESSION", "Ada Lovelace"];

async function peer() {
  const proc = spawn(process.execPath, [serverPath], { stdio: ["pipe", "pipe", "ignore"] });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  return {
    async exchange(requestJson) {
      assert.ok(!requestJson.includes("\n"));
      proc.stdin.write(requestJson + "\n");
      const { value, done } = await lines.next();
      assert.ok(!done, "the server closed the stream");
      return value;
    },
    close() {
      proc.stdin.end();
      proc.kill();
    },
  };
}

async function client(answer) {
  const clock = new SystemClock();
  const audit = new MemoryAudit();
  const gate = await Gate.create({ clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit });
  const p = await peer();
  let nextId = 1;
  const shown = [];
  return {
    audit, shown,
    // The server with no gate in between.
    exchange: (requestJson) => p.exchange(requestJson),
    // `args` an object, or a JSON text that the params carry as written.
    async call(tool, args) {
      let id = nextId++;
      const params = typeof args === "string"
        ? `{"name":${JSON.stringify(tool)},"arguments":${args},"_meta":${JSON.stringify(meta)}}`
        : { name: tool, arguments: args, _meta: meta };
      const sent = await gate.register({ requestId: id, server, user: "alice", tenant: "acme", method: "tools/call", params });
      let raw = await p.exchange(sent.requestJson);
      let verdict = await gate.acceptResponse(server, raw);
      while (verdict.kind === "input_required") {
        shown.push(verdict.view);
        const retryId = nextId++;
        const retry = await gate.buildRetry({ server, requestId: id, retryId, user: "alice", tenant: "acme", responses: answer(verdict.view) });
        id = retryId;
        raw = await p.exchange(retry.requestJson);
        verdict = await gate.acceptResponse(server, raw);
      }
      return { verdict, reply: JSON.parse(raw) };
    },
    checkTrail() {
      const events = audit.lines.map((l) => JSON.parse(l));
      for (const original of new Set(events.filter((e) => e.event === "received").map((e) => e.request_id))) {
        assert.equal(events.filter((e) => e.event === "terminal" && e.request_id === original).length, 1);
      }
      for (const line of audit.lines) for (const s of SECRETS) assert.ok(!line.includes(s), `secret in ${line}`);
    },
    close: () => p.close(),
  };
}

const accept = (contentFor) => (view) => Object.fromEntries(view.inputs.map((i) =>
  [i.key, i.kind === "form" ? { action: "accept", content: contentFor(i) } : { action: "accept" }]));
const textOf = (reply) => reply.result.content[0].text;

test("a form round from the TypeScript SDK", async () => {
  const c = await client(accept(() => ({ full_name: "Ada Lovelace", seat: "window" })));
  try {
    const { verdict, reply } = await c.call("book_flight", { origin: "OSL", destination: "SFO" });
    assert.equal(verdict.kind, "complete");
    assert.equal(textOf(reply), 'booked OSL-SFO: {"passenger":{"action":"accept","content":{"full_name":"Ada Lovelace","seat":"window"}}}');
    assert.deepEqual(c.shown[0].inputs[0].fields.map((f) => f.name), ["full_name", "seat"]);
    assert.deepEqual(c.audit.lines.map((l) => JSON.parse(l).event), ["received", "consented", "submitted", "terminal"]);
    c.checkTrail();
  } finally {
    c.close();
  }
});

test("a URL round from the TypeScript SDK", async () => {
  const c = await client(accept(() => ({})));
  try {
    const { verdict, reply } = await c.call("pay", { amount: 42 });
    assert.equal(verdict.kind, "complete");
    assert.equal(c.shown[0].inputs[0].url.full, "https://pay.example.com/authorize?session=SECRET-SESSION");
    assert.equal(textOf(reply), 'paid 42: {"pay":{"action":"accept"}}');
    c.checkTrail();
  } finally {
    c.close();
  }
});

test("a state-only round from the TypeScript SDK needs no consent", async () => {
  const c = await client(() => ({}));
  try {
    const { verdict, reply } = await c.call("continue_job", {});
    assert.equal(verdict.kind, "complete");
    assert.equal(textOf(reply), "job done after step-1");
    assert.deepEqual(c.audit.lines.map((l) => JSON.parse(l).event), ["received", "submitted", "terminal"]);
    c.checkTrail();
  } finally {
    c.close();
  }
});

// Numbers as a client may write them, and as each must reach the server: digit for digit, only
// an exponent's sign written out (`1e2` as `1e+2`, docs/audit.md), never in the canonical layout
// the gate compares them in (`1.0` as `1`, `-0` as `0`, `1e2` as `100`, an integer past 21 digits
// with an exponent). The same numbers as host-harness/cli/tests/exact_numbers.rs. A JavaScript
// tool gets doubles, so the server's `numbers` tool also shows each number as written in the
// request the server read.
const WRITTEN = [
  ["1234567890123456", "1234567890123456"],
  ["1234567890123456789012", "1234567890123456789012"],
  ["1234567890123456789012345678901234567890", "1234567890123456789012345678901234567890"],
  ["-0", "-0"],
  ["1.0", "1.0"],
  ["1e2", "1e+2"],
  ["3.14159265358979323846264338327", "3.14159265358979323846264338327"],
  ["0.1", "0.1"],
];
const NUMBERS = `{"values":{${WRITTEN.map(([n], i) => `"v${i}":${n}`).join(",")}}}`;
// What the tool got of each value (type and value), without the text the server read.
const toolGot = (part) => Object.fromEntries(Object.entries(part).map(([k, v]) => [k, v.slice(0, 2)]));

test("numbers reach the TypeScript SDK's tool as written on the call and on the retry the gate builds", async () => {
  const c = await client(() => ({}));
  try {
    // The call and its retry with no gate, written here.
    const message = (id, state) =>
      `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"numbers","arguments":${NUMBERS}${
        state === undefined ? "" : `,"requestState":${JSON.stringify(state)}`},"_meta":${JSON.stringify(meta)}}}`;
    const round = JSON.parse(await c.exchange(message(101)));
    assert.equal(round.result.resultType, "input_required");
    const direct = JSON.parse(textOf(JSON.parse(await c.exchange(message(102, round.result.requestState)))));

    const { verdict, reply } = await c.call("numbers", NUMBERS);
    assert.equal(verdict.kind, "complete");
    const gated = JSON.parse(textOf(reply));
    WRITTEN.forEach(([written, sent], i) => {
      for (const part of ["call", "retry"]) {
        assert.equal(direct[part][`v${i}`][2], written, `direct ${part} v${i}`);
        assert.equal(gated[part][`v${i}`][2], sent, `gated ${part} v${i}`);
      }
    });
    assert.deepEqual(direct.retry, direct.call);
    assert.deepEqual(toolGot(gated.call), toolGot(direct.call), "the call");
    assert.deepEqual(toolGot(gated.retry), toolGot(direct.call), "the retry the gate built");
    assert.deepEqual(direct.call.v3, ["number", "-0", "-0"]);
    assert.deepEqual(c.audit.lines.map((l) => JSON.parse(l).event), ["received", "submitted", "terminal"]);
    c.checkTrail();
  } finally {
    c.close();
  }
});
