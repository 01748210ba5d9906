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
 * `inner` under a host key, as the Rust host: each line keyed by a link appended (and synced)
 * to `links` before it, each shard's head anchored in `checkpoint` (one line per shard, the
 * file replaced after each written append; the lines of an existing checkpoint that verify
 * are kept for the shards not written yet). An entry whose shard is not a shard name its line
 * carries (`shardOk` of mrtr-gate/hosts) is refused (throws `HostError`).
 */
export declare class AnchoredAudit implements AuditService {
  constructor(inner: AuditService, keys: HostKeys, checkpoint: string, links: string);
  append(entry: AuditEntry): AppendOutcome;
}

/**
 * What checking a trail against its links and anchor found (docs/host-keys.md). `shard` `""`:
 * lines from before shards. A shard's `events` are its lines; `intact`'s, the trail's.
 */
export type AnchorCheck =
  | { kind: "intact"; events: bigint }
  | { kind: "badAnchor" }
  | { kind: "brokenChain" }
  | { kind: "unkeyed"; shard: string; seq: bigint }
  | { kind: "truncated"; shard: string; events: bigint; anchored: bigint }
  | { kind: "diverged"; shard: string }
  | { kind: "extended"; shard: string; events: bigint; anchored: bigint };

/** Check `trail` (JSON lines) against its `links` and the anchor text `checkpoint` with `keys`. */
export declare function verifyAnchor(trail: string, links: string, checkpoint: string, keys: HostKeys): AnchorCheck;

/** A shard's head: its last line's `seq` and SHA-256. */
export interface ShardHead {
  seq: bigint;
  sha256: string;
}

/**
 * What checking a trail's chains without a key found: every shard's chain from genesis, and
 * the heads its `root` lines anchor held; else the first break, `at` the line's index from 0.
 */
export type TrailCheck =
  | { ok: true; lines: bigint; heads: Map<string, ShardHead> }
  | { ok: false; kind: "malformed" | "gap" | "broken" | "cut" | "rewritten"; at: number };

/** Check the chains of `trail` (JSON-lines text, or its lines) as the Rust host's `verify_trail`. */
export declare function verifyTrail(trail: string | readonly string[]): TrailCheck;
