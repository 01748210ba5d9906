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
// jco's glue falls back, when no getCoreModule is passed, to reading or fetching core modules
// from files beside it, through `import("node:fs/promises")`. The package always passes one
// (the modules it took out of the component it checked) and ships no such files; so the
// fallback goes: no bundle then sees `node:` (webpack 5 refuses it for the web, Vite warns),
// and nothing unchecked can ever be compiled. A jco whose glue differs fails the build here.
const glue = path.join(out, "gate.js");
let text = readFileSync(glue, "utf8");
const fallback = [
  [/\n  const isNode = typeof process !== 'undefined' && process\.versions && process\.versions\.node;\n  let _fs;\n  async function fetchCompile \(url\) \{\n(?:    .*\n)+?  \}\n/g, "\n"],
  [/\n  if \(!getCoreModule\) getCoreModule = \(name\) => fetchCompile\(new URL\(`\.\/\$\{name\}`, import\.meta\.url\)\);\n/g,
    "\n  if (!getCoreModule) throw new TypeError(\"mrtr-gate: the core modules come from the checked component (getCoreModule)\");\n"],
];
for (const [pattern, replacement] of fallback) {
  const found = text.match(pattern)?.length ?? 0;
  if (found !== 1) {
    console.error(`build.mjs: jco's glue does not have the expected core-module fallback (${pattern} found ${found} times)`);
    process.exit(1);
  }
  text = text.replace(pattern, replacement);
}
if (/node:|import\(/.test(text)) {
  console.error("build.mjs: jco's glue still imports something (node: or a dynamic import)");
  process.exit(1);
}
writeFileSync(glue, text);
writeFileSync(path.join(out, "component-digest.js"),
  `// Written by build.mjs: the SHA-256 of the component (component/mrtr-gate.wasm) this glue was made from.\nexport const COMPONENT_SHA256 = "${digest}";\n`);
writeFileSync(path.join(out, "component-digest.d.ts"), "export declare const COMPONENT_SHA256: string;\n");
const shipped = path.join(here, "component");
rmSync(shipped, { recursive: true, force: true });
mkdirSync(shipped);
writeFileSync(path.join(shipped, "mrtr-gate.wasm"), bytes);
// sha256sum's format, so `sha256sum -c` checks it from inside component/.
writeFileSync(path.join(shipped, "mrtr-gate.wasm.sha256"), `${digest}  mrtr-gate.wasm\n`);
