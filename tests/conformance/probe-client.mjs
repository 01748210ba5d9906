// The official TypeScript SDK client (@modelcontextprotocol/client 2.4.0) as a client of
// `mrtr-gate probe` (docs/probe.md "Run it against your client"): `node probe-client.mjs
// [--gated] URL`, or with MCP_PROBE_TRANSPORT=stdio `node probe-client.mjs SERVER_COMMAND_LINE`
// (split like a shell, spawned by the SDK's StdioClientTransport; ungated only: the adapter
// takes streamable HTTP only, docs/adapters.md). It lists the endpoint's tools, calls each in order with `{}`, goes on after a
// failed call (one JSON line per call on stdout), then reads each URI of the context's
// `read_twice` twice, one read after the other (`readResource`, the same automatic mode), answers each elicitation as
// MCP_CONFORMANCE_CONTEXT's `answers` say (the probe tells it to answer badly where a scenario
// needs it), and exits 0 once the calls are done.
//
// Without --gated: the SDK unmodified, in its automatic MRTR mode (it fulfils rounds itself).
// The SDK's handler sees no input key, so the answer is found by the elicitation's message
// (`answer_by_message`), or is the context's one answer when it has one.
// With --gated: the same SDK through the gate by the JavaScript package's adapter
// (GatedSdkClient, the package's `mrtr-gate/sdk-client`), whose `answer` gets the keys; the
// "user" consents to every grant in advance, so what the gate refuses is the gate's own doing.
// Context `cancel_on` (a notification method): the call in flight is aborted (AbortController,
// the SDK's `signal`) when that notification comes (the SDK then sends notifications/cancelled
// and, over HTTP, closes the call's stream). --gated: the adapter reads a call's whole answer
// before the SDK sees any of it, so the notification on a stream still open would reach the app
// only once the call ended (docs/adapters.md); the app cancels instead on the nearest event it
// can see, the head of the first call's answer arriving (the server has begun answering: the
// user presses cancel while the call is in flight), by the adapter's inner `fetch`.
// It lives here because this folder pins the SDK and the Node 22 the conformance suite runs.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Gate } from "../../host-harness/node/src/index.js";
import { CallbackConsent, MemoryAudit, MemoryStorage, SystemClock } from "../../host-harness/node/src/hosts.js";
import { GatedSdkClient } from "../../host-harness/node/src/sdk-client.js";

const gatedMode = process.argv.includes("--gated");
const url = process.argv[process.argv.length - 1];
const stdio = process.env.MCP_PROBE_TRANSPORT === "stdio";
if (stdio && gatedMode) {
  console.error("probe-client.mjs: --gated takes streamable HTTP only (the adapter offers no stdio, docs/adapters.md)");
  process.exit(2);
}
// A command line split as a POSIX shell would: blanks, '...', "..." (\ escapes $ ` " \), \x.
const shellWords = (line) => {
  const words = [];
  let word = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === " " || c === "\t" || c === "\n") {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error("unterminated ' in the server command line");
      word = (word ?? "") + line.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      word = word ?? "";
      for (i++; line[i] !== '"'; i++) {
        if (i >= line.length) throw new Error('unterminated " in the server command line');
        if (line[i] === "\\" && "$`\"\\\n".includes(line[i + 1])) i++;
        word += line[i];
      }
    } else {
      if (c === "\\") i++;
      word = (word ?? "") + (line[i] ?? "");
    }
  }
  if (word !== null) words.push(word);
  return words;
};
const transport = () => {
  if (!stdio) return new StreamableHTTPClientTransport(new URL(url));
  const [command, ...args] = shellWords(url);
  return new StdioClientTransport({ command, args, stderr: "inherit" });
};
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
const answers = context.answers ?? {};
const decline = { action: "decline" };
const byMessage = (message) => {
  const key = context.answer_by_message?.[message] ?? (Object.keys(answers).length === 1 ? Object.keys(answers)[0] : undefined);
  return answers[key] ?? decline;
};
const report = (line) => console.log(JSON.stringify(line));
const capabilities = context.capabilities ?? { elicitation: { form: {}, url: {} } };
const forge = context.forge;
const cancelOn = context.cancel_on;
if (cancelOn && cancelOn !== "notifications/message") {
  console.log("mrtr-probe: unsupported: cancel");
  process.exit(0);
}
let inFlight = null;
const cancellable = (send) => {
  const controller = new AbortController();
  inFlight = controller;
  return send({ signal: controller.signal }).finally(() => { if (inFlight === controller) inFlight = null; });
};

// --gated with cancel_on: the inner fetch the adapter sends through; once the head of the first
// call's answer has come, that call is aborted (once).
function cancelOnAnswer() {
  let armed = true;
  return async (input, init) => {
    const res = await fetch(input, init);
    if (armed && inFlight) {
      armed = false;
      report({ cancel: "the call's answer began" });
      inFlight.abort();
    }
    return res;
  };
}

let client;
let call;
let read;
if (gatedMode) {
  const clock = new SystemClock();
  const gate = await Gate.create({ clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new MemoryAudit() });
  const gated = new GatedSdkClient({
    gate, url, user: "probe", tenant: "default",
    answer: async (view) => Object.fromEntries(view.inputs.map((i) => [i.key, answers[i.key] ?? decline])),
    // Opening is the app's; this one opens nothing (the probe's opener shims would see it).
    openUrl: (u) => report({ open: u }),
    fetch: cancelOn ? cancelOnAnswer() : globalThis.fetch,
  });
  client = new Client({ name: "mrtr-gate-probe-ts-gated", version: "0" }, GatedSdkClient.clientOptions({ capabilities }));
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: gated.fetch }));
  gated.attach(client);
  call = (name, extra = {}) => cancellable((options) => gated.callTool({ name, arguments: {}, ...extra }, options));
  read = (uri) => gated.readResource({ uri });
} else {
  client = new Client({ name: "mrtr-gate-probe-ts-sdk", version: "0" }, { capabilities, versionNegotiation: { mode: "auto" } });
  client.setRequestHandler("elicitation/create", async (request) => {
    report({ handler: request.params.message });
    return byMessage(request.params.message);
  });
  if (cancelOn) {
    client.setNotificationHandler(cancelOn, () => {
      report({ cancel: cancelOn });
      inFlight?.abort();
    });
  }
  await client.connect(transport());
  call = (name, extra = {}) => cancellable((options) => client.callTool({ name, arguments: {}, ...extra }, options));
  read = (uri) => client.readResource({ uri });
}

const attempt = async (name, extra, label) => {
  try {
    await call(name, extra);
    report({ [label]: name, ok: true });
  } catch (e) {
    report({ [label]: name, ok: false, error: `${e?.code ?? ""} ${String(e?.message ?? e)}`.trim().slice(0, 300) });
  }
};
for (const tool of (await client.listTools()).tools) {
  await attempt(tool.name, {}, "tool");
  if (forge && forge.tool === tool.name) {
    const { arguments: args, requestState, inputResponses } = forge;
    await attempt(tool.name, { arguments: args, requestState, inputResponses }, "forged");
  }
}
for (const uri of context.read_twice ?? []) {
  for (let n = 0; n < 2; n++) {
    try {
      const result = await read(uri);
      report({ read: uri, ok: true, text: result?.contents?.[0]?.text });
    } catch (e) {
      report({ read: uri, ok: false, error: `${e?.code ?? ""} ${String(e?.message ?? e)}`.trim().slice(0, 300) });
    }
  }
}
await client.close();
