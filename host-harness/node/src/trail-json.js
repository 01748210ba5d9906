// A trail line parsed as the Rust core parses it (serde_json with `arbitrary_precision`), so
// that no line verifies in one host and breaks in another (tests/audit/trail_vectors.json).
// JSON.parse differs where a hand-made line can make it matter: it reads `1.0`, `1e0` and `-0`
// as the integers 1 and 0 and an integer past 2^53 as another one, keeps a lone surrogate, and
// nests without limit. Here a number spelled as a non-negative integer of at most 20 digits
// (u64's width) is a bigint, every other number a `NotU64` (never a `seq`, and never converted:
// a line of a million digits costs no quadratic parse), a lone surrogate or nesting deeper than
// serde_json's 127 levels refuses the line, and so does anything RFC 8259 does not allow.

/** A JSON number that is no u64 (a fraction, an exponent, a sign, more than 20 digits): kept as its text. */
export class NotU64 {
  constructor(text) {
    this.text = text;
  }
}

/** serde_json's recursion limit: this many arrays and objects nested, and no more. */
const MAX_DEPTH = 127;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const UNSIGNED = /^(?:0|[1-9][0-9]*)$/;
const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

class Refused extends Error {}

/** `text` parsed, or null when serde_json refuses it. Objects have no prototype. */
export function parseTrailJson(text) {
  if (typeof text !== "string") return null;
  try {
    const p = { text, at: 0 };
    const value = parseValue(p, 0);
    skipSpace(p);
    if (p.at !== text.length) throw new Refused();
    return value;
  } catch (e) {
    if (e instanceof Refused) return null;
    throw e;
  }
}

function skipSpace(p) {
  const t = p.text;
  while (p.at < t.length) {
    const c = t.charCodeAt(p.at);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
    p.at += 1;
  }
}

function parseValue(p, depth) {
  skipSpace(p);
  const t = p.text;
  const c = t[p.at];
  if (c === "{" || c === "[") {
    if (depth >= MAX_DEPTH) throw new Refused();
    return c === "{" ? parseObject(p, depth + 1) : parseArray(p, depth + 1);
  }
  if (c === '"') return parseString(p);
  for (const [word, value] of [["true", true], ["false", false], ["null", null]]) {
    if (t.startsWith(word, p.at)) {
      p.at += word.length;
      return value;
    }
  }
  NUMBER.lastIndex = p.at;
  const m = NUMBER.exec(t);
  if (m === null) throw new Refused();
  p.at += m[0].length;
  return UNSIGNED.test(m[0]) && m[0].length <= 20 ? BigInt(m[0]) : new NotU64(m[0]);
}

function parseObject(p, depth) {
  const out = Object.create(null);
  p.at += 1;
  skipSpace(p);
  if (p.text[p.at] === "}") {
    p.at += 1;
    return out;
  }
  for (;;) {
    skipSpace(p);
    if (p.text[p.at] !== '"') throw new Refused();
    const key = parseString(p);
    skipSpace(p);
    if (p.text[p.at] !== ":") throw new Refused();
    p.at += 1;
    // A key given twice: the last value counts, as in serde_json's map.
    out[key] = parseValue(p, depth);
    skipSpace(p);
    const c = p.text[p.at];
    p.at += 1;
    if (c === "}") return out;
    if (c !== ",") throw new Refused();
  }
}

function parseArray(p, depth) {
  const out = [];
  p.at += 1;
  skipSpace(p);
  if (p.text[p.at] === "]") {
    p.at += 1;
    return out;
  }
  for (;;) {
    out.push(parseValue(p, depth));
    skipSpace(p);
    const c = p.text[p.at];
    p.at += 1;
    if (c === "]") return out;
    if (c !== ",") throw new Refused();
  }
}

function parseString(p) {
  const t = p.text;
  let out = "";
  p.at += 1;
  for (;;) {
    if (p.at >= t.length) throw new Refused();
    const c = t.charCodeAt(p.at);
    if (c === 0x22) {
      p.at += 1;
      // A lone surrogate, escaped or not: no Rust string holds one.
      if (!out.isWellFormed()) throw new Refused();
      return out;
    }
    if (c < 0x20) throw new Refused();
    if (c !== 0x5c) {
      let end = p.at + 1;
      while (end < t.length) {
        const d = t.charCodeAt(end);
        if (d === 0x22 || d === 0x5c || d < 0x20) break;
        end += 1;
      }
      out += t.slice(p.at, end);
      p.at = end;
      continue;
    }
    const e = t[p.at + 1];
    if (e === "u") {
      const hex = t.slice(p.at + 2, p.at + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new Refused();
      out += String.fromCharCode(Number.parseInt(hex, 16));
      p.at += 6;
    } else if (e !== undefined && Object.hasOwn(ESCAPES, e)) {
      out += ESCAPES[e];
      p.at += 2;
    } else {
      throw new Refused();
    }
  }
}
