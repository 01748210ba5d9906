// The shared scenario corpus (`tests/corpus/*.json`, format in docs/corpus.md) through the
// JavaScript package, step for step as the Rust runner (host-harness/testkit/src/corpus.rs) runs
// it, over the same reference hosts. Used by Node's test runner and by the browser page.

import { Gate, GateError, HostError } from "mrtr-gate";
import { ManualClock, MemoryAudit, MemoryStorage } from "mrtr-gate/hosts";
import { Num, canonical, dumps, equal, parse, pointer, string } from "./exact-json.js";

export const DEFAULT_SERVER = "https://server.example/mcp";
export const T0 = 1_700_000_000_000;
const U64_MAX = (1n << 64n) - 1n;

export class AuthoringError extends Error {}

/** The clock the gate sees: the test clock, or 2^64 - 1 under `wrapped_negative`. */
class GateClock {
  constructor(clock) {
    this.clock = clock;
    this.wrapped = false;
  }
  nowMs() {
    return this.wrapped ? U64_MAX : this.clock.nowMs();
  }
}

class ScriptedConsent {
  queue = [];
  calls = 0;
  requestConsent(prompt) {
    const answer = this.queue.length ? this.queue.shift() : "grant";
    this.calls += 1;
    let view = prompt.viewSha256;
    let answers = prompt.responsesSha256;
    let decision = "granted";
    if (answer === "refuse") decision = "refused";
    else if (answer === "other_view") view = "0".repeat(64);
    else if (answer === "other_answers") answers = "0".repeat(64);
    else if (answer === "fail") throw new HostError("consent ui unavailable (injected)");
    return { receiptId: `consent-${this.calls}`, decision, method: "preset-answers", viewSha256: view, responsesSha256: answers };
  }
}

export class ScenarioHosts {
  constructor() {
    this.clock = new ManualClock(T0);
    this.gateClock = new GateClock(this.clock);
    this.storage = new MemoryStorage(this.clock);
    this.consent = new ScriptedConsent();
    this.audit = new MemoryAudit();
  }
  services() {
    return { clock: this.gateClock, storage: this.storage, consent: this.consent, audit: this.audit };
  }
}

const meta = () => ({
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {}, url: {} } },
});
const defaultParams = (method) =>
  method === "resources/read" ? { uri: "file:///project/README.md", _meta: meta() } : { name: "tool", arguments: {}, _meta: meta() };
const textOr = (step, key, dflt) => (typeof step[key] === "string" ? step[key] : dflt);
const has = (o, k) => Object.hasOwn(o, k);

function idOf(v) {
  if (v instanceof Num) {
    const i = v.asI64();
    if (i === null) throw new AuthoringError(`id \`${v.text}\` is not an integer`);
    return i;
  }
  if (typeof v === "string") return v;
  throw new AuthoringError(`id \`${dumps(v)}\` must be a number or a string`);
}

function serverOf(step) {
  const v = step.server;
  if (v === undefined) return { origin: DEFAULT_SERVER };
  if (typeof v === "string") return { origin: v };
  if (v && typeof v === "object") {
    if (typeof v.origin === "string" && v.endpoint === undefined) return { origin: v.origin };
    if (typeof v.endpoint === "string" && v.origin === undefined) return { endpoint: v.endpoint };
  }
  throw new AuthoringError(`bad server \`${dumps(v)}\``);
}

function policyOf(step) {
  const v = step.policy;
  const p = {};
  if (!v || typeof v !== "object" || Array.isArray(v)) return p;
  const u64 = (k) => (v[k] instanceof Num ? v[k].asU64() : null);
  if (u64("lifetime_ms") !== null) p.roundTripLifetimeMs = Number(u64("lifetime_ms"));
  for (const [k, name] of [["max_state_bytes", "maxRequestStateBytes"], ["max_rounds", "maxRounds"]]) {
    const x = u64(k);
    if (x === null) continue;
    if (x >= 1n << 32n) throw new AuthoringError(`\`${k}\` is beyond u32`);
    p[name] = Number(x);
  }
  if (typeof v.version === "string") p.policyVersion = v.version;
  if (Array.isArray(v.allow)) {
    const names = { "roots/list": "roots-list", "sampling/createMessage": "sampling-create-message" };
    p.allowedDeprecated = v.allow.map((m) => {
      if (typeof m !== "string" || !has(names, m)) throw new AuthoringError(`unknown deprecated method \`${dumps(m)}\``);
      return names[m];
    });
  }
  return p;
}

const GENERATED = "\u0000mrtr-generated";

function generated(text, g) {
  const placeholder = string(GENERATED);
  if (!text.includes(placeholder)) throw new AuthoringError(`\`generate\` needs the placeholder ${placeholder} in the message`);
  const size = (k) => (g && g[k] instanceof Num ? g[k].asU64() : null);
  let made;
  if (size("string_bytes") !== null) made = '"' + "a".repeat(Number(size("string_bytes"))) + '"';
  else if (size("depth") !== null) made = "[".repeat(Number(size("depth"))) + "1" + "]".repeat(Number(size("depth")));
  else if (size("values") !== null) made = "[" + Array(Number(size("values"))).fill("1").join(",") + "]";
  else throw new AuthoringError(`unknown \`generate\` ${dumps(g)}`);
  return text.replace(placeholder, () => made);
}

async function outcome(call) {
  try {
    return { ok: await call() };
  } catch (e) {
    if (e instanceof GateError) return { error: e.code, cause: e.cause };
    throw e;
  }
}

async function sha256(text) {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function verdictJson(v) {
  if (v.kind === "input_required") {
    const shown = parse(v.viewJson);
    return {
      verdict: "input_required",
      round: v.round,
      input_keys: v.inputKeys,
      request_state_sha256: v.requestStateSha256,
      view: shown,
      view_sha256: v.viewSha256,
      view_is_canonical: canonical(shown) === v.viewJson && (await sha256(v.viewJson)) === v.viewSha256,
    };
  }
  if (v.kind === "complete") return { verdict: "complete" };
  return { verdict: "error", code: v.code };
}

function check(expect, got, at) {
  const fail = (why) => {
    throw new Error(`${at}: ${why}; got ${dumps(got)}`);
  };
  if (has(expect, "error")) {
    if (!equal(got.error ?? null, expect.error)) fail(`expected error ${dumps(expect.error)}`);
    if (has(expect, "cause") && !equal(got.cause ?? null, expect.cause)) fail(`expected cause ${dumps(expect.cause)}`);
    return;
  }
  if (!has(got, "ok")) fail("expected success");
  const fields = expect.ok;
  if (fields && typeof fields === "object" && !Array.isArray(fields)) {
    for (const [ptr, want] of Object.entries(fields)) {
      const [found, value] = pointer(got.ok, ptr);
      if (!found || !equal(value, want)) fail(`expected ${ptr} = ${dumps(want)}`);
    }
  }
  for (const ptr of Array.isArray(expect.absent) ? expect.absent : []) {
    if (typeof ptr === "string" && pointer(got.ok, ptr)[0]) fail(`expected ${ptr} absent`);
  }
}

function queueConsent(step, h, at) {
  if (typeof step.consent === "string") {
    if (!["grant", "refuse", "other_view", "other_answers", "fail"].includes(step.consent)) {
      throw new AuthoringError(`${at}: unknown consent \`${step.consent}\``);
    }
    h.consent.queue.push(step.consent);
  }
}

export async function runSteps(scenario, gate, h, transcript = null) {
  if (!Array.isArray(scenario.steps)) throw new AuthoringError("a scenario needs `steps`");
  for (const [i, step] of scenario.steps.entries()) {
    const op = typeof step.op === "string" ? step.op : "?";
    const at = `step ${i} (${op})`;
    let call;
    if (op === "register") {
      const method = textOr(step, "method", "tools/call");
      const params = typeof step.params_text === "string" ? step.params_text : has(step, "params") ? dumps(step.params) : dumps(defaultParams(method));
      const args = {
        requestId: idOf(step.id), server: serverOf(step), user: textOr(step, "user", "alice"),
        tenant: textOr(step, "tenant", "acme"), method, params, policy: policyOf(step),
      };
      call = async () => {
        const r = await gate.register(args);
        return { request: parse(r.requestJson), params_sha256: r.paramsSha256 };
      };
    } else if (op === "respond") {
      let text;
      if (typeof step.raw === "string") text = step.raw;
      else if (has(step, "result")) text = dumps({ jsonrpc: "2.0", id: step.id ?? null, result: step.result });
      else if (has(step, "error")) text = dumps({ jsonrpc: "2.0", id: step.id ?? null, error: step.error });
      else throw new AuthoringError(`${at}: \`respond\` needs \`raw\`, \`result\` or \`error\``);
      if (has(step, "generate")) text = generated(text, step.generate);
      const server = serverOf(step);
      call = async () => verdictJson(await gate.acceptResponse(server, text));
    } else if (op === "retry") {
      queueConsent(step, h, at);
      const responses = typeof step.responses_text === "string" ? step.responses_text : has(step, "responses") ? dumps(step.responses) : "{}";
      const args = {
        server: serverOf(step), requestId: idOf(step.id), retryId: idOf(step.retry_id),
        user: textOr(step, "user", "alice"), tenant: textOr(step, "tenant", "acme"), responses,
      };
      call = async () => {
        const r = await gate.buildRetry(args);
        return { request: parse(r.requestJson), round: r.round, consent_receipt_id: r.consentReceiptId };
      };
    } else if (op === "retry_from_client") {
      queueConsent(step, h, at);
      let params;
      if (typeof step.params_text === "string") params = step.params_text;
      else if (has(step, "params")) params = dumps(step.params);
      else throw new AuthoringError(`${at}: \`retry_from_client\` needs \`params\``);
      const args = {
        server: serverOf(step), requestId: step.id === undefined || step.id === null ? null : idOf(step.id),
        retryId: idOf(step.retry_id), user: textOr(step, "user", "alice"), tenant: textOr(step, "tenant", "acme"),
        method: textOr(step, "method", "tools/call"), params,
      };
      call = async () => {
        const r = await gate.retryFromClient(args);
        return { request: parse(r.requestJson), round: r.round, consent_receipt_id: r.consentReceiptId };
      };
    } else if (op === "refuse_unbound") {
      const kinds = {
        server_request: "server-request", input_required: "input-required",
        input_requests_notified: "input-requests-notified", input_responses: "input-responses",
      };
      const refusal = kinds[step.refusal];
      if (typeof step.refusal !== "string" || !Object.hasOwn(kinds, step.refusal)) throw new AuthoringError(`${at}: \`refuse_unbound\` needs a known \`refusal\``);
      if ((refusal === "server-request") !== (typeof step.method === "string")) {
        throw new AuthoringError(`${at}: a \`server_request\` refusal needs \`method\`, and only it`);
      }
      const args = { server: serverOf(step), user: textOr(step, "user", "alice"), tenant: textOr(step, "tenant", "acme"), refusal, method: step.method };
      call = async () => {
        throw await gate.refuseUnbound(args);
      };
    } else if (op === "finish") {
      const o = step.outcome;
      const args = {
        server: serverOf(step), requestId: idOf(step.id), user: textOr(step, "user", "alice"),
        tenant: textOr(step, "tenant", "acme"), error: typeof o === "string" && o !== "cancelled" ? o : undefined,
        policy: typeof step.policy_denied === "string" ? step.policy_denied : undefined,
      };
      call = async () => ({ outcome: await gate.finish(args) });
    } else if (op === "expire_stale") {
      call = async () => ({ ended: await gate.expireStale() });
    } else if (op === "advance_clock") {
      h.clock.advance(step.ms instanceof Num ? Number(step.ms.asU64() ?? 0n) : 0);
      continue;
    } else if (op === "fault") {
      if (typeof step.audit === "string") {
        if (!["none", "fail_append", "corrupt_readback", "lose_writes", "fail_readback"].includes(step.audit)) {
          throw new AuthoringError(`${at}: unknown audit fault \`${step.audit}\``);
        }
        h.audit.fault = step.audit === "none" ? null : step.audit;
      }
      if (typeof step.storage === "string") {
        h.storage.fault = ["fail", "lose_cas", "fail_deletes"].includes(step.storage) ? step.storage : null;
      }
      if (typeof step.clock === "string") {
        if (!["none", "wrapped_negative"].includes(step.clock)) throw new AuthoringError(`${at}: unknown clock fault \`${step.clock}\``);
        h.gateClock.wrapped = step.clock === "wrapped_negative";
      }
      if (has(step, "lose_cas_after")) {
        const n = step.lose_cas_after instanceof Num ? step.lose_cas_after.asU64() : null;
        if (n === null) throw new AuthoringError(`${at}: \`lose_cas_after\` takes a count`);
        h.storage.loseCasAfter = Number(n);
      }
      continue;
    } else {
      throw new AuthoringError(`${at}: unknown op \`${op}\``);
    }
    // The gate's outputs as the JSON they are: numbers compared by their text.
    const got = parse(dumps(await outcome(call)));
    transcript?.push(canonical(got));
    const [found, isCanonical] = pointer(got, "/ok/view_is_canonical");
    if (found && isCanonical === false) throw new Error(`${at}: the consent view is not canonical json with its digest`);
    check(has(step, "expect") ? step.expect : { ok: {} }, got, at);
  }
}

export async function checkTrail(scenario, lines) {
  // One chain per shard (the server's key part), shards interleaved in the order written.
  const heads = new Map();
  for (const [i, line] of lines.entries()) {
    const e = JSON.parse(line);
    if (typeof e.shard !== "string" || !/^[0-9a-f]{32}$/.test(e.shard)) throw new Error(`audit line ${i + 1} names no server's shard: ${line}`);
    const [seq, prev] = heads.get(e.shard) ?? [0, "0".repeat(64)];
    if (e.seq !== seq + 1 || e.prev_sha256 !== prev) throw new Error(`the audit chain of shard ${e.shard} is broken at line ${i + 1}`);
    if (canonical(parse(line)) !== line) throw new Error(`an audit line is not canonical JSON: ${line}`);
    heads.set(e.shard, [e.seq, await sha256(line)]);
  }
  for (const secret of Array.isArray(scenario.secrets) ? scenario.secrets : []) {
    const leak = lines.find((l) => typeof secret === "string" && l.includes(secret));
    if (leak) throw new Error(`the secret \`${secret}\` reached the audit trail: ${leak}`);
  }
  if (scenario.audit && typeof scenario.audit === "object") {
    const events = lines.map((l) => JSON.parse(l));
    for (const [kind, want] of Object.entries(scenario.audit)) {
      const n = events.filter((e) => kind === e.event || kind === `${e.event}:${e.outcome}`).length;
      if (!(want instanceof Num) || want.asU64() !== BigInt(n)) throw new Error(`expected ${dumps(want)} \`${kind}\` audit events, found ${n}`);
    }
  }
}

/** Run a scenario over fresh hosts: { failure, lines, transcript } (the transcript: the
 * canonical JSON of each call's outcome). */
export async function run(scenario, options = {}) {
  const h = new ScenarioHosts();
  const gate = await Gate.create(h.services(), options);
  const transcript = [];
  try {
    await runSteps(scenario, gate, h, transcript);
    await checkTrail(scenario, h.audit.lines);
    return { failure: null, lines: h.audit.lines, transcript };
  } catch (e) {
    return { failure: e, lines: h.audit.lines, transcript };
  }
}

export { parse };
