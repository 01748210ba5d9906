// Types of the reference host services (src/hosts.js).
import type { AppendOutcome, AuditEntry, ConsentMethod, ConsentPrompt, ConsentReceipt, DuePage, Entry, ReadKey, WriteOp } from "./index.js";

export declare const GENESIS_SHA256: string;
export declare class SystemClock { nowMs(): number; }
export declare class ManualClock { constructor(startMs?: number); now: number; nowMs(): number; advance(ms: number): void; }
export declare class MemoryStorage {
  constructor(clock?: { nowMs(): number });
  fault: "fail" | "lose_cas" | "fail_deletes" | null;
  loseCasAfter: number | null;
  readonly size: number;
  read(keys: ReadKey[]): (Entry | null)[];
  write(writes: WriteOp[]): bigint[];
  listDue(dueByMs: bigint | number, cursor: string | null, limit: number): DuePage;
  /** The live keys starting with `prefix` (for tests that look inside the store). */
  liveKeys(prefix?: string): string[];
}
/**
 * Whether a durable sink may take `entry` on its shard: 1 to 64 of [0-9a-z], named by the
 * line's top-level `"shard"` (the line parsed as JSON: a nested key of that name does not
 * count, and a line that does not parse names none). A durable sink refuses (throws
 * `HostError`) an entry that fails it.
 */
export declare function shardOk(entry: AuditEntry): boolean;
/** An audit sink in memory, one chain per shard. */
export declare class MemoryAudit {
  constructor(window?: number | null);
  fault: "fail_append" | "corrupt_readback" | "lose_writes" | "fail_readback" | null;
  /** Every shard's lines, in the order written. */
  readonly lines: string[];
  /** The head of `shard` (`0n` and 64 zeros when it has none). */
  head(shard: string): { seq: bigint; sha256: string };
  append(entry: AuditEntry): AppendOutcome;
}
export declare const CONSENT_METHODS: readonly ConsentMethod[];
export declare class DecidedConsent {
  /**
   * Record the user's decision for the round `verdict` showed and the answers the host will
   * pass to `buildRetry` (an object, or its JSON text); the package digests them as the gate
   * does. Resolves to the receipt id the trail will record.
   */
  decideFor(
    verdict: { viewSha256: string },
    responses: Record<string, unknown> | string,
    granted: boolean,
    method?: ConsentMethod,
  ): Promise<string>;
  /** Record the user's decision on exactly this view and these answers' digests; returns the receipt id. */
  decide(viewSha256: string, responsesSha256: string, granted: boolean, method?: ConsentMethod): string;
  requestConsent(prompt: ConsentPrompt): ConsentReceipt;
}
export declare class CallbackConsent {
  constructor(ask: (prompt: ConsentPrompt) => boolean, method?: ConsentMethod);
  readonly method: ConsentMethod;
  requestConsent(prompt: ConsentPrompt): ConsentReceipt;
}
