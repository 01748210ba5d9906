// Transpiles the mrtr:gate component into `gen/` (JavaScript glue and core modules) with the
// jco pinned in package-lock.json. Run by the project's scripts/node; `gen/` is not committed.
//
// Usage: node build.mjs <component.wasm>
//
// Why jco 1.11.2: from 1.16 on, jco's glue runs every import call through its async-task
// machinery, and 1.13 to 1.15 read `process.env` on every call; a form round costs about
// twice as much through either (docs/performance.md, "Node host").
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const component = process.argv[2];
if (!component || !existsSync(component)) {
  console.error("usage: node build.mjs <component.wasm>");
  process.exit(2);
}
const out = path.join(here, "gen");
rmSync(out, { recursive: true, force: true });
const jco = path.join(here, "node_modules", "@bytecodealliance", "jco", "src", "jco.js");
execFileSync(process.execPath, [jco, "transpile", component, "-o", out, "--name", "gate",
  "--instantiation", "async", "--no-wasi-shim", "--quiet"], { stdio: "inherit" });
