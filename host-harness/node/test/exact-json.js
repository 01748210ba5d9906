// JSON read and written exactly, for the corpus runner: numbers keep the text they were
// written with (`2` is not `2.0`, `9007199254740993` stays that integer), and `dumps` writes
// compact JSON as serde_json (without `preserve_order`) does: object keys in byte order, only
// `"`, `\` and control characters escaped. So every host sends the gate the same bytes.

export class Num {
  constructor(text) {
    this.text = text;
  }
  asU64() {
    return /^[0-9]+$/.test(this.text) && BigInt(this.text) < 1n << 64n ? BigInt(this.text) : null;
  }
  asI64() {
    if (!/^-?[0-9]+$/.test(this.text)) return null;
    const v = BigInt(this.text);
    return v >= -(1n << 63n) && v < 1n << 63n ? v : null;
  }
}

export function parse(text) {
  let i = 0;
  const fail = (why) => {
    throw new SyntaxError(`${why} at ${i}`);
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const o = Object.create(null);
      ws();
      if (text[i] === "}") {
        i++;
        return o;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a key");
        const k = string();
        ws();
        if (text[i++] !== ":") fail("expected :");
        o[k] = value();
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i++] === "}") return o;
        fail("expected , or }");
      }
    }
    if (c === "[") {
      i++;
      const a = [];
      ws();
      if (text[i] === "]") {
        i++;
        return a;
      }
      for (;;) {
        a.push(value());
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i++] === "]") return a;
        fail("expected , or ]");
      }
    }
    if (c === '"') return string();
    if (text.startsWith("true", i)) return (i += 4), true;
    if (text.startsWith("false", i)) return (i += 5), false;
    if (text.startsWith("null", i)) return (i += 4), null;
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 4096));
    if (!m || m[0] === "") fail("unexpected character");
    i += m[0].length;
    return new Num(m[0]);
  };
  const string = () => {
    // JSON's string grammar is JavaScript's: let JSON.parse decode the escapes.
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    if (text[i] !== '"') fail("unterminated string");
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing characters");
  return v;
}

const ESC = { '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

export function string(s) {
  let out = '"';
  for (const ch of s) {
    const e = ESC[ch];
    if (e) out += e;
    else if (ch < " ") out += "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

const utf8 = new TextEncoder();

function byteOrder(a, b) {
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/** UTF-16 code-unit order (RFC 8785). */
const utf16Order = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

function write(v, order) {
  if (v === null || v === undefined) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (v instanceof Num) return v.text;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (typeof v === "string") return string(v);
  if (Array.isArray(v)) return "[" + v.map((x) => write(x, order)).join(",") + "]";
  const keys = Object.keys(v).sort(order);
  return "{" + keys.map((k) => string(k) + ":" + write(v[k], order)).join(",") + "}";
}

export const dumps = (v) => write(v, byteOrder);
/** RFC 8785 key order over the value as parsed; numbers as written. */
export const canonical = (v) => write(v, utf16Order);

export function equal(a, b) {
  if (a instanceof Num || b instanceof Num) return a instanceof Num && b instanceof Num && a.text === b.text;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
}

/** RFC 6901: [found, value]. */
export function pointer(doc, ptr) {
  if (ptr === "") return [true, doc];
  if (!ptr.startsWith("/")) return [false, undefined];
  let cur = doc;
  for (const raw of ptr.slice(1).split("/")) {
    const t = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(t) || Number(t) >= cur.length) return [false, undefined];
      cur = cur[Number(t)];
    } else if (cur !== null && typeof cur === "object" && !(cur instanceof Num)) {
      if (!Object.hasOwn(cur, t)) return [false, undefined];
      cur = cur[t];
    } else return [false, undefined];
  }
  return [true, cur];
}
