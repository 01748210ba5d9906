// The gate inside the official TypeScript SDK client (@modelcontextprotocol/client 2.4.0) over
// streamable HTTP. The SDK's own multi-round-trip driver fulfils `input_required` rounds with
// none of the gate's checks; GatedSdkClient turns it off (manual mode) and drives each round
// through the gate instead:
//
// - the SDK keeps what it is good at: ids, the `_meta` envelope, headers, sessions, version
//   negotiation, routing each response to its caller;
// - the adapter sits in the transport's `fetch`, the one place the SDK lets a caller see the
//   bytes: each gated request is registered before it goes out and the body sent is the gate's
//   own text (a retry is built by the gate, never by the SDK);
// - the SDK never reads the server's answer: the adapter reads it (sdk-framing.js), the gate
//   judges the one response in it, and the SDK gets that response re-framed by the adapter,
//   with the requests and notifications beside it and nothing else. An answer another reader
//   could take a different response from (a second response, one under another id, a typed
//   event carrying a message, a batch) is refused and the binding ended with the refusal's
//   code; a GET stream, which no request of the adapter's is waiting on, is never opened.
//   Every path is in docs/adapters.md.
//
// Over stdio the SDK parses each line before any caller sees it (duplicate keys and exact
// numbers are gone by then), so this adapter takes HTTP only (`attach` refuses a client it did
// not connect); for stdio use the gate directly (tests/peers/ts_sdk/test) or
// `mrtr-gate call --stdio`.

import { StreamRefused, readAnswer, reframe } from "./sdk-framing.js";

const GATED = new Set(["tools/call", "prompts/get", "resources/read"]);
// Marks the SDK request a call of this adapter made; removed before the gate binds the params.
const MARK = "mrtr-gate/call";

/** An error of the adapter itself (the gate's refusals stay GateErrors). */
export class SdkAdapterError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "SdkAdapterError";
    this.code = code;
  }
}

const pause = (round) => new Promise((r) => setTimeout(r, Math.min(50 * 2 ** Math.min(Math.max(round - 1, 0), 6), 2000)));

function accepted(view, responses) {
  return (view?.inputs ?? [])
    .filter((i) => i.kind === "url" && responses?.[i.key]?.action === "accept")
    .map((i) => i.url.full);
}

export class GatedSdkClient {
  #gate;
  #server;
  #user;
  #tenant;
  #policy;
  #answer;
  #openUrl;
  #base;
  #client = null;
  // Whether the SDK's connection went through this adapter's fetch.
  #carried = false;
  #calls = new Map();
  #next = 0;

  /**
   * @param {object} o
   * @param o.gate      a Gate (its consent service is the app's consent prompt)
   * @param o.url       the endpoint the transport posts to: the server every round is bound to
   * @param o.answer    async (view, verdict) => inputResponses object, or null to cancel
   * @param o.openUrl   (url) => void: called for an accepted URL input once the gate built the
   *                    retry on a granted receipt (never before)
   */
  constructor({ gate, url, user, tenant, policy, answer, openUrl = () => {}, fetch = globalThis.fetch }) {
    this.#gate = gate;
    this.#server = { origin: String(url) };
    this.#user = user;
    this.#tenant = tenant;
    this.#policy = policy;
    this.#answer = answer;
    this.#openUrl = openUrl;
    this.#base = fetch;
    this.fetch = (input, init) => this.#fetch(input, init);
  }

  /** SDK Client options with auto-fulfilment off and the 2026-07-28 era pinned. */
  static clientOptions(options = {}) {
    return {
      ...options,
      inputRequired: { ...options.inputRequired, autoFulfill: false },
      versionNegotiation: { mode: { pin: "2026-07-28" } },
    };
  }

  /** Use `client` (connected over a transport whose `fetch` is this adapter's: a client on any
   * other transport would send the gated methods, and read their answers, around the gate). */
  attach(client) {
    if (!this.#carried) {
      throw new SdkAdapterError("usage", "connect the SDK client with gated.fetch first: the adapter gates only what it carries");
    }
    this.#client = client;
    return this;
  }

  callTool(params, options) {
    return this.#run("tools/call", params, options, (p, o) => this.#client.callTool(p, o));
  }

  getPrompt(params, options) {
    return this.#run("prompts/get", params, options, (p, o) => this.#client.getPrompt(p, o));
  }

  // The SDK's response cache is bypassed: a read it served from its cache would reach the app
  // unjudged, and it keeps the result of a read's retry (which the spec forbids caching: it
  // depends on answers the cache key lacks). Every gated read goes to the server and the gate.
  readResource(params, options) {
    return this.#run("resources/read", params, options, (p, o) => this.#client.readResource(p, { ...o, cacheMode: "bypass" }));
  }

  async #run(method, params, options, send) {
    if (!this.#client) throw new SdkAdapterError("usage", "attach the SDK client first");
    // A resumed stream is read from a GET, which answers no request the adapter sent.
    if (options?.resumptionToken !== undefined) throw new SdkAdapterError("usage", "resuming a stream is not gated");
    const token = `c${++this.#next}`;
    const call = { method, liveId: null, responses: null, view: null, verdict: null, error: null };
    this.#calls.set(token, call);
    const marked = { ...params, _meta: { ...params?._meta, [MARK]: token } };
    try {
      for (;;) {
        call.verdict = null;
        let result;
        try {
          result = await send(marked, { ...options, allowInputRequired: true });
        } catch (e) {
          if (call.error) throw call.error;
          if (call.verdict?.kind === "error") throw e; // the server's JSON-RPC error; the gate ended it
          await this.#end(call, options?.signal?.aborted ? null : "transport_failed");
          throw e;
        }
        const verdict = call.verdict;
        if (!verdict) throw new SdkAdapterError("not_gated", "a response reached the SDK without passing the gate");
        if (verdict.kind === "complete") return result;
        // input_required: the gate accepted the round; the app answers it.
        let responses;
        if (verdict.inputKeys.length === 0) {
          await pause(verdict.round);
          responses = {};
        } else {
          responses = await this.#answer(verdict.view, verdict);
        }
        if (responses == null || options?.signal?.aborted) {
          await this.#end(call, null);
          throw new SdkAdapterError("cancelled", "cancelled; nothing more was sent");
        }
        call.responses = responses;
        call.view = verdict.view;
      }
    } finally {
      this.#calls.delete(token);
    }
  }

  async #end(call, error) {
    if (call.liveId === null) return;
    const r = { server: this.#server, requestId: call.liveId, user: this.#user, tenant: this.#tenant };
    try {
      await this.#gate.finish(error ? { ...r, error } : r);
    } catch {
      // Already ended by the gate (unknown_request): nothing left to end.
    }
  }

  async #fetch(input, init) {
    this.#carried = true;
    if ((init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase() === "GET") {
      // A GET stream answers no request the adapter sent, so a response on it could not be
      // judged: it is never opened (the SDK reads 405 as "no stream"; at 2026-07-28 it opens
      // none, and with no `id:` in the streams it gets it never resumes one).
      return new Response(null, { status: 405, statusText: "Method Not Allowed" });
    }
    let msg = null;
    if (typeof init?.body === "string") {
      try {
        msg = JSON.parse(init.body);
      } catch {
        msg = null;
      }
    }
    if (Array.isArray(msg) && msg.some((m) => m && typeof m.method === "string" && m.id !== undefined)) {
      // Answers to a batch of requests come back as one body the gate cannot judge as one.
      throw new SdkAdapterError("batch_message", "a batch of requests cannot be gated: send each on its own");
    }
    // Notifications and the SDK's answers to the server: the SDK reads no message from what
    // comes back.
    if (!msg || typeof msg.method !== "string" || msg.id === undefined) return this.#base(input, init);
    if (!GATED.has(msg.method)) return this.#ungated(input, init, msg);
    const token = msg.params?._meta?.[MARK];
    const call = typeof token === "string" ? this.#calls.get(token) : undefined;
    if (!call) {
      throw new SdkAdapterError("not_gated", `${msg.method} must go through GatedSdkClient, which gates its rounds`);
    }
    const params = { ...msg.params, _meta: { ...msg.params._meta } };
    delete params._meta[MARK];
    let requestJson;
    try {
      if (call.liveId === null) {
        const reg = { requestId: msg.id, server: this.#server, user: this.#user, tenant: this.#tenant, method: msg.method, params: JSON.stringify(params) };
        requestJson = (await this.#gate.register(this.#policy ? { ...reg, policy: this.#policy } : reg)).requestJson;
      } else {
        const retry = await this.#gate.buildRetry({
          server: this.#server, requestId: call.liveId, retryId: msg.id, user: this.#user, tenant: this.#tenant, responses: call.responses,
        });
        requestJson = retry.requestJson;
        for (const url of accepted(call.view, call.responses)) this.#openUrl(url);
      }
    } catch (e) {
      call.error = e;
      // A refused retry leaves nothing to send: the call ends (a refused consent cancels it).
      await this.#end(call, e?.code === "consent_refused" ? null : "gate_refused");
      throw e;
    }
    call.liveId = msg.id;
    let res;
    let text;
    try {
      res = await this.#base(input, { ...init, body: requestJson });
      text = await res.text();
    } catch (e) {
      // The app's own abort stays an abort (#run ends the call as cancelled).
      if (init?.signal?.aborted) throw e;
      // The exchange is spent (single use: the binding ends here, nothing is sent again); the
      // app gets the typed error, not fetch's.
      call.error = new SdkAdapterError("transport_failed", `the exchange with the server failed: ${e?.cause?.message ?? e?.message ?? e}`);
      await this.#end(call, "transport_failed");
      throw call.error;
    }
    let answer;
    try {
      answer = readAnswer(text, res.headers.get("content-type"), msg.id);
    } catch (e) {
      if (!(e instanceof StreamRefused)) throw e;
      call.error = new SdkAdapterError(e.code, e.message);
      await this.#end(call, e.code);
      throw call.error;
    }
    if (answer.response === null || answer.response === "") {
      call.error = new SdkAdapterError("no_response", `the server answered http ${res.status} with no json-rpc message`);
      await this.#end(call, "no_response");
      throw call.error;
    }
    try {
      call.verdict = await this.#gate.acceptResponse(this.#server, answer.response);
    } catch (e) {
      call.error = e;
      await this.#end(call, "gate_refused");
      throw e;
    }
    return framed(res, answer);
  }

  // Only the gate's three methods may take input rounds: anything else answered with one is
  // refused before the SDK sees it, and the SDK gets only the one response there is.
  async #ungated(input, init, msg) {
    const res = await this.#base(input, init);
    const text = await res.text();
    let answer;
    try {
      answer = readAnswer(text, res.headers.get("content-type"), msg.id);
    } catch (e) {
      throw e instanceof StreamRefused ? new SdkAdapterError(e.code, e.message) : e;
    }
    if (answer.response !== null) {
      const p = (() => {
        try {
          return JSON.parse(answer.response);
        } catch {
          return undefined;
        }
      })();
      if (p === null || typeof p !== "object" || (!("result" in p) && !("error" in p))) {
        throw new SdkAdapterError("malformed_response", `the server's response to ${msg.method} is not JSON with a result or error`);
      }
      const type = p.result?.resultType;
      // A round is refused through the gate, on record; any other resultType here.
      if (type === "input_required") {
        throw await this.#gate.refuseUnbound({ server: this.#server, user: this.#user, tenant: this.#tenant, refusal: "input-required" });
      }
      if (type !== undefined && type !== "complete") {
        throw new SdkAdapterError("invalid_result_type", `the server answered ${msg.method} with resultType ${JSON.stringify(type)}`);
      }
    }
    return framed(res, answer);
  }
}

// The SDK reads the adapter's framing of what was judged, never the server's bytes (the
// server's status and other headers kept).
function framed(res, answer) {
  const headers = new Headers(res.headers);
  for (const h of ["content-length", "content-type", "content-encoding", "transfer-encoding"]) headers.delete(h);
  let body = "";
  if (answer.response !== null || answer.sse) {
    const [type, text] = reframe(answer);
    headers.set("content-type", type);
    body = text;
  } else if (res.headers.has("content-type")) {
    headers.set("content-type", res.headers.get("content-type"));
  }
  const nullBody = [101, 204, 205, 304].includes(res.status);
  return new Response(nullBody ? null : body, { status: res.status, statusText: res.statusText, headers });
}
