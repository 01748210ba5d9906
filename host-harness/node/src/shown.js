// Server text as a screen shows it. Whatever a server writes (a message, a title, an option,
// a URL, an error, a line on its stderr) reaches a person only through `shownText` (or
// `shownJson` for a JSON value): a control character could move the cursor, clear or repaint
// the screen or hide a hyperlink (ANSI/OSC sequences), a bidi control could reorder the text
// around it, an invisible character could make two strings look alike. Each is written
// visibly as `\u{h}` (lowercase hex, at least four digits) instead, and a backslash as two,
// so the rendering is exact and cannot be faked. No dependencies: pages import it too.
//
// The same rules as the Rust host's `mrtr_gate_host::shown` and the Python package's
// `mrtr_gate.shown`; the three are held to one set of vectors, tests/screen/shown_text.json.

/** Inclusive code point ranges shown escaped (the reasons: tests/screen/shown_text.json). */
export const ESCAPED = Object.freeze([
  [0x0000, 0x001f], [0x007f, 0x009f], [0x00ad, 0x00ad], [0x034f, 0x034f],
  [0x0600, 0x0605], [0x061c, 0x061c], [0x06dd, 0x06dd], [0x070f, 0x070f],
  [0x0890, 0x0891], [0x08e2, 0x08e2], [0x115f, 0x1160], [0x17b4, 0x17b5],
  [0x180b, 0x180f], [0x200b, 0x200f], [0x2028, 0x202e], [0x2060, 0x206f],
  [0x3164, 0x3164], [0xd800, 0xdfff], [0xfe00, 0xfe0f], [0xfeff, 0xfeff],
  [0xffa0, 0xffa0], [0xfff0, 0xfffb], [0x110bd, 0x110bd], [0x110cd, 0x110cd],
  [0x13430, 0x1343f], [0x1bca0, 0x1bca3], [0x1d173, 0x1d17a], [0xe0000, 0xe0fff],
].map(Object.freeze));

const hex = (a) => (a > 0xffff ? `\\u{${a.toString(16)}}` : `\\u${a.toString(16).padStart(4, "0")}`);
// One character class over the ranges; `u` mode iterates code points, and a lone surrogate
// matches its own range.
const ANY = new RegExp(`[${ESCAPED.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("")}]`, "u");
const EVERY = new RegExp(ANY.source, "gu");
const EVERY_OR_BACKSLASH = new RegExp(`\\\\|${ANY.source}`, "gu");

const escape = (c) => (c === "\\" ? "\\\\" : `\\u{${c.codePointAt(0).toString(16).padStart(4, "0")}}`);

/** True when `c` (one code point) must not be shown as it is. */
export function hiddenOrControl(c) {
  return ANY.test(c);
}

/**
 * `text` as a screen shows it: a backslash as two, every escaped character as `\u{h}`, the
 * rest as it is. Newlines included: a server's text is one line on the screen.
 */
export function shownText(text) {
  return String(text).replace(EVERY_OR_BACKSLASH, escape);
}

/**
 * A JSON value as a screen shows it: `JSON.stringify` text with every escaped character JSON
 * leaves raw written as `\u{h}`. Backslashes are not doubled: in JSON text they only start
 * JSON's own escapes.
 */
export function shownJson(value) {
  return String(JSON.stringify(value)).replace(EVERY, escape);
}

/** Text of several lines: each line through `shownText`, the line breaks kept. */
export function shownLines(text) {
  return String(text).split("\n").map((l) => shownText(l.endsWith("\r") ? l.slice(0, -1) : l)).join("\n");
}
