// Keys the host holds and the component never sees (docs/host-keys.md), in the formats of the
// Rust host (host-harness/host/src/host_keys.rs), byte for byte: a store written by one host reads
// in the others, and a name gets the same pseudonym everywhere (tests/host_keys/vectors.json
// pins them).
//
// - AuthenticatedStorage: every stored value is `mac2.<key id>.<prev>.<HMAC-SHA256>.<text>`;
//   a value that fails its MAC, was moved to another key, or is older than one this wrapper
//   saw under its key (a rollback) is refused (HostError: the gate denies, `storage_failed`);
// - Pseudonyms: `u1.<32 hex>` / `t1.<32 hex>` for the user and tenant passed to the gate;
// - AnchoredAudit and verifyAnchor (anchor.js): every trail line keyed by a link beside the
//   trail, each shard's head anchored apart from it; verifyTrail checks the shards' chains
//   without a key.
//
// Node only (node:crypto): the gate calls storage synchronously, and WebCrypto's HMAC is
// asynchronous, so a browser cannot run these wrappers; the package's other modules do not
// import this one and still load in browsers.

import { createHmac, timingSafeEqual } from "node:crypto";
import { HostError } from "./index.js";

export { AnchoredAudit, verifyAnchor, verifyTrail } from "./anchor.js";

const ID = /^[A-Za-z0-9_-]{1,32}$/;
const LOWER_HEX = /^[0-9a-f]*$/;
const STORAGE_CONTEXT = Buffer.from("mrtr-gate/storage/v2");
const PSEUDONYM_CONTEXT = Buffer.from("mrtr-gate/pseudonym/v1");
const TAG = "mac2.";
const U64_MAX = (1n << 64n) - 1n;
// How many keys the rollback check remembers: past it, it starts again (forgetting only
// weakens the check for the keys forgotten, it never refuses a good value).
const SEEN_KEYS = 65_536;

/** A key the host cannot use (a bad id, a short secret, an unknown id). */
export class HostKeyError extends Error {
  constructor(message) {
    super(message);
    this.name = "HostKeyError";
  }
}

/** A host's keys: the current one (used for new MACs) and older ones still accepted. */
export class HostKeys {
  #keys = new Map();
  #current;
  /** `id`: 1 to 32 characters of [A-Za-z0-9_-]; `secret`: at least 32 bytes (Uint8Array). */
  constructor(id, secret) {
    this.add(id, secret);
    this.#current = id;
  }
  /** Accept `id` too (an older key, during a rotation). */
  add(id, secret) {
    if (typeof id !== "string" || !ID.test(id)) throw new HostKeyError("a key id is 1 to 32 bytes of [A-Za-z0-9_-]");
    if (!(secret instanceof Uint8Array) || secret.length < 32) throw new HostKeyError("a host key is at least 32 bytes");
    this.#keys.set(id, Buffer.from(secret));
  }
  /** Make `id` (already added) the key new MACs use. */
  rotateTo(id) {
    if (!this.#keys.has(id)) throw new HostKeyError(`no key \`${id}\``);
    this.#current = id;
  }
  /** Stop accepting `id` (the end of a rotation); the current key cannot be dropped. */
  retire(id) {
    if (id !== this.#current) this.#keys.delete(id);
  }
  get currentId() {
    return this.#current;
  }
  /** The HMAC of `parts` (Buffers), each prefixed by its length (u64 big-endian); null: no such key. */
  mac(id, parts) {
    const key = this.#keys.get(id);
    if (key === undefined) return null;
    const mac = createHmac("sha256", key);
    for (const part of parts) {
      // Length-prefixed, so no two splits of the same bytes MAC alike.
      const len = Buffer.alloc(8);
      len.writeBigUInt64BE(BigInt(part.length));
      mac.update(len);
      mac.update(part);
    }
    return mac.digest();
  }
  verify(id, parts, tag) {
    const mac = this.mac(id, parts);
    return mac !== null && tag.length === mac.length && timingSafeEqual(mac, tag);
  }
  // Never the key bytes.
  toJSON() {
    return { current: this.#current, ids: [...this.#keys.keys()].sort() };
  }
  [Symbol.for("nodejs.util.inspect.custom")]() {
    return `HostKeys ${JSON.stringify(this.toJSON())}`;
  }
}

/** Two versions of one store life (the same epoch, the high 32 bits). */
const sameLife = (a, b) => a >> 32n === b >> 32n;

/**
 * Whether a value at `version` that replaced `prev` and has `mac` is older than the one seen
 * (`{ version, mac }`, mac null: deleted at that version), or the one seen changed without a
 * new version.
 */
function refuses(seen, version, prev, mac) {
  if (version === seen.version) {
    // Only the very value seen passes at its version.
    return seen.mac === null || !seen.mac.equals(mac);
  }
  if (sameLife(version, seen.version) && version < seen.version) return true;
  // A value written over a version older than the one seen was sealed before it (a delete
  // consumed the version it deleted: nothing is written over it).
  return prev !== 0n && sameLife(prev, seen.version) && (prev < seen.version || (prev === seen.version && seen.mac === null));
}

const sameSeen = (a, b) =>
  a !== undefined && a.version === b.version && (a.mac === null ? b.mac === null : b.mac !== null && a.mac.equals(b.mac));

const version64 = (v) => {
  const n = BigInt(v ?? 0);
  if (n < 0n || n > U64_MAX) throw new HostError("a version is not a u64");
  return n;
};

const parts = (key, prev, text) => {
  const p = Buffer.alloc(8);
  p.writeBigUInt64BE(prev);
  return [STORAGE_CONTEXT, Buffer.from(key, "utf8"), p, Buffer.from(text, "utf8")];
};

class Older extends Error {}

/**
 * A store whose every value is authenticated by a host key, as the Rust host's
 * `AuthenticatedStorage`: what the gate writes is stored as `mac2.<key id>.<prev: 16 hex>.
 * <HMAC-SHA256(key; "mrtr-gate/storage/v2", gate key, prev, text), 64 hex>.<text>`, `prev`
 * the version the write replaced (0: the key was absent). Every read asks the inner store
 * for the whole value and checks its MAC; the gate is spared the value it holds (`have`)
 * only when this wrapper saw that very value. Per key it keeps the last version it read or
 * wrote and refuses a value older than that within one store life (the epoch in a version's
 * high 32 bits): a value sealed earlier and written back.
 */
export class AuthenticatedStorage {
  #inner;
  #keys;
  #seen = new Map();
  constructor(inner, keys) {
    this.#inner = inner;
    this.#keys = keys;
  }
  #seal(key, prev, text) {
    const id = this.#keys.currentId;
    const mac = this.#keys.mac(id, parts(key, prev, text));
    if (mac === null) throw new HostError("the current host key is missing");
    return { sealed: `${TAG}${id}.${prev.toString(16).padStart(16, "0")}.${mac.toString("hex")}.${text}`, mac };
  }
  #open(key, stored) {
    const refused = () => new HostError("a stored value failed its authentication");
    if (typeof stored !== "string" || !stored.startsWith(TAG)) throw refused();
    const rest = stored.slice(TAG.length);
    const a = rest.indexOf(".");
    const b = a < 0 ? -1 : rest.indexOf(".", a + 1);
    const c = b < 0 ? -1 : rest.indexOf(".", b + 1);
    if (c < 0) throw refused();
    const [id, prevHex, tag, text] = [rest.slice(0, a), rest.slice(a + 1, b), rest.slice(b + 1, c), rest.slice(c + 1)];
    // Only the spelling a seal writes (lowercase hex, no sign), as every host reads it.
    if (prevHex.length !== 16 || !LOWER_HEX.test(prevHex) || tag.length !== 64 || !LOWER_HEX.test(tag)) throw refused();
    const prev = BigInt(`0x${prevHex}`);
    const mac = Buffer.from(tag, "hex");
    if (!this.#keys.verify(id, parts(key, prev, text), mac)) throw refused();
    return { mac, prev, text };
  }
  // Note `now` unless a newer version of the same life is noted already.
  #remember(key, now) {
    const old = this.#seen.get(key);
    if (old !== undefined && sameLife(old.version, now.version) && now.version < old.version) return;
    if (this.#seen.size >= SEEN_KEYS && !this.#seen.has(key)) this.#seen.clear();
    this.#seen.set(key, now);
  }
  #readChecked(keys) {
    // Every value, even one the gate holds: its MAC is checked on every read.
    const found = this.#inner.read(keys.map(({ key }) => ({ key, have: 0n })));
    if (!Array.isArray(found) || found.length !== keys.length) throw new HostError("the store answered another number of keys than asked");
    const opened = keys.map(({ key }, i) => {
      const e = found[i];
      return e === null || e === undefined ? null : { version: version64(e.version), ...this.#open(key, e.value) };
    });
    keys.forEach(({ key }, i) => {
      const o = opened[i];
      const seen = this.#seen.get(key);
      if (o !== null && seen !== undefined && refuses(seen, o.version, o.prev, o.mac)) throw new Older();
    });
    return keys.map(({ key, have }, i) => {
      const o = opened[i];
      if (o === null) return null;
      const now = { version: o.version, mac: o.mac };
      const before = this.#seen.get(key);
      this.#remember(key, now);
      // The gate is spared only the very value this wrapper saw at its version.
      const h = BigInt(have ?? 0);
      const spared = h !== 0n && h === o.version && sameSeen(before, now);
      return { version: o.version, value: spared ? "" : o.text };
    });
  }
  read(keys) {
    try {
      return this.#readChecked(keys);
    } catch (e) {
      if (!(e instanceof Older)) throw e;
    }
    // The Rust and Python hosts read once more here (threads sharing a wrapper may cross a
    // read with a newer write); one thread cannot, but the rule stays the same everywhere.
    try {
      return this.#readChecked(keys);
    } catch (e) {
      if (e instanceof Older) throw new HostError("a stored value is older than one this host has seen (a rollback)");
      throw e;
    }
  }
  write(writes) {
    const sealed = writes.map((w) => (w.value === null || w.value === undefined ? null : this.#seal(w.key, version64(w.expected), w.value)));
    const applied = this.#inner.write(writes.map((w, i) => ({ ...w, value: sealed[i] === null ? null : sealed[i].sealed })));
    if (Array.isArray(applied)) {
      applied.forEach((v, i) => {
        const w = writes[i];
        if (w === undefined) return;
        if (sealed[i] !== null) this.#remember(w.key, { version: version64(v), mac: sealed[i].mac });
        else if (version64(w.expected) !== 0n) this.#remember(w.key, { version: version64(w.expected), mac: null });
      });
    }
    return applied;
  }
  listDue(dueByMs, cursor, limit) {
    // Keys are not sealed (only values are): the listing passes through.
    return this.#inner.listDue(dueByMs, cursor, limit);
  }
}

/**
 * Keyed pseudonyms for the principals the gate binds: `u1.<32 hex>` for a user and
 * `t1.<32 hex>` for a tenant (the first 128 bits of HMAC-SHA256 with the current host key
 * over a context, the kind and the name, length-prefixed). The same in every host.
 */
export class Pseudonyms {
  #keys;
  constructor(keys) {
    this.#keys = keys;
  }
  #of(kind, name) {
    const mac = this.#keys.mac(this.#keys.currentId, [PSEUDONYM_CONTEXT, Buffer.from(kind), Buffer.from(name, "utf8")]);
    return `${kind}1.${mac === null ? "" : mac.subarray(0, 16).toString("hex")}`;
  }
  /** The pseudonym to pass the gate for `user`. */
  user(user) {
    return this.#of("u", user);
  }
  /** The pseudonym to pass the gate for `tenant`. */
  tenant(tenant) {
    return this.#of("t", tenant);
  }
}
