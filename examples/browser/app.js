// The page's MCP client: every tools/call is registered with the gate before it is sent,
// every response is judged by the gate, every retry is built by the gate from the answers the
// user gave in the consent dialog, with a receipt the dialog issued for exactly what it showed.
// Imports by path, not through an import map: the page's Content-Security-Policy allows no
// inline script, and an import map is one.
import { Gate, GateError } from "/gate/src/index.js";
import { DecidedConsent, MemoryAudit, MemoryStorage, SystemClock } from "/gate/src/hosts.js";
import { shownJson, shownText } from "/gate/src/shown.js";
import { askConsent } from "./consent-dialog.js";

const endpoint = new URL("/mcp", location.href).href;
// The server as this page verified it: the endpoint it connects to, never `serverInfo`.
const server = { origin: endpoint };
const principal = { user: "alice@example.com", tenant: "acme" };
const meta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {}, url: {} } },
};

const consent = new DecidedConsent();
const audit = new MemoryAudit();
const gate = await Gate.create({ clock: new SystemClock(), storage: new MemoryStorage(), consent, audit });
let nextId = 1;

const $ = (id) => document.getElementById(id);
$("endpoint").textContent = endpoint;

function log(text) {
  const li = document.createElement("li");
  li.textContent = text;
  $("log").append(li);
}

function status(text) {
  $("status").textContent = text;
}

function showError(e) {
  const box = $("error");
  box.textContent = e instanceof GateError
    ? `Refused by the gate: ${e.code} (${e.cause === "peer" ? "the server misbehaved" : e.cause === "caller" ? "this client's request" : "a host service"}): ${shownText(e.detail)}`
    : `Error: ${shownText(e.message ?? e)}`;
  box.dataset.code = e.code ?? "";
  box.hidden = false;
  status("Stopped: nothing was sent back to the server.");
}

async function send(requestJson) {
  const res = await fetch(endpoint, { method: "POST", headers: { "content-type": "application/json" }, body: requestJson });
  return res.text();
}

async function call(tool) {
  $("error").hidden = true;
  $("log").replaceChildren();
  const params = { name: tool, arguments: { from: "OSL", to: "SFO" }, _meta: meta };
  let id = nextId++;
  try {
    const sent = await gate.register({ requestId: id, server, ...principal, method: "tools/call", params });
    log(`registered tools/call ${tool} as id ${id}`);
    let verdict = await gate.acceptResponse(server, await send(sent.requestJson));
    while (verdict.kind === "input_required") {
      log(`round ${verdict.round}: the server asks for ${verdict.inputKeys.map((k) => shownJson(k)).join(", ") || "nothing (state only)"}`);
      const view = verdict.view;
      const retryId = nextId++;
      let retry;
      const choice = await askConsent(view, async (action, responses) => {
        // The receipt: the user's decision on exactly this view and these answers.
        await consent.decideFor(verdict, responses, true);
        try {
          retry = await gate.buildRetry({ server, requestId: id, retryId, ...principal, responses });
          return null;
        } catch (e) {
          if (e instanceof GateError && e.cause === "caller") return `The gate refused these answers: ${e.code}: ${shownText(e.detail)}`;
          throw e;
        }
      });
      log(`you chose ${choice.action}; retry ${retryId} carries your answers with receipt ${retry.consentReceiptId}`);
      id = retryId;
      verdict = await gate.acceptResponse(server, await send(retry.requestJson));
    }
    log(`the server answered: ${shownText(verdict.kind)}`);
    status(`Done: ${tool} ${verdict.kind === "complete" ? "completed" : `failed (${verdict.code})`}.`);
  } catch (e) {
    showError(e);
  }
  log(`audit trail: ${audit.lines.map((l) => JSON.parse(l).event).join(", ")}`);
}

for (const b of document.querySelectorAll("button[data-tool]")) b.addEventListener("click", () => call(b.dataset.tool));

// For the timing page of scripts/bench: the same form round as the other hosts' benches,
// answered in-page (no dialog, no network).
let benchGate = null;
let benchNext = 0;
window.benchRounds = async (rounds) => {
  // One gate for every run: a new one would compile the module again, and the timed run
  // would then measure V8 tiering it up.
  if (!benchGate) {
    const { CallbackConsent } = await import("/gate/src/hosts.js");
    benchGate = Gate.create({ clock: new SystemClock(), storage: new MemoryStorage(new SystemClock()),
      consent: new CallbackConsent(() => true), audit: new MemoryAudit(1024) });
  }
  const g = await benchGate;
  const s = { origin: "https://flights.example.com/mcp" };
  const p = JSON.stringify({ name: "book_flight", arguments: { from: "OSL", to: "SFO" }, _meta: meta });
  const schema = { type: "object", title: "Passenger", properties: {
    full_name: { type: "string", minLength: 1, maxLength: 100 }, seat: { type: "string", enum: ["aisle", "window"] },
    bags: { type: "integer", minimum: 0, maximum: 3 } }, required: ["full_name", "seat"] };
  const answers = JSON.stringify({ passenger: { action: "accept", content: { full_name: "Alice Example", seat: "aisle", bags: 1 } } });
  const one = async (n) => {
    const rid = n * 2;
    await g.register({ requestId: rid, server: s, user: "alice", tenant: "acme", method: "tools/call", params: p });
    await g.acceptResponse(s, JSON.stringify({ jsonrpc: "2.0", id: rid, result: { resultType: "input_required",
      inputRequests: { passenger: { method: "elicitation/create", params: { message: "Who is flying?", requestedSchema: schema } } },
      requestState: "c3RhdGUtb2YtdGhlLWJvb2tpbmctZmxvdw" } }));
    await g.buildRetry({ server: s, requestId: rid, retryId: rid + 1, user: "alice", tenant: "acme", responses: answers });
    const done = await g.acceptResponse(s, JSON.stringify({ jsonrpc: "2.0", id: rid + 1, result: { resultType: "complete", content: [] } }));
    if (done.kind !== "complete") throw new Error("the round did not complete");
  };
  // Ids go on rising across runs: each round is a new request on the same gate.
  const base = benchNext;
  benchNext += 200 + rounds;
  for (let n = base; n < base + 200; n++) await one(n);
  // Timed in batches: a page's clock is coarse (Chromium rounds performance.now() to 0.1 ms).
  const batch = 20;
  const samples = [];
  for (let n = base + 200; n < base + 200 + rounds; n += batch) {
    const t = performance.now();
    for (let i = 0; i < batch; i++) await one(n + i);
    samples.push(((performance.now() - t) * 1000) / batch);
  }
  samples.sort((a, b) => a - b);
  return { min_us: samples[0], median_us: samples[Math.floor(samples.length / 2)], max_us: samples[samples.length - 1] };
};
window.gateReady = true;
