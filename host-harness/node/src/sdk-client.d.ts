// Types of the SDK client adapter (src/sdk-client.js).
import type { Gate, InputRequired, Policy } from "./index.js";

/** An error of the adapter itself (`cancelled`, `not_gated`, `no_response`, `transport_failed`, `invalid_result_type`, `malformed_response`, `usage`, and the answer refusals `duplicate_response`, `foreign_response`, `typed_event`, `batch_message`, `malformed_message`: docs/errors.md); the gate's refusals stay GateErrors. */
export declare class SdkAdapterError extends Error {
  readonly code: string;
}

type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface GatedSdkClientOptions {
  gate: Gate;
  /** The endpoint the transport posts to: the server every round is bound to. */
  url: string | URL;
  user: string;
  tenant: string;
  policy?: Policy;
  /** Answer a round: the `inputResponses` object, or null to cancel the call. */
  answer: (view: any, verdict: InputRequired) => Promise<Record<string, unknown> | null> | Record<string, unknown> | null;
  /** Open an accepted URL input, called only once the gate built the retry on a granted receipt. */
  openUrl?: (url: string) => void;
  /** The fetch underneath (default: globalThis.fetch). */
  fetch?: FetchLike;
}

export declare class GatedSdkClient {
  constructor(options: GatedSdkClientOptions);
  /** Give this to the SDK transport (`new StreamableHTTPClientTransport(url, { fetch: gated.fetch })`). */
  readonly fetch: FetchLike;
  /** SDK Client options with auto-fulfilment off and the 2026-07-28 era pinned. */
  static clientOptions<T extends object>(options?: T): T & { inputRequired: { autoFulfill: false }; versionNegotiation: { mode: { pin: "2026-07-28" } } };
  /** Use the connected SDK client. */
  attach(client: unknown): this;
  callTool(params: { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> }, options?: { signal?: AbortSignal; [k: string]: unknown }): Promise<any>;
  getPrompt(params: { name: string; arguments?: Record<string, string>; _meta?: Record<string, unknown> }, options?: { signal?: AbortSignal; [k: string]: unknown }): Promise<any>;
  readResource(params: { uri: string; _meta?: Record<string, unknown> }, options?: { signal?: AbortSignal; [k: string]: unknown }): Promise<any>;
}
