// The package ships the component, not jco's core modules: the loader hashes it, holds it to
// the digest the glue was built from and to a host's pin, and only then splits out the core
// modules. Hostile bytes are refused with a typed error, never a crash or a compile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Gate, LoadError, UnexpectedComponent } from "mrtr-gate";
import { CallbackConsent, ManualClock, MemoryAudit, MemoryStorage } from "mrtr-gate/hosts";
import { SHIPPED_SHA256, componentLoader, coreModuleName, coreModules } from "mrtr-gate/internal";
import { PARAMS, SERVER, formRound } from "./support.js";

const pkg = new URL("./", import.meta.resolve("mrtr-gate/package.json"));
const shippedUrl = new URL("component/mrtr-gate.wasm", pkg);
const SHIPPED = new Uint8Array(readFileSync(shippedUrl));
const DIGEST = createHash("sha256").update(SHIPPED).digest("hex");
const fresh = () => SHIPPED.slice();

const services = () => {
  const clock = new ManualClock();
  return { clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new MemoryAudit() };
};

/** Runs `f` with WebAssembly.compile counted: how many compiles it started. */
async function compiles(f) {
  const real = WebAssembly.compile;
  let n = 0;
  WebAssembly.compile = (...args) => { n += 1; return real.apply(WebAssembly, args); };
  try {
    await f();
  } finally {
    WebAssembly.compile = real;
  }
  return n;
}

async function roundRuns(gate) {
  await gate.register({ requestId: 1, server: SERVER, user: "alice", tenant: "acme", method: "tools/call", params: PARAMS });
  assert.equal((await gate.acceptResponse(SERVER, formRound(1))).kind, "input_required");
}

test("the package ships the component with its digest, and the glue was built from it", () => {
  assert.equal(SHIPPED_SHA256, DIGEST);
  assert.equal(readFileSync(new URL("component/mrtr-gate.wasm.sha256", pkg), "utf8"), `${DIGEST}  mrtr-gate.wasm\n`);
});

test("the shipped component loads, and pinned to its digest (either case) too", async () => {
  await roundRuns(await Gate.create(services()));
  await roundRuns(await Gate.create(services(), { expectedSha256: DIGEST }));
  await roundRuns(await Gate.create(services(), { expectedSha256: DIGEST.toUpperCase() }));
});

test("the component given as bytes, a buffer, a file URL or a Response loads when it is the shipped one", async () => {
  const shared = new Uint8Array(new SharedArrayBuffer(SHIPPED.length + 3), 3);
  shared.set(SHIPPED);
  const padded = new Uint8Array(SHIPPED.length + 5);
  padded.set(SHIPPED, 5);
  const inputs = [fresh(), fresh().buffer, new DataView(fresh().buffer), shared, padded.subarray(5), shippedUrl, shippedUrl.href, new Response(fresh())];
  for (const component of inputs) {
    await roundRuns(await Gate.create(services(), { component, expectedSha256: DIGEST }));
  }
});

test("a pin on another digest is refused before anything is compiled", async () => {
  const other = "0".repeat(64);
  let refused;
  const n = await compiles(async () => {
    refused = await Gate.create(services(), { component: fresh(), expectedSha256: other }).catch((e) => e);
  });
  assert.ok(refused instanceof UnexpectedComponent, String(refused));
  assert.ok(refused instanceof LoadError);
  assert.equal(refused.code, "unexpected_component");
  assert.equal(refused.whose, "pin");
  assert.equal(refused.expected, other);
  assert.equal(refused.actual, DIGEST);
  assert.equal(n, 0, "nothing compiled");
  // The shipped component, already loaded by other Gates, is held to the pin as well.
  await assert.rejects(Gate.create(services(), { expectedSha256: other }), (e) => e.code === "unexpected_component" && e.whose === "pin");
});

test("a component other than the one the glue was built from is refused, even pinned to its own digest", async () => {
  const changed = fresh();
  changed[changed.length - 1] ^= 1;
  const digest = createHash("sha256").update(changed).digest("hex");
  let refused;
  const n = await compiles(async () => {
    refused = await Gate.create(services(), { component: changed, expectedSha256: digest }).catch((e) => e);
  });
  assert.ok(refused instanceof UnexpectedComponent, String(refused));
  assert.equal(refused.whose, "shipped");
  assert.equal(refused.expected, DIGEST);
  assert.equal(refused.actual, digest);
  assert.equal(n, 0, "nothing compiled");
  await assert.rejects(Gate.create(services(), { component: changed }), (e) => e.code === "unexpected_component");
});

test("the bytes are copied before they are checked: changing them afterwards changes nothing", async () => {
  const bytes = fresh();
  const pending = Gate.create(services(), { component: bytes, expectedSha256: DIGEST });
  bytes.fill(0);
  await roundRuns(await pending);
});

test("a malformed pin is refused, whatever the component", async () => {
  const pins = ["", "abc", DIGEST.slice(1), `${DIGEST}0`, "g".repeat(64), ` ${DIGEST.slice(1)}`, `${DIGEST.slice(1)}\n`, 42, {}, ["a"]];
  for (const expectedSha256 of pins) {
    const n = await compiles(async () => {
      await assert.rejects(Gate.create(services(), { component: fresh(), expectedSha256 }),
        (e) => e instanceof LoadError && e.code === "invalid_argument", JSON.stringify(expectedSha256));
    });
    assert.equal(n, 0);
  }
});

test("a pin without WebCrypto is refused; without a pin the component loads unchecked", async () => {
  const had = Object.getOwnPropertyDescriptor(globalThis, "crypto");
  Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true, writable: true });
  try {
    await assert.rejects(Gate.create(services(), { component: fresh(), expectedSha256: DIGEST }),
      (e) => e instanceof LoadError && e.code === "digest_unavailable");
    await roundRuns(await Gate.create(services(), { component: fresh() }));
  } finally {
    Object.defineProperty(globalThis, "crypto", had);
  }
});

test("loadCoreModule cannot be pinned: refused with expectedSha256 or component, loads alone", async () => {
  const split = coreModules(fresh());
  const loadCoreModule = (file) => WebAssembly.compile(split[split.findIndex((_, i) => coreModuleName(i) === file)]);
  for (const extra of [{ expectedSha256: DIGEST }, { component: fresh() }]) {
    await assert.rejects(Gate.create(services(), { loadCoreModule, ...extra }), (e) => e instanceof LoadError && e.code === "invalid_argument");
  }
  await assert.rejects(Gate.create(services(), { loadCoreModule: "gen/" }), (e) => e.code === "invalid_argument");
  await roundRuns(await Gate.create(services(), { loadCoreModule }));
});

test("a component that cannot be read is component_unavailable", async () => {
  const cases = [
    new Response("no", { status: 404 }),
    new URL("component/no-such.wasm", pkg),
    "not a url",
  ];
  for (const component of cases) {
    await assert.rejects(Gate.create(services(), { component }), (e) => e instanceof LoadError && e.code === "component_unavailable", String(component));
  }
  for (const component of [42, { bytes: fresh() }, true]) {
    await assert.rejects(Gate.create(services(), { component }), (e) => e instanceof LoadError && e.code === "invalid_argument");
  }
});

test("the split core modules are byte for byte the ones jco writes (a jco that splits otherwise fails here)", () => {
  // gen/ beside the tests: the folder jco transpiled into (scripts/node copies its core
  // modules beside the tests it runs against an installed package, which ships none).
  const gen = new URL("../gen/", import.meta.url);
  const written = readdirSync(gen).filter((f) => /^gate\.core\d*\.wasm$/.test(f)).sort();
  const split = coreModules(fresh());
  assert.deepEqual(written, split.map((_, i) => coreModuleName(i)).sort());
  assert.equal(split.length, 3, "jco 1.11.2 writes three core modules for this component");
  split.forEach((m, i) => assert.ok(Buffer.from(m).equals(readFileSync(new URL(coreModuleName(i), gen))), coreModuleName(i)));
});

test("the glue asks only for core modules the component holds", async () => {
  const load = await componentLoader({ component: fresh() });
  await assert.rejects(load("gate.core4.wasm"), (e) => e.code === "malformed_component");
  assert.ok((await load("gate.core.wasm")) instanceof WebAssembly.Module);
});

const COMPONENT = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
const CORE = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const bytes = (...parts) => Uint8Array.from(parts.flat());
const malformed = (b) => assert.throws(() => coreModules(b), (e) => e instanceof LoadError && e.code === "malformed_component", `[${Array.from(b.slice(0, 24))}]`);

test("hostile component bytes are refused as malformed_component", () => {
  malformed(bytes());
  malformed(bytes(0x00, 0x61, 0x73));
  malformed(bytes(CORE, 0x01, 0x00)); // a core module, not a component
  malformed(bytes(0x00, 0x61, 0x73, 0x6e, 0x0d, 0x00, 0x01, 0x00)); // bad magic
  malformed(bytes(COMPONENT)); // no section at all
  malformed(bytes(COMPONENT, 0x00, 0x02, 0x01, 0x61)); // a custom section only: no core module
  malformed(bytes(COMPONENT, 0x01)); // a section id, no size
  malformed(bytes(COMPONENT, 0x01, 0x80)); // a size cut short
  malformed(bytes(COMPONENT, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00)); // a size longer than 5 bytes
  malformed(bytes(COMPONENT, 0x01, 0xff, 0xff, 0xff, 0xff, 0x1f)); // a size beyond 32 bits
  malformed(bytes(COMPONENT, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f)); // 2^32 - 1 bytes: past the end
  malformed(bytes(COMPONENT, 0x01, 0x09, CORE)); // a size one past the end
  malformed(bytes(COMPONENT, 0x01, 0x08, 0x00, 0x61, 0x73, 0x6d, 0x02, 0x00, 0x00, 0x00)); // not a core module header
  malformed(bytes(COMPONENT, 0x01, 0x04, 0x00, 0x61, 0x73, 0x6d)); // a core module shorter than its header
  malformed(bytes(COMPONENT, 0x01, 0x08, CORE, 0x07)); // a whole module, then a section cut short
  assert.throws(() => coreModules([0, 97, 115, 109]), (e) => e.code === "invalid_argument");
  // Well formed: each core module section, as a view of the bytes given.
  const two = coreModules(bytes(COMPONENT, 0x01, 0x08, CORE, 0x00, 0x01, 0x00, 0x01, 0x89, 0x00, CORE, 0x00));
  assert.deepEqual(two.map((m) => Array.from(m)), [CORE, [...CORE, 0x00]]);
  assert.equal(coreModules(bytes(COMPONENT, 0x01, 0x88, 0x80, 0x80, 0x80, 0x00, CORE)).length, 1, "a padded LEB128 size");
});

test("the shipped component cut anywhere, or with any byte flipped, is refused or split, never a crash", () => {
  let state = 0x2545f491;
  const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
  for (const cut of [0, 1, 7, 8, 9, 10, 11, 12, 13, SHIPPED.length - 1]) malformed(SHIPPED.subarray(0, cut));
  for (let i = 0; i < 700; i += 1) {
    // A random cut (one that lands between two sections is a shorter, well-formed component),
    // or a random byte of the headers changed.
    let b;
    if (i < 200) {
      b = SHIPPED.subarray(0, next() % SHIPPED.length);
    } else {
      b = fresh();
      b[next() % 64] = next() & 0xff;
    }
    try {
      for (const m of coreModules(b)) assert.ok(m.length >= 8 && m.byteOffset + m.length <= b.length);
    } catch (e) {
      assert.ok(e instanceof LoadError && e.code === "malformed_component", String(e));
    }
  }
});

test("the package holds the repository's LICENSE and has no run-time dependency", () => {
  assert.ok(readFileSync(new URL("LICENSE", pkg)).equals(readFileSync(new URL("../../../LICENSE", import.meta.url))));
  const manifest = JSON.parse(readFileSync(new URL("package.json", pkg), "utf8"));
  for (const field of ["dependencies", "optionalDependencies", "peerDependencies", "bundleDependencies", "bundledDependencies"]) {
    assert.equal(manifest[field], undefined, field);
  }
});

test("tests import the package the run is about: this folder, or the installed copy", () => {
  const resolved = import.meta.resolve("mrtr-gate");
  const installed = process.env.MRTR_GATE_INSTALLED_IN;
  if (installed) {
    // scripts/node --installed: the temp project's own node_modules, nothing of the repository.
    const inside = pathToFileURL(`${installed}/node_modules/mrtr-gate/`).href;
    assert.ok(resolved.startsWith(inside), `${resolved} is not under ${inside}`);
    const gen = new URL("gen/", pkg);
    assert.deepEqual(readdirSync(gen).filter((f) => f.endsWith(".wasm")), [], "no core module of jco's is shipped");
  } else {
    assert.equal(resolved, new URL("../src/index.js", import.meta.url).href);
  }
});
