// Every corpus scenario through the JavaScript package on Node: the verdicts and codes the
// scenario expects and, line for line, the transcript (every call's whole outcome) and the
// audit trail the Rust component and native core recorded (`tests/corpus/transcripts/`,
// `trails/`): the host-differential check (docs/corpus.md).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, readdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { parse, run } from "./corpus-runner.js";

const corpus = process.env.MRTR_GATE_CORPUS ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../tests/corpus");
const files = (await readdir(corpus)).filter((f) => f.endsWith(".json")).sort();

test("the corpus is all there", () => {
  assert.ok(files.length >= 75, `${files.length} scenarios`);
});

for (const file of files) {
  test(file, async () => {
    const scenario = parse(await readFile(path.join(corpus, file), "utf8"));
    const { failure, lines, transcript } = await run(scenario);
    if (failure) assert.fail(`${file}: ${failure.message}`);
    for (const [kind, got] of [["transcripts", transcript], ["trails", lines]]) {
      const want = await readFile(path.join(corpus, kind, file.replace(/\.json$/, ".jsonl")), "utf8");
      const text = got.map((l) => l + "\n").join("");
      if (text !== want) {
        const a = want.split("\n");
        const b = text.split("\n");
        const at = a.findIndex((l, i) => l !== b[i]);
        assert.fail(`${file}: the ${kind.slice(0, -1)} differs from the recorded one at line ${at + 1}`);
      }
    }
  });
}
