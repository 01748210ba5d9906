// Types of the mrtr-gate JavaScript API (src/index.js).

/** A JSON-RPC id: a safe integer or bigint within +-(2^53 - 1), or a string of 1 to 256 bytes. */
export type RequestId = number | bigint | string;

/** The server a message came from, as the host verified it at the transport. */
export type ServerIdentity = { origin: string; endpoint?: undefined } | { endpoint: string; origin?: undefined };

export type DeprecatedMethod = "roots-list" | "sampling-create-message";

export interface Policy {
  roundTripLifetimeMs?: number;
  maxRequestStateBytes?: number;
  maxRounds?: number;
  allowedDeprecated?: DeprecatedMethod[];
  policyVersion?: string;
}

export type ErrorCause = "peer" | "caller" | "host";

export declare class GateError extends Error {
  /** The stable snake_case code (docs/errors.md), or `guest_trapped` / `invalid_argument`. */
  readonly code: string;
  readonly cause: ErrorCause;
  readonly detail: string;
  /** True when the denial itself was written to the audit sink and read back. */
  readonly audited: boolean;
}

/** Thrown by a host service to report a failure; the gate denies. */
export declare class HostError extends Error {
  constructor(message: string);
}

export interface Registered {
  requestJson: string;
  paramsSha256: string;
  expiresAtMs: number;
}

export interface InputRequired {
  kind: "input_required";
  viewJson: string;
  viewSha256: string;
  round: number;
  inputKeys: string[];
  requestStateSha256: string | null;
  /** The consent view, parsed (docs/consent-view.md). */
  readonly view: any;
}

export type Verdict = InputRequired | { kind: "complete" } | { kind: "error"; code: number };

export interface Retry {
  requestJson: string;
  round: number;
  consentReceiptId: string | null;
}

export type TerminalOutcome = "complete" | "error" | "cancelled" | "expired";

export interface Entry {
  version: bigint | number;
  value: string;
}

export interface ReadKey {
  key: string;
  /** The version of the value the gate holds (0n: none); a key still at it comes back with an empty value. */
  have: bigint;
}

export interface WriteOp {
  key: string;
  /** 0n: the key must be absent. */
  expected: bigint;
  /** null deletes the key. */
  value: string | null;
  ttlMs: bigint;
}

export interface ConsentPrompt {
  viewJson: string;
  viewSha256: string;
  responsesJson: string;
  responsesSha256: string;
}

/** How a decision was made: recorded in the trail as `consent_method`. */
export type ConsentMethod = "user-at-screen" | "preset-answers" | "delegated-to-client" | "policy-hook";

export interface ConsentReceipt {
  receiptId: string;
  decision: "granted" | "refused";
  method: ConsentMethod;
  viewSha256: string;
  responsesSha256: string;
}

/**
 * One audit event, on its shard's chain: `seq`, `prevSha256` and an outcome's head are those
 * of `shard` (wit/gate.wit, `audit`).
 */
export interface AuditEntry {
  /** The chain the entry extends: the server's key part (32 lowercase hex digits), or `root` for a host's anchors. */
  shard: string;
  /** From 1 in each shard. */
  seq: bigint;
  /** The digest of the shard's line before (64 zeros for its first). */
  prevSha256: string;
  eventSha256: string;
  line: string;
}

export interface AppendOutcome {
  written: boolean;
  stored: string | null;
  /** The head of the entry's shard after the call (`0` and 64 zeros when the shard is empty). */
  headSeq: bigint | number;
  headSha256: string;
}

/** One page of `listDue`: the due keys and the next page's cursor (null: done). */
export interface DuePage {
  keys: string[];
  next: string | null;
}

export interface Services {
  clock: { nowMs(): number | bigint };
  storage: {
    read(keys: ReadKey[]): (Entry | null)[];
    write(writes: WriteOp[]): (bigint | number)[];
    /** One page of the live keys due by `dueByMs` (wit/gate.wit `storage.list-due`). */
    listDue(dueByMs: bigint, cursor: string | null, limit: number): DuePage;
  };
  consent: { requestConsent(prompt: ConsentPrompt): ConsentReceipt };
  audit: { append(entry: AuditEntry): AppendOutcome };
}

export interface GateOptions {
  /**
   * Pins the component: its SHA-256, 64 hex digits (as `mrtr-gate info` and the release's
   * SHA256SUMS print it). Another component is refused with `UnexpectedComponent` before any
   * of it is compiled; without WebCrypto (`crypto.subtle`) a pin is refused (`digest_unavailable`).
   */
  expectedSha256?: string;
  /**
   * Where the component is (default: component/mrtr-gate.wasm in the package): a URL (a
   * bundler's asset URL), a Response, or its bytes. It must be the component this package's
   * glue was built from (its digest is checked too).
   */
  component?: URL | string | Response | ArrayBuffer | ArrayBufferView;
  /**
   * Loads jco's core modules some other way. No digest can be checked over them: refused
   * together with `expectedSha256` or `component`.
   */
  loadCoreModule?: (file: string) => Promise<WebAssembly.Module>;
}

/** The component could not be loaded; nothing of it was compiled. */
export declare class LoadError extends Error {
  /** `unexpected_component`, `malformed_component`, `component_unavailable`, `digest_unavailable` or `invalid_argument`. */
  readonly code: "unexpected_component" | "malformed_component" | "component_unavailable" | "digest_unavailable" | "invalid_argument";
}

/** The component's SHA-256 is not the pinned one (`whose: "pin"`) or the one the package was built from (`"shipped"`). */
export declare class UnexpectedComponent extends LoadError {
  readonly code: "unexpected_component";
  /** The SHA-256 expected (lowercase hex). */
  readonly expected: string;
  /** The SHA-256 of the bytes given (lowercase hex). */
  readonly actual: string;
  readonly whose: "pin" | "shipped";
}

export declare class Gate {
  static create(services: Services, options?: GateOptions): Promise<Gate>;
  /** How many calls trapped (each replaced the instance). */
  readonly traps: number;
  register(r: {
    requestId: RequestId;
    server: ServerIdentity;
    user: string;
    tenant: string;
    method: "tools/call" | "prompts/get" | "resources/read" | string;
    params: string | Record<string, unknown>;
    policy?: Policy;
  }): Promise<Registered>;
  acceptResponse(server: ServerIdentity, responseJson: string): Promise<Verdict>;
  buildRetry(r: {
    server: ServerIdentity;
    requestId: RequestId;
    retryId: RequestId;
    user: string;
    tenant: string;
    responses: string | Record<string, unknown>;
  }): Promise<Retry>;
  /** A client's own retry, held to the round open on `requestId` (null: none found). */
  retryFromClient(r: {
    server: ServerIdentity;
    requestId: RequestId | null;
    retryId: RequestId;
    user: string;
    tenant: string;
    method: string;
    params: string | Record<string, unknown>;
  }): Promise<Retry>;
  /** Refuse a server's request outside any round: the audited denial, returned. */
  refuseUnbound(
    r:
      | { server: ServerIdentity; user: string; tenant: string; refusal: "server-request"; method: string }
      | { server: ServerIdentity; user: string; tenant: string; refusal: "input-required" | "input-requests-notified" | "input-responses" },
  ): Promise<GateError>;
  finish(r: { server: ServerIdentity; requestId: RequestId; user: string; tenant: string; error?: string; policy?: string }): Promise<TerminalOutcome>;
  expireStale(): Promise<number>;
}

export { hiddenOrControl, shownJson, shownLines, shownText } from "./shown.js";
