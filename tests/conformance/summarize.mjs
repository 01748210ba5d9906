// Reads the checks.json the conformance runner wrote for each (client, scenario) under the
// directory given, prints every check, and a cargo-style `test result:` line the test command's
// summary counts. A check passes only as SUCCESS; FAILURE and WARNING fail; SKIPPED and INFO
// are listed and not counted. Exits non-zero when any check failed or a run left no checks.
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

const root = process.argv[2];
let passed = 0;
let failed = 0;
for (const client of readdirSync(root).sort()) {
  for (const scenario of readdirSync(join(root, client)).filter((s) => !s.endsWith(".log")).sort()) {
    const dirs = readdirSync(join(root, client, scenario)).sort();
    const file = dirs.length ? join(root, client, scenario, dirs[dirs.length - 1], "checks.json") : null;
    if (!file || !existsSync(file)) {
      console.log(`not ok - ${client} ${scenario}: the runner wrote no checks`);
      failed += 1;
      continue;
    }
    for (const c of JSON.parse(readFileSync(file, "utf8"))) {
      const line = `${client} ${scenario} ${c.id} ${c.name}: ${c.status}${c.errorMessage ? ` (${c.errorMessage})` : ""}`;
      if (c.status === "SUCCESS") {
        passed += 1;
        console.log(`ok - ${line}`);
      } else if (c.status === "FAILURE" || c.status === "WARNING") {
        failed += 1;
        console.log(`not ok - ${line}`);
      } else {
        console.log(`-- ${line}`);
      }
    }
  }
}
console.log(`test result: ${failed ? "FAILED" : "ok"}. ${passed} passed; ${failed} failed; (conformance checks)`);
process.exit(failed ? 1 : 0);
