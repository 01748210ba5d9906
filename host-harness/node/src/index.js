// mrtr-gate for JavaScript (Node and browsers): the mrtr:gate@0.6.0 component (shipped as
// component/mrtr-gate.wasm, checked and split by ./component.js) run through jco's glue
// (`gen/`, built by the project's scripts/node), over four host services written in
// JavaScript (see ./hosts.js for reference ones).
//
//   const gate = await Gate.create({ clock, storage, consent, audit });
//   const sent = await gate.register({ requestId: 1, server: { origin: url }, user, tenant,
//                                      method: "tools/call", params });
//
// Every denial rejects with a GateError carrying the gate's stable `code` (docs/errors.md),
// its `cause` (peer, caller, host) and whether the denial was `audited`. A trap (the sandbox
// ran out of memory, a bug) rejects as `guest_trapped`, and the next call gets a fresh
// instance: every binding lives in the host's storage, so nothing is lost.

import { componentLoader, LoadError, UnexpectedComponent } from "./component.js";
import { shownText } from "./shown.js";

const WIT = "0.6.0";
// The WIT's `consent-method` cases (hosts.js exports them as CONSENT_METHODS).
const CONSENT_METHOD_NAMES = new Set(["user-at-screen", "preset-answers", "delegated-to-client", "policy-hook"]);
const S64_MAX = (1n << 63n) - 1n;
const U64_MAX = (1n << 64n) - 1n;

/** A denial. */
export class GateError extends Error {
  constructor(code, cause, message, audited) {
    // `message` may quote the server's names (a field its schema named): the error's own
    // message shows it through `shownText`; `detail` keeps the gate's text as it is.
    super(`${code} (${cause}): ${shownText(message)}`);
    this.name = "GateError";
    /** The stable snake_case code (docs/errors.md), or `guest_trapped` / `invalid_argument`. */
    this.code = code;
    /** `peer`, `caller` or `host`: who is to blame. */
    this.cause = cause;
    this.detail = message;
    /** True when the denial itself was written to the audit sink and read back. */
    this.audited = audited;
  }
}

/** Raised by a host service to report a failure (the gate denies, auditing where it can). */
export class HostError extends Error {
  constructor(message) {
    super(message);
    this.name = "HostError";
  }
}

const refuse = (code, message) => new GateError(code, "caller", message, false);

function requestId(value, what) {
  if (typeof value === "string") return { tag: "text", val: value };
  if (typeof value === "number" && Number.isSafeInteger(value)) return { tag: "number", val: BigInt(value) };
  if (typeof value === "bigint" && value >= -S64_MAX && value <= S64_MAX) return { tag: "number", val: value };
  throw refuse("invalid_jsonrpc_request_id", `\`${what}\` must be a safe integer, a bigint or a string`);
}

function server(value) {
  if (value && typeof value.origin === "string" && value.endpoint === undefined) return { tag: "origin", val: value.origin };
  if (value && typeof value.endpoint === "string" && value.origin === undefined) return { tag: "endpoint", val: value.endpoint };
  throw refuse("invalid_server_identity", "the server must be { origin: url } or { endpoint: id }");
}

const UNBOUND = ["server-request", "input-required", "input-requests-notified", "input-responses"];

function unbound(refusal, method) {
  if (!UNBOUND.includes(refusal)) throw refuse("invalid_argument", `\`refusal\` must be one of ${UNBOUND.join(", ")}`);
  if ((refusal === "server-request") !== (method !== undefined)) {
    throw refuse("invalid_argument", "`method` goes with the refusal `server-request`, and only with it");
  }
  return refusal === "server-request" ? { tag: refusal, val: text(method, "method") } : { tag: refusal };
}

function text(value, what) {
  if (typeof value === "string") return value;
  throw refuse("invalid_argument", `\`${what}\` must be a string`);
}

/** A JSON text as given (sent byte for byte), or an object written as compact JSON. */
function jsonText(value, what) {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object" && !Array.isArray(value)) return JSON.stringify(value);
  throw refuse("invalid_argument", `\`${what}\` must be a JSON text or an object`);
}

function policy(p = {}) {
  const int = (v, dflt, max, what) => {
    if (v === undefined) return dflt;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 && v <= max) return v;
    throw refuse("invalid_argument", `\`policy.${what}\` must be an integer from 0 to ${max}`);
  };
  const allowed = p.allowedDeprecated ?? [];
  if (!Array.isArray(allowed) || !allowed.every((m) => m === "roots-list" || m === "sampling-create-message")) {
    throw refuse("invalid_argument", "`policy.allowedDeprecated` holds only \"roots-list\" and \"sampling-create-message\"");
  }
  return {
    roundTripLifetimeMs: BigInt(int(p.roundTripLifetimeMs, 300000, Number.MAX_SAFE_INTEGER, "roundTripLifetimeMs")),
    maxRequestStateBytes: int(p.maxRequestStateBytes, 65536, 0xffffffff, "maxRequestStateBytes"),
    maxRounds: int(p.maxRounds, 10, 0xffffffff, "maxRounds"),
    allowedDeprecated: [...allowed],
    policyVersion: text(p.policyVersion ?? "default", "policy.policyVersion"),
  };
}

const isU64 = (v) => typeof v === "bigint" ? v >= 0n && v <= U64_MAX : Number.isSafeInteger(v) && v >= 0;
const u64 = (v) => BigInt(v);

/** The message of a service that threw: what the gate records as the host's error. */
function failure(e) {
  if (e instanceof HostError) return e.message;
  return `${e?.name ?? "Error"}: ${e?.message ?? String(e)}`;
}

// `sha256Hex` answers the `digest` import; the package passes none. node:crypto made a form
// round no faster (the crossing, the string's decoding and a hash object cost what hashing
// in the guest does: docs/performance.md), and a page has no synchronous SHA-256 (Web
// Crypto's digest returns a promise). Declined once, the guest hashes everything itself.
// The adapters between the services a caller writes (plain JS values, numbers or bigints,
// `null` for absent) and what the glue passes and expects (bigints for u64, throws for `err`).
// Every value a service returns is checked here: a bad one is a host error, never a trap.
function imports(services, sha256Hex = null) {
  const { clock, storage, consent, audit } = services;
  // Whatever a service does (throws anything, returns anything, has getters that throw), the
  // glue sees a value or an `err` string: a thrown Error would make it trap the instance.
  const guarded = (f) => (...args) => {
    try {
      return f(...args);
    } catch (e) {
      throw typeof e === "string" ? e : failure(e);
    }
  };
  const append = guarded(({ shard, seq, prevSha256, eventSha256, line }) => {
    // The entry as AuditEntry spells it, whatever else the glue's record carries: `seq`,
    // `prevSha256` and the outcome's head are those of `shard` (one chain per shard).
    const o = audit.append({ shard, seq, prevSha256, eventSha256, line });
    if (o === null || typeof o !== "object") throw "the audit sink returned no outcome";
    const { written, stored, headSeq, headSha256 } = o;
    const ok = typeof written === "boolean" && (stored === null || stored === undefined || typeof stored === "string")
      && isU64(headSeq) && typeof headSha256 === "string";
    if (!ok) throw "the audit sink returned no { written, stored, headSeq, headSha256 }";
    return { written, stored: stored ?? undefined, headSeq: u64(headSeq), headSha256 };
  });
  const write = guarded((writes) => {
    const ops = writes.map((w) => ({ key: w.key, expected: w.expected, value: w.value ?? null, ttlMs: w.ttlMs }));
    const versions = storage.write(ops);
    if (!Array.isArray(versions) || versions.length > ops.length || !versions.every(isU64)) {
      throw "the store returned versions that are not u64, or too many";
    }
    // A list<u64> crosses as a BigUint64Array.
    return BigUint64Array.from(versions, u64);
  });
  return {
    [`mrtr:gate/clock`]: {
      nowMs() {
        try {
          const now = clock.nowMs();
          // A negative, fractional or missing time: one the gate refuses as out of range.
          return isU64(now) ? u64(now) : U64_MAX;
        } catch {
          return U64_MAX;
        }
      },
    },
    [`mrtr:gate/storage`]: {
      read: guarded((keys) => {
        const found = storage.read(keys.map(({ key, have }) => ({ key, have })));
        if (!Array.isArray(found) || found.length !== keys.length) throw "the store returned fewer or more entries than keys";
        return found.map((e) => {
          if (e === null || e === undefined) return { version: 0n, value: "" };
          const { version, value } = e;
          if (!isU64(version) || typeof value !== "string") throw "the store returned an entry that is not { version, value }";
          return { version: u64(version), value };
        });
      }),
      write,
      listDue: guarded((dueByMs, cursor, limit) => {
        const page = storage.listDue(dueByMs, cursor ?? null, limit);
        if (page === null || typeof page !== "object") throw "the store listed no { keys, next }";
        const { keys, next } = page;
        if (!Array.isArray(keys) || !keys.every((k) => typeof k === "string")) throw "the store listed a key that is not a string";
        if (next !== null && next !== undefined && typeof next !== "string") throw "the store's next cursor is not a string";
        // An option<string> crosses as the string or undefined.
        return { keys: [...keys], next: next ?? undefined };
      }),
    },
    [`mrtr:gate/consent`]: {
      requestConsent: guarded((prompt) => {
        const r = consent.requestConsent(prompt);
        if (r === null || typeof r !== "object") throw "the consent provider returned no receipt";
        const { receiptId, decision, method, viewSha256, responsesSha256 } = r;
        const ok = typeof receiptId === "string" && (decision === "granted" || decision === "refused")
          && CONSENT_METHOD_NAMES.has(method)
          && typeof viewSha256 === "string" && typeof responsesSha256 === "string";
        if (!ok) throw "the consent provider returned no { receiptId, decision, method, viewSha256, responsesSha256 }";
        return { receiptId, decision, method, viewSha256, responsesSha256 };
      }),
    },
    [`mrtr:gate/audit`]: {
      append,
    },
    // The `journal` import: the two calls it stands for, in order (wit/gate.wit `journal`).
    // Each step's answer is checked as its own import's; a thrown string is its `err`.
    [`mrtr:gate/journal`]: {
      appendThenWrite(entry, writes) {
        const appended = append(entry);
        const confirmed = appended.written && appended.stored === entry.line;
        if (!confirmed) return { applied: new BigUint64Array(0), appended, failed: undefined };
        try {
          return { applied: write(writes), appended, failed: undefined };
        } catch (e) {
          return { applied: new BigUint64Array(0), appended, failed: String(e) };
        }
      },
      writeThenAppend(writes, entry) {
        const applied = write(writes);
        if (applied.length === 0) return { applied, appended: undefined, failed: undefined };
        try {
          return { applied, appended: append(entry), failed: undefined };
        } catch (e) {
          return { applied, appended: undefined, failed: String(e) };
        }
      },
    },
    [`mrtr:gate/digest`]: {
      // An option<string> crosses as the string or undefined (none: the guest hashes itself);
      // anything but a string would trap in the glue.
      sha256(text) {
        const digest = typeof sha256Hex === "function" ? sha256Hex(text) : undefined;
        return typeof digest === "string" ? digest : undefined;
      },
    },
  };
}

/** The modules each `loadCoreModule` compiled, by file name (promises of `WebAssembly.Module`). */
const compiledBy = new WeakMap();

function cachedCoreLoader(load) {
  // Each loader's compiled modules are kept: a second Gate (another user, a fresh start)
  // does not compile the component again.
  if (!compiledBy.has(load)) compiledBy.set(load, new Map());
  const compiled = compiledBy.get(load);
  return (file) => {
    if (!compiled.has(file)) compiled.set(file, load(file));
    return compiled.get(file);
  };
}

/** The loader jco's glue calls for each core module, from Gate.create's options. */
async function coreLoader(options) {
  const { loadCoreModule, component, expectedSha256 } = options;
  if (loadCoreModule === undefined) return componentLoader({ component, expectedSha256 });
  // A caller's own core modules: no component bytes pass here, so no digest can be checked.
  if (component !== undefined || expectedSha256 !== undefined) {
    throw new LoadError("invalid_argument", "`loadCoreModule` loads core modules no digest can be checked over: pass `component` (and `expectedSha256`) instead");
  }
  if (typeof loadCoreModule !== "function") throw new LoadError("invalid_argument", "`loadCoreModule` must be a function");
  return cachedCoreLoader(loadCoreModule);
}

function verdict(v) {
  switch (v.tag) {
    case "input-required": {
      const c = v.val;
      let view;
      return {
        kind: "input_required",
        viewJson: c.viewJson,
        viewSha256: c.viewSha256,
        round: c.round,
        inputKeys: c.inputKeys,
        requestStateSha256: c.requestStateSha256 ?? null,
        // Parsed once, on first use: every reader of this round gets the same parse.
        get view() { return (view ??= JSON.parse(c.viewJson)); },
      };
    }
    case "complete":
      return { kind: "complete" };
    default:
      return { kind: "error", code: Number(v.val) };
  }
}

/** The gate over four host services. One Gate is one sandboxed instance at a time. */
export class Gate {
  #services;
  #instantiate;
  #gate = null;
  /** How many calls trapped (each replaced the instance). */
  traps = 0;

  constructor(instantiate, services) {
    this.#instantiate = instantiate;
    this.#services = services;
  }

  /**
   * @param services `{ clock, storage, consent, audit }` (see ./hosts.js)
   * @param options `{ expectedSha256?, component?, loadCoreModule? }`: `expectedSha256` pins
   *   the component (64 hex digits, as `mrtr-gate info` and SHA256SUMS print it; another is
   *   refused with UnexpectedComponent before anything is compiled); `component` is where the
   *   component is (a URL, a Response, an ArrayBuffer or a typed array; default: the one the
   *   package ships); `loadCoreModule(file)` loads jco's core modules some other way, and
   *   cannot be pinned (refused together with `expectedSha256` or `component`).
   */
  static async create(services, options = {}) {
    for (const s of ["clock", "storage", "consent", "audit"]) {
      if (!services?.[s]) throw new TypeError(`Gate.create needs services.${s}`);
    }
    if (options === null || typeof options !== "object") throw new LoadError("invalid_argument", "Gate.create's options must be an object");
    const getCoreModule = await coreLoader(options);
    const { instantiate } = await import("../gen/gate.js");
    const adapted = imports(services);
    const gate = new Gate(async () => (await instantiate(getCoreModule, adapted))[`mrtr:gate/gate@${WIT}`] ?? null, services);
    await gate.#live();
    return gate;
  }

  async #live() {
    if (this.#gate === null) {
      const exports = await this.#instantiate();
      if (!exports) throw new Error(`the component does not export mrtr:gate/gate@${WIT}`);
      this.#gate = exports;
    }
    return this.#gate;
  }

  async #call(name, ...args) {
    const gate = await this.#live();
    try {
      return gate[name](...args);
    } catch (e) {
      if (e && e.payload && typeof e.payload.code === "string") {
        const p = e.payload;
        throw new GateError(p.code, p.cause, p.message, p.audited);
      }
      // Anything else is a trap: this instance cannot be entered again.
      this.#gate = null;
      this.traps += 1;
      throw new GateError("guest_trapped", "host", `the gate trapped; the call is denied and the instance replaced (${e?.message ?? e})`, false);
    }
  }

  /** Bind a request before it is sent; send the returned `requestJson`. */
  async register({ requestId: id, server: s, user, tenant, method, params, policy: p }) {
    const r = await this.#call("register", {
      requestId: requestId(id, "requestId"),
      server: server(s),
      user: text(user, "user"),
      tenant: text(tenant, "tenant"),
      method: text(method, "method"),
      paramsJson: jsonText(params, "params"),
      policy: policy(p),
    });
    return { requestJson: r.requestJson, paramsSha256: r.paramsSha256, expiresAtMs: Number(r.expiresAtMs) };
  }

  /** Judge a JSON-RPC response (the whole message text) that arrived from `server`. */
  async acceptResponse(s, responseJson) {
    return verdict(await this.#call("acceptResponse", server(s), text(responseJson, "responseJson")));
  }

  /** Validate the answers, obtain consent, consume the round, return the retry to send. */
  async buildRetry({ server: s, requestId: id, retryId, user, tenant, responses }) {
    const r = await this.#call("buildRetry", {
      server: server(s),
      requestId: requestId(id, "requestId"),
      retryId: requestId(retryId, "retryId"),
      user: text(user, "user"),
      tenant: text(tenant, "tenant"),
      responsesJson: jsonText(responses, "responses"),
    });
    return { requestJson: r.requestJson, round: r.round, consentReceiptId: r.consentReceiptId ?? null };
  }

  /**
   * A relay's path: hold a client's own retry (its `method` and whole `params`, with
   * `inputResponses` and `requestState`) to the round open on `requestId` (null: the relay
   * found none; refused `inactive_mrtr_round`, audited), then build it as `buildRetry` does
   * with the client's answers. Send the returned `requestJson`, never the client's text.
   */
  async retryFromClient({ server: s, requestId: id, retryId, user, tenant, method, params }) {
    const r = await this.#call("retryFromClient", {
      server: server(s),
      requestId: id === null || id === undefined ? undefined : requestId(id, "requestId"),
      retryId: requestId(retryId, "retryId"),
      user: text(user, "user"),
      tenant: text(tenant, "tenant"),
      method: text(method, "method"),
      paramsJson: jsonText(params, "params"),
    });
    return { requestJson: r.requestJson, round: r.round, consentReceiptId: r.consentReceiptId ?? null };
  }

  /**
   * A relay's path: record the refusal of a message no binding judges, for the client of
   * `user` and `tenant`. `refusal` is `"server-request"` (a request the server sent outside any
   * round; pass its `method`, and only then), `"input-required"` (an answer to an ungated
   * request that asks for input), `"input-requests-notified"` (a notification carrying
   * `inputRequests`) or `"input-responses"` (the client's `inputResponses` outside a gated
   * retry). Returns the denial, audited, as a GateError; refuse the message yourself.
   */
  async refuseUnbound({ server: s, user, tenant, refusal, method }) {
    const e = await this.#call("refuseUnbound", server(s), text(user, "user"), text(tenant, "tenant"), unbound(refusal, method));
    return new GateError(e.code, e.cause, e.message, e.audited);
  }

  /**
   * End a binding: cancelled, (`error`: a short code) failed, or (`policy`: the refusing
   * policy's receipt id, `policy:<id>`) refused by a policy of the host's before anyone saw
   * the round. Returns how it ended.
   */
  async finish({ server: s, requestId: id, user, tenant, error, policy }) {
    const given = (v) => v !== undefined && v !== null;
    if (given(error) && given(policy)) throw refuse("invalid_argument", "finish takes `error` or `policy`, not both");
    const outcome = given(policy)
      ? { tag: "policy-denied", val: text(policy, "policy") }
      : given(error) ? { tag: "error", val: text(error, "error") } : { tag: "cancelled" };
    return this.#call("finish", {
      server: server(s),
      requestId: requestId(id, "requestId"),
      user: text(user, "user"),
      tenant: text(tenant, "tenant"),
      outcome,
    });
  }

  /** End every binding whose lifetime has passed; returns how many. */
  async expireStale() {
    return this.#call("expireStale");
  }
}

/** The adapted imports (the package's tests build instances with them: mrtr-gate/internal). */
export const __testImports = imports;

export { LoadError, UnexpectedComponent };

// How a host shows a server's strings (every one of them) on a screen: src/shown.js.
export { hiddenOrControl, shownJson, shownLines, shownText } from "./shown.js";
