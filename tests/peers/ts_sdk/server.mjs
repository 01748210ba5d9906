// An MCP server written with the official TypeScript SDK (@modelcontextprotocol/server 2.4.0),
// for the gate's tests: a second SDK's encoding of the same rounds as ../python_sdk/server.py.
// Over stdio (`node server.mjs`) or streamable HTTP (`node server.mjs http PORT`, the SDK's
// web-standard handler behind node:http, POST /mcp on 127.0.0.1; port 0 picks one; the first
// line on stdout says where it listens). Tools: `book_flight` (a form), `pay` (a URL elicitation),
// `continue_job` (a state-only round), `numbers` (a state-only round, then what the tool received
// of `values` on the call and on its retry: see `received`).
import { createServer } from "node:http";
import { Transform } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { McpServer, createMcpHandler, fromJsonSchema, inputRequired } from "@modelcontextprotocol/server";
import { serveStdio, StdioServerTransport } from "@modelcontextprotocol/server/stdio";

// Every request the server read, as the text it read, under its JSON-RPC id (the last one under
// an id: the tests send each request after the answer to the one before). JavaScript reads
// every JSON number as a double, so the value a tool gets cannot tell `1e2` from `100`, `1.0`
// from `1`, or a 22-digit integer or a 30-digit decimal from the double nearest to it: what the
// `numbers` tool shows of the digits the client wrote is read from here, the text the SDK
// parsed the request from.
const requests = new Map();
function read(text) {
  let message;
  try {
    message = JSON.parse(text);
  } catch {
    return;
  }
  if (message && typeof message === "object" && "id" in message) requests.set(JSON.stringify(message.id), text);
}

// A JSON text parsed with each number as the string of its digits, as written (a number token
// is only ever outside a string, and strings are kept whole).
const withNumbersAsWritten = (text) =>
  JSON.parse(text.replace(/"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g, (token, number) => (number === undefined ? token : JSON.stringify(number))));

// For each of `values`, what the tool got (its type and its value as a string, `-0` told from
// `0`) and the number as it was written in the request the server read.
function received(values, id) {
  const text = requests.get(JSON.stringify(id));
  const written = text === undefined ? {} : withNumbersAsWritten(text).params.arguments.values;
  return Object.fromEntries(Object.keys(values).sort().map((k) => {
    const v = values[k];
    return [k, [typeof v, Object.is(v, -0) ? "-0" : String(v), written[k] ?? null]];
  }));
}

function makeServer() {
const server = new McpServer({ name: "mrtr-gate-ts-peer", version: "1.0.0" }, { capabilities: { tools: {} } });
const text = (t) => ({ content: [{ type: "text", text: t }] });

server.registerTool("book_flight", {
  inputSchema: fromJsonSchema({ type: "object", properties: { origin: { type: "string" }, destination: { type: "string" } }, required: ["origin", "destination"] }),
}, async ({ origin, destination }, ctx) => {
  const responses = ctx.mcpReq.inputResponses;
  if (!responses) {
    return inputRequired({
      inputRequests: {
        passenger: inputRequired.elicit({
          message: "Who is flying?",
          requestedSchema: { type: "object", properties: {
            full_name: { type: "string", title: "Full name", minLength: 1, maxLength: 100 },
            seat: { type: "string", title: "Seat", enum: ["aisle", "window"] },
          }, required: ["full_name", "seat"] },
        }),
      },
      requestState: `${origin}-${destination}`,
    });
  }
  return text(`booked ${ctx.mcpReq.requestState()}: ${JSON.stringify(responses)}`);
});

server.registerTool("pay", { inputSchema: fromJsonSchema({ type: "object", properties: { amount: { type: "integer" } } }) }, async ({ amount }, ctx) => {
  if (!ctx.mcpReq.inputResponses) {
    return inputRequired({ inputRequests: { pay: inputRequired.elicitUrl({ message: "Authorise the payment", url: "https://pay.example.com/authorize?session=SECRET-SESSION" }) } });
  }
  return text(`paid ${amount}: ${JSON.stringify(ctx.mcpReq.inputResponses)}`);
});

server.registerTool("continue_job", { inputSchema: fromJsonSchema({ type: "object", properties: {} }) }, async (_args, ctx) => {
  if (ctx.mcpReq.requestState() === undefined) return inputRequired({ requestState: "step-1" });
  return text(`job done after ${ctx.mcpReq.requestState()}`);
});

server.registerTool("numbers", { inputSchema: fromJsonSchema({ type: "object", properties: { values: { type: "object" } }, required: ["values"] }) }, async ({ values }, ctx) => {
  const report = received(values, ctx.mcpReq.id);
  const state = ctx.mcpReq.requestState();
  if (state === undefined) return inputRequired({ requestState: Buffer.from(JSON.stringify(report)).toString("base64url") });
  return text(JSON.stringify({ call: JSON.parse(Buffer.from(state, "base64url").toString()), retry: report }));
});

return server;
}

if (process.argv[2] === "http") {
  // The SDK's handler speaks web-standard Request/Response; node:http only carries them.
  const handler = createMcpHandler(makeServer);
  const http = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    read(Buffer.concat(chunks).toString("utf8"));
    const request = new Request(`http://127.0.0.1:${http.address().port}${req.url}`, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
      body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  // Listening before the ready line, so a test that reads it connects at once (see
  // ../python_sdk/http_serving.py: no port picked and freed first, no polling).
  http.listen(Number(process.argv[3]), "127.0.0.1", () => {
    process.stdout.write(`listening on http://127.0.0.1:${http.address().port}/mcp\n`);
  });
} else {
  // serveStdio owns the era decision: the opening message selects 2026-07-28 (per-request
  // `_meta`) or 2025 (initialize) for the connection. Its transport is the SDK's own over stdin
  // and stdout; stdin passes through a tap that reads each line first (for `numbers`).
  const decoder = new StringDecoder("utf8");
  let partial = "";
  const tap = new Transform({
    transform(chunk, _encoding, done) {
      const lines = (partial + decoder.write(chunk)).split("\n");
      partial = lines.pop();
      lines.forEach(read);
      done(null, chunk);
    },
  });
  serveStdio(makeServer, { transport: new StdioServerTransport(process.stdin.pipe(tap), process.stdout) });
}
