// Types of the host-key wrappers (src/host-keys.js; Node only: node:crypto).
import type { AuditEntry, AppendOutcome, DuePage, Entry, ReadKey, WriteOp } from "./index.js";

/** A key the host cannot use (a bad id, a short secret, an unknown id). */
export declare class HostKeyError extends Error {}

/** A host's keys: the current one (used for new MACs) and older ones still accepted. */
export declare class HostKeys {
  /** `id`: 1 to 32 characters of [A-Za-z0-9_-]; `secret`: at least 32 bytes. */
  constructor(id: string, secret: Uint8Array);
  /** Accept `id` too (an older key, during a rotation). */
  add(id: string, secret: Uint8Array): void;
  /** Make `id` (already added) the key new MACs use. */
  rotateTo(id: string): void;
  /** Stop accepting `id`; the current key cannot be dropped. */
  retire(id: string): void;
  readonly currentId: string;
}

/** Any storage service of this package (`MemoryStorage`, or yours). */
export interface StorageService {
  read(keys: ReadKey[]): (Entry | null)[];
  write(writes: WriteOp[]): (bigint | number)[];
  listDue(dueByMs: bigint | number, cursor: string | null, limit: number): DuePage;
}

/** `inner` with every value sealed as `mac2.<key id>.<prev>.<HMAC>.<text>` and rollbacks refused. */
export declare class AuthenticatedStorage implements StorageService {
  constructor(inner: StorageService, keys: HostKeys);
  read(keys: ReadKey[]): (Entry | null)[];
  write(writes: WriteOp[]): (bigint | number)[];
  listDue(dueByMs: bigint | number, cursor: string | null, limit: number): DuePage;
}

/** `u1.<32 hex>` / `t1.<32 hex>` pseudonyms under the current key. */
export declare class Pseudonyms {
  constructor(keys: HostKeys);
  user(user: string): string;
  tenant(tenant: string): string;
}

/** Any audit sink of this package (`MemoryAudit`, or yours). */
export interface AuditService {
  append(entry: AuditEntry): AppendOutcome;
}

/**
 * `inner` under a host key: each line keyed by a link appended (and synced) to `links` before
 * it, the head anchored in `checkpoint` (replaced after each written append), as the Rust host.
 */
export declare class AnchoredAudit implements AuditService {
  constructor(inner: AuditService, keys: HostKeys, checkpoint: string, links: string);
  append(entry: AuditEntry): AppendOutcome;
}

/** What checking a trail against its links and anchor found (docs/host-keys.md). */
export type AnchorCheck =
  | { kind: "intact"; events: bigint }
  | { kind: "badAnchor" }
  | { kind: "brokenChain" }
  | { kind: "unkeyed"; seq: bigint }
  | { kind: "truncated"; events: bigint; anchored: bigint }
  | { kind: "diverged" }
  | { kind: "extended"; events: bigint; anchored: bigint };

/** Check `trail` (JSON lines) against its `links` and the anchor text `checkpoint` with `keys`. */
export declare function verifyAnchor(trail: string, links: string, checkpoint: string, keys: HostKeys): AnchorCheck;
