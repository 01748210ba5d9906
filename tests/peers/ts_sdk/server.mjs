// An MCP server written with the official TypeScript SDK (@modelcontextprotocol/server 2.4.0),
// for the gate's tests: a second SDK's encoding of the same rounds as ../python_sdk/server.py.
// Over stdio (`node server.mjs`) or streamable HTTP (`node server.mjs http PORT`, the SDK's
// web-standard handler behind node:http, POST /mcp on 127.0.0.1; port 0 picks one; the first
// line on stdout says where it listens). Tools: `book_flight` (a form), `pay` (a URL elicitation),
// `continue_job` (a state-only round).
import { createServer } from "node:http";
import { McpServer, createMcpHandler, fromJsonSchema, inputRequired } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

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

return server;
}

if (process.argv[2] === "http") {
  // The SDK's handler speaks web-standard Request/Response; node:http only carries them.
  const handler = createMcpHandler(makeServer);
  const http = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
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
  // `_meta`) or 2025 (initialize) for the connection.
  serveStdio(makeServer);
}
