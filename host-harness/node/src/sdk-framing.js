// What a server's HTTP answer to one request holds, read once by the adapter, and the answer the
// SDK gets instead: the one response the gate judged, re-framed by the adapter, and the requests
// and notifications that are not responses, each re-encoded from the adapter's own parse
// (docs/adapters.md).
//
// Readers of one stream disagree on which event is "the" response: the TypeScript SDK 2.4.0
// dispatches only events with no type or type `message` and routes each response by its id;
// mcp 2.3.0 (Python) takes the first `message` event that is a response whatever its id; a
// reader that ignores `event:` takes typed events too. So the SDK is never handed the server's
// stream: anything in it that one of those readers could take as a second or other response is
// refused (StreamRefused), and the stream the SDK reads is the adapter's, with nothing in it the
// gate did not judge. The same rules, with the same codes, as the Python package's
// mrtr_gate/sdk_framing.py.

/** The answer could be read as a response other than the one the gate would judge. */
export class StreamRefused extends Error {
  constructor(code, message) {
    super(message);
    this.name = "StreamRefused";
    this.code = code;
  }
}

/**
 * The [type, data] of every event in an SSE body, read as the HTML standard says (lines end in
 * CRLF, LF or CR; `:` starts a comment; one space after the colon is dropped; the last `event:`
 * wins; data lines are joined by LF), with one addition: an event the body ends in without its
 * blank line counts, since some reader may dispatch it.
 */
export function sseEvents(text) {
  if (text.startsWith("\ufeff")) text = text.slice(1);
  const events = [];
  let kind = "";
  let data = [];
  let pending = false;
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === "") {
      if (pending) events.push([kind, data.join("\n")]);
      kind = "";
      data = [];
      pending = false;
      continue;
    }
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") kind = value;
    else if (name === "data") {
      data.push(value);
      pending = true;
    }
  }
  if (pending) events.push([kind, data.join("\n")]);
  return events;
}

const parse = (text) => {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
};
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
// JSON ids compare by type too: 1, "1" and true are three ids.
const sameId = (a, b) => typeof a === typeof b && a === b;

// A request or notification as the adapter read it, written afresh: only the members a request
// or notification has, so no reader can find another message in it.
function canonical(m) {
  const out = { jsonrpc: "2.0" };
  if (has(m, "id")) out.id = m.id;
  out.method = m.method;
  if (has(m, "params")) out.params = m.params;
  return JSON.stringify(out);
}

// Why a message with a `method` cannot be passed on as a request or notification, or null.
function notPassable(m) {
  if (has(m, "result") || has(m, "error")) return "it has a method and a result or error at once";
  if (m.jsonrpc !== "2.0" || typeof m.method !== "string") return "it is not a JSON-RPC 2.0 request or notification";
  if (has(m, "id") && typeof m.id !== "string" && !Number.isInteger(m.id)) return "its id is neither a string nor an integer";
  if (has(m, "params") && !isObject(m.params)) return "its params are not an object";
  return null;
}

function eventAnswer(text, id) {
  const answer = { response: null, items: [], sse: true };
  for (const [kind, data] of sseEvents(text)) {
    if (kind !== "" && kind !== "message") {
      const p = parse(data);
      if (p.ok && p.value !== null && typeof p.value === "object") {
        throw new StreamRefused("typed_event", `an SSE event of type ${JSON.stringify(kind)} carries a JSON-RPC message`);
      }
      continue; // e.g. a heartbeat: no reader takes it as a message
    }
    if (data === "") continue; // a priming event: no message
    const p = parse(data);
    if (!p.ok) throw new StreamRefused("malformed_message", "an SSE event's data is not JSON");
    const m = p.value;
    if (Array.isArray(m)) throw new StreamRefused("batch_message", "an SSE event carries a JSON array (a batch)");
    if (!isObject(m)) throw new StreamRefused("malformed_message", "an SSE event's data is not a JSON-RPC message");
    if (has(m, "method")) {
      const why = notPassable(m);
      if (why) throw new StreamRefused("malformed_message", `an SSE event is not a JSON-RPC message the SDK can take: ${why}`);
      answer.items.push(canonical(m));
    } else if (!sameId(m.id, id)) {
      throw new StreamRefused("foreign_response", `the stream holds a response under id ${JSON.stringify(m.id ?? null)}, not the request's`);
    } else if (answer.response !== null) {
      throw new StreamRefused("duplicate_response", "the stream holds a second response to the request");
    } else {
      answer.response = data;
      answer.items.push(null);
    }
  }
  return answer;
}

function bodyAnswer(text, id) {
  if (text.trim() === "") return { response: null, items: [], sse: false };
  const p = parse(text);
  // Not JSON: the gate (or the caller) names what is wrong with it.
  if (!p.ok) return { response: text, items: [null], sse: false };
  const m = p.value;
  if (Array.isArray(m)) throw new StreamRefused("batch_message", "the body is a JSON array (a batch)");
  // A request or notification where the response belongs: no response.
  if (isObject(m) && has(m, "method")) return { response: null, items: [], sse: false };
  if (isObject(m) && !sameId(m.id, id)) {
    throw new StreamRefused("foreign_response", `the body is a response under id ${JSON.stringify(m.id ?? null)}, not the request's`);
  }
  return { response: text, items: [null], sse: false };
}

/**
 * What the server's answer to request `id` holds: `{ response, items, sse }`, `response` the
 * response's exact text (for the gate) or null, `items` the order of what the SDK will get (a
 * message's text, or null standing for the response). Throws StreamRefused if it could be read
 * as another response than the one it holds. A content type other than JSON or SSE holds no
 * message (neither SDK takes one from it).
 */
export function readAnswer(text, contentType, id) {
  const essence = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (essence === "text/event-stream") return eventAnswer(text, id);
  if (essence === "application/json") return bodyAnswer(text, id);
  return { response: null, items: [], sse: false };
}

/**
 * The content type and body the SDK gets: the judged response as one JSON body, or one SSE
 * event in its place among the passed messages (no `id:` or `retry:`, so no SDK resumes the
 * stream on a GET the adapter cannot judge).
 */
export function reframe(answer) {
  if (!answer.sse) return ["application/json", answer.response ?? ""];
  const out = answer.items.map((item) => {
    const text = item === null ? answer.response : item;
    return `event: message\n${text.split("\n").map((l) => `data: ${l}\n`).join("")}\n`;
  });
  return ["text/event-stream", out.join("")];
}
