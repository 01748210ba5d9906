// Builds the package's generated parts from the mrtr:gate component, with the jco pinned in
// package-lock.json: `gen/` (jco's JavaScript glue and types; its core modules too, which the
// tests hold the loader's split to, but which the package does not ship), `component/` (the
// component itself and its `.sha256`, what the package ships and a host pins) and
// gen/component-digest.js (the digest the glue was made from, which the loader checks).
// Run by the project's scripts/node; `gen/` and `component/` are not committed.
//
// Usage: node build.mjs <component.wasm>
//
// Why jco 1.11.2: from 1.16 on, jco's glue runs every import call through its async-task
// machinery, and 1.13 to 1.15 read `process.env` on every call; a form round costs about
// twice as much through either (docs/performance.md, "Node host").
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const component = process.argv[2];
if (!component || !existsSync(component)) {
  console.error("usage: node build.mjs <component.wasm>");
  process.exit(2);
}
const bytes = readFileSync(component);
const digest = createHash("sha256").update(bytes).digest("hex");
const out = path.join(here, "gen");
rmSync(out, { recursive: true, force: true });
const jco = path.join(here, "node_modules", "@bytecodealliance", "jco", "src", "jco.js");
execFileSync(process.execPath, [jco, "transpile", component, "-o", out, "--name", "gate",
  "--instantiation", "async", "--no-wasi-shim", "--quiet"], { stdio: "inherit" });
writeFileSync(path.join(out, "component-digest.js"),
  `// Written by build.mjs: the SHA-256 of the component (component/mrtr-gate.wasm) this glue was made from.\nexport const COMPONENT_SHA256 = "${digest}";\n`);
writeFileSync(path.join(out, "component-digest.d.ts"), "export declare const COMPONENT_SHA256: string;\n");
const shipped = path.join(here, "component");
rmSync(shipped, { recursive: true, force: true });
mkdirSync(shipped);
writeFileSync(path.join(shipped, "mrtr-gate.wasm"), bytes);
// sha256sum's format, so `sha256sum -c` checks it from inside component/.
writeFileSync(path.join(shipped, "mrtr-gate.wasm.sha256"), `${digest}  mrtr-gate.wasm\n`);
