// The JavaScript package's `shownText` against the vectors the Rust and Python ones are held
// to (tests/screen/shown_text.json): every code point, every case, and random hostile strings.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { ESCAPED, hiddenOrControl, shownJson, shownLines, shownText } from "mrtr-gate/shown";
import * as fromIndex from "mrtr-gate";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/screen/shown_text.json", import.meta.url), "utf8"));
const ranges = vectors.escaped.map(([a, b]) => [parseInt(a, 16), parseInt(b, 16)]);
const listed = (c) => ranges.some(([a, b]) => a <= c && c <= b);

test("the table is the shared one, and every code point follows it", () => {
  const key = (r) => r.map(([a, b]) => `${a}-${b}`).sort();
  assert.deepEqual(key(ESCAPED), key(ranges));
  for (let c = 0; c <= 0x10ffff; c++) {
    const shown = shownText(String.fromCodePoint(c));
    if (listed(c)) assert.equal(shown, `\\u{${c.toString(16).padStart(4, "0")}}`, c.toString(16));
    else if (c !== 0x5c) assert.equal(shown, String.fromCodePoint(c), c.toString(16));
  }
});

test("each shared case", () => {
  assert.ok(vectors.cases.length > 10);
  for (const c of vectors.cases) assert.equal(shownText(c.text), c.shown, c.name);
});

function unshown(s) {
  return s.replace(/\\\\|\\u\{([0-9a-f]+)\}/g, (m, h) => (m === "\\\\" ? "\\" : String.fromCodePoint(parseInt(h, 16))));
}

test("hostile strings never reach the screen raw and read back exactly", () => {
  const alphabet = ranges.flatMap(([a, b]) => [a, b, Math.max(a - 1, 0), b + 1, Math.floor((a + b) / 2)]).map((c) => String.fromCodePoint(c));
  alphabet.push(..."\\u{}ab 名😀\x1b[");
  let seed = 23;
  const next = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const bad = (s, keepNewline = false) => [...s].some((c) => !(keepNewline && c === "\n") && hiddenOrControl(c));
  for (let i = 0; i < 20000; i++) {
    let text = "";
    for (let n = next(24); n > 0; n--) text += alphabet[next(alphabet.length)];
    const shown = shownText(text);
    assert.ok(!bad(shown), JSON.stringify(text));
    assert.equal(unshown(shown), text);
    assert.ok(!bad(shownLines(text), true));
    assert.ok(!bad(shownJson({ k: [text] })));
  }
});

test("lone surrogates are shown escaped, and JSON keeps its own escapes", () => {
  assert.equal(shownText("a\ud800b\udfff"), "a\\u{d800}b\\u{dfff}");
  assert.equal(shownJson({ "a\u202e": ["x\ny", "\u009b2J", "\\"] }), '{"a\\u{202e}":["x\\ny","\\u{009b}2J","\\\\"]}');
  assert.equal(fromIndex.shownText, shownText, "exported by the package's main module too");
});
