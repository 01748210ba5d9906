// The component the package ships (component/mrtr-gate.wasm), checked and split for jco's glue.
//
// The package ships the component itself, not jco's core modules: the bytes a host pins are
// the bytes `mrtr-gate info` and the release's SHA256SUMS name, and the bytes it compiles. The
// loader hashes the component (WebCrypto), compares the digest with the one this build of the
// glue was made from (gen/component-digest.js) and with the host's pin, and only then splits
// out the top-level core modules (jco 1.11.2 writes exactly those, in order, as
// gate.core.wasm, gate.core2.wasm, ...; a test holds the split to jco's files).

import { COMPONENT_SHA256 } from "../gen/component-digest.js";

/** A component could not be loaded; nothing of it was compiled. `code` is stable snake_case. */
export class LoadError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "LoadError";
    /**
     * `unexpected_component` (see UnexpectedComponent), `malformed_component` (not a component
     * this loader can split), `component_unavailable` (could not be read), `digest_unavailable`
     * (a pin, but no WebCrypto to check it with), `invalid_argument` (the options).
     */
    this.code = code;
  }
}

/** The component is not the one expected: its SHA-256 differs from the pin or the shipped one. */
export class UnexpectedComponent extends LoadError {
  constructor(expected, actual, whose) {
    super("unexpected_component",
      `refused to load the gate component: its sha256 is ${actual}, not the ${expected} ${whose === "pin" ? "this host expects" : "this package was built from"}`);
    this.name = "UnexpectedComponent";
    /** The SHA-256 expected (lowercase hex). */
    this.expected = expected;
    /** The SHA-256 of the bytes given. */
    this.actual = actual;
    /** `pin` (options.expectedSha256) or `shipped` (the digest the glue was built with). */
    this.whose = whose;
  }
}

const malformed = (why) => new LoadError("malformed_component", `not a component this package can load: ${why}`);

const COMPONENT_HEADER = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
const CORE_HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const CORE_MODULE_SECTION = 1;

const startsWith = (bytes, at, header) => bytes.length - at >= header.length && header.every((b, i) => bytes[at + i] === b);

/** An unsigned LEB128 u32 at `at`: [value, next offset]. At most 5 bytes, no bits beyond 32. */
function u32(bytes, at) {
  let value = 0;
  for (let i = 0; i < 5; i += 1) {
    if (at + i >= bytes.length) throw malformed("a section size runs past the end");
    const b = bytes[at + i];
    if (i === 4 && b > 0x0f) throw malformed("a section size does not fit in 32 bits");
    // Multiplication, not <<: a shift by 28 would turn the top bits into a negative number.
    value += (b & 0x7f) * 2 ** (7 * i);
    if ((b & 0x80) === 0) return [value, at + i + 1];
  }
  throw malformed("a section size is longer than 5 bytes");
}

/**
 * The component's top-level core-module sections, in order, each a view of `bytes`. Refuses
 * (LoadError `malformed_component`) anything that is not a component binary whose every
 * section lies inside it, one without a core module, and a core module without its header.
 */
export function coreModules(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new LoadError("invalid_argument", "the component must be bytes");
  if (!startsWith(bytes, 0, COMPONENT_HEADER)) throw malformed("no component header (\\0asm, version 0x0d, layer 1)");
  const modules = [];
  let at = COMPONENT_HEADER.length;
  while (at < bytes.length) {
    const id = bytes[at];
    const [size, start] = u32(bytes, at + 1);
    if (size > bytes.length - start) throw malformed(`section ${id} at byte ${at} runs past the end`);
    if (id === CORE_MODULE_SECTION) {
      if (!startsWith(bytes, start, CORE_HEADER) || size < CORE_HEADER.length) throw malformed(`the core module at byte ${start} has no core module header`);
      modules.push(bytes.subarray(start, start + size));
    }
    at = start + size;
  }
  if (modules.length === 0) throw malformed("it holds no core module");
  return modules;
}

/** The file name jco's glue asks for the `n`th core module by (0-based). */
export const coreModuleName = (n) => `gate.core${n === 0 ? "" : n + 1}.wasm`;

const HEX64 = /^[0-9a-fA-F]{64}$/;

/** Lowercase hex SHA-256 by WebCrypto, or null when there is none (an insecure browser context). */
async function sha256Hex(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  let d;
  try {
    d = new Uint8Array(await subtle.digest("SHA-256", bytes));
  } catch (e) {
    throw new LoadError("digest_unavailable", `WebCrypto could not hash the component: ${e?.message ?? e}`);
  }
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The shipped component's URL: a literal, so bundlers (Vite, webpack 5) emit it as an asset. */
const SHIPPED = new URL("../component/mrtr-gate.wasm", import.meta.url);

async function fetchBytes(url) {
  const response = await fetch(url);
  return responseBytes(response, String(url));
}

async function responseBytes(response, what) {
  if (!response.ok) throw new LoadError("component_unavailable", `could not fetch the component (${what}): HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

function copy(view) {
  const c = new Uint8Array(view.byteLength);
  c.set(view);
  return c;
}

/** The bytes of `source` (a URL, a URL string, a Response, an ArrayBuffer or a typed array), as a private copy. */
async function readSource(source) {
  try {
    // Copied into a fresh ArrayBuffer: the caller cannot change what was hashed before it is
    // compiled, and WebCrypto refuses a view of a SharedArrayBuffer.
    if (source instanceof ArrayBuffer) return copy(new Uint8Array(source));
    if (ArrayBuffer.isView(source)) return copy(new Uint8Array(source.buffer, source.byteOffset, source.byteLength));
    if (typeof Response !== "undefined" && source instanceof Response) return await responseBytes(source, source.url || "a Response");
    if (source instanceof URL || typeof source === "string") {
      // A relative string is relative to the page, as fetch takes it.
      const url = new URL(source, globalThis.location?.href);
      // Node reads file: URLs itself (its fetch does not); the Node-only module hides behind a
      // conditional import (package.json "imports" #load) so no browser bundle sees `node:`.
      if (url.protocol === "file:" && typeof process !== "undefined" && process.versions?.node) {
        const { readFileUrl } = await import("#load");
        return new Uint8Array(await readFileUrl(url));
      }
      return await fetchBytes(url);
    }
  } catch (e) {
    if (e instanceof LoadError) throw e;
    throw new LoadError("component_unavailable", `could not read the component: ${e?.message ?? e}`);
  }
  throw new LoadError("invalid_argument", "`component` must be a URL, a Response, an ArrayBuffer or a typed array");
}

/** Checks a pin's form: 64 hex digits (either case, as Python and Rust take it). */
export function pinOf(expectedSha256) {
  if (expectedSha256 === undefined || expectedSha256 === null) return null;
  if (typeof expectedSha256 !== "string" || !HEX64.test(expectedSha256)) {
    throw new LoadError("invalid_argument", "`expectedSha256` must be 64 hex digits (as `mrtr-gate info` and SHA256SUMS print it)");
  }
  return expectedSha256.toLowerCase();
}

/**
 * Reads `source`, checks it against the shipped digest and splits it. Resolves to the loader
 * the glue calls, `(file) => Promise<WebAssembly.Module>` (each module compiled once, on first
 * use), and the component's SHA-256 (null: no WebCrypto, so nothing could be checked).
 */
async function load(source) {
  const bytes = await readSource(source);
  const digest = await sha256Hex(bytes);
  // No WebCrypto (a page served over plain http from a non-local host): nothing can be
  // compared, and the host trusts the origin that served the glue and the component alike;
  // a pin, though, is refused (checkPin).
  if (digest !== null && digest !== COMPONENT_SHA256) throw new UnexpectedComponent(COMPONENT_SHA256, digest, "shipped");
  const modules = coreModules(bytes);
  const compiled = new Map();
  const loader = (file) => {
    if (!compiled.has(file)) {
      const n = modules.findIndex((_, i) => coreModuleName(i) === file);
      compiled.set(file, n < 0
        ? Promise.reject(malformed(`the glue asks for ${file}, which the component does not hold`))
        : WebAssembly.compile(modules[n]));
    }
    return compiled.get(file);
  };
  return { loader, digest };
}

/** Refuses a component whose digest is not the pin (or cannot be computed while pinned). */
function checkPin({ digest }, pin) {
  if (pin === null) return;
  if (digest === null) throw new LoadError("digest_unavailable", "a pinned component needs WebCrypto (crypto.subtle: Node 20+, or a page in a secure context)");
  if (digest !== pin) throw new UnexpectedComponent(pin, digest, "pin");
}

// Checked and split components: the shipped one once per process (page), and one per object
// a host passed as `component` (a Response can be read only once; the same bytes again reuse
// the compiled modules). A failure is not kept: the next Gate.create tries again.
let shipped = null;
const given = new WeakMap();

function cached(source) {
  if (source === undefined || source === null) {
    shipped ??= load(SHIPPED).catch((e) => { shipped = null; throw e; });
    return shipped;
  }
  if (typeof source !== "object") return load(source);
  if (!given.has(source)) given.set(source, load(source).catch((e) => { given.delete(source); throw e; }));
  return given.get(source);
}

/**
 * The loader for `Gate.create`'s options `{ component, expectedSha256 }`: the component (default:
 * the shipped one) checked against the shipped digest and the pin before anything is compiled.
 */
export async function componentLoader({ component, expectedSha256 } = {}) {
  const pin = pinOf(expectedSha256);
  const c = await cached(component);
  checkPin(c, pin);
  return c.loader;
}

/** The digest this build of the glue was made from (gen/component-digest.js). */
export const SHIPPED_SHA256 = COMPONENT_SHA256;
