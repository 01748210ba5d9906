// The TypeScript types (src/*.d.ts, resolved through "mrtr-gate") compile, strictly, against a
// client's use of the API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

test("the TypeScript types describe the API as a client uses it", () => {
  // The TypeScript of the project the tests run in (this folder's, or the temp project of
  // `scripts/node --installed`, where "mrtr-gate" is the installed package).
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  try {
    execFileSync(process.execPath, [tsc, "--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext",
      "--target", "es2022", "--lib", "es2022,dom", "--skipLibCheck", "false", "test/types-check.ts"], { cwd: root, stdio: "pipe" });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
});
