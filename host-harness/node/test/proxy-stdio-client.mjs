// The official TypeScript SDK client (@modelcontextprotocol/client 2.4.0), unchanged and in its
// automatic MRTR mode, with the proxy as its stdio server (not a node --test file: the Rust test
// host-harness/cli/tests/proxy_sdk_clients.rs runs it). `node proxy-stdio-client.mjs CALLS --
// COMMAND [ARGS...]` spawns COMMAND (the `mrtr-gate proxy ... -- server` line) as a desktop
// client spawns a server entry, runs each call of CALLS (a JSON list of [tool, arguments]) in
// turn, answering every elicitation with its handler, and prints one JSON line per call:
// {tool, ok: true, text, elicited} or {tool, ok: false, code, message, data, elicited}.
// `-- URL` instead: a proxy serving streamable HTTP.
// `--legacy` first: the SDK's default handshake (2025-11-25 `initialize`), under which a server
// asks for input with its own elicitation/create requests instead of input_required rounds.
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const split = process.argv.indexOf("--");
const legacy = process.argv[2] === "--legacy";
const calls = JSON.parse(process.argv[legacy ? 3 : 2]);
const [command, ...args] = process.argv.slice(split + 1);
// What a user would type into each form field the peers ask for.
const FILLED = { full_name: "Ada Lovelace", seat: "window", email: "ada@example.com", answer: "yes" };
let elicited = [];

// 2.4.0 speaks the 2025 handshake unless told to negotiate (`server/discover` first, 2026-07-28
// when the server has it); MRTR rounds are 2026-07-28's. Round handling is left at its default:
// automatic.
const client = new Client({ name: "proxy-test-ts", version: "1" }, {
  capabilities: { elicitation: { form: {}, url: {} } },
  ...(legacy ? {} : { versionNegotiation: { mode: "auto" } }),
});
client.setRequestHandler("elicitation/create", async (request) => {
  const p = request.params;
  if (p.mode === "url") {
    elicited.push({ mode: "url", message: p.message, url: p.url });
    return { action: "accept" };
  }
  elicited.push({ mode: "form", message: p.message });
  const fields = Object.keys(p.requestedSchema?.properties ?? {});
  return { action: "accept", content: Object.fromEntries(fields.filter((k) => k in FILLED).map((k) => [k, FILLED[k]])) };
});
// stderr inherited: the proxy's lines for the operator land beside this script's own.
// A URL: the proxy serves streamable HTTP; else the command that runs it over stdio.
await client.connect(command.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, stderr: "inherit" }));
for (const [tool, toolArgs] of calls) {
  elicited = [];
  let out;
  try {
    const result = await client.callTool({ name: tool, arguments: toolArgs });
    const text = (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
    out = { tool, ok: true, text, is_error: Boolean(result.isError) };
  } catch (e) {
    if (!(e instanceof ProtocolError)) throw e;
    out = { tool, ok: false, code: e.code, message: e.message, data: e.data ?? null };
  }
  out.elicited = elicited;
  console.log(JSON.stringify(out));
}
await client.close();
