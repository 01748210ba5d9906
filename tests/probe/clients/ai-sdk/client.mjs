// Vercel's MCP client (`@ai-sdk/mcp` 2.0.99, pinned by this folder's package-lock.json) as a
// client of `mrtr-gate probe` (docs/probe.md "Run it against your client"): `node client.mjs
// URL`, or with MCP_PROBE_TRANSPORT=stdio `node client.mjs SERVER_COMMAND_LINE` (spawned by the
// package's `Experimental_StdioMCPTransport` through `/bin/sh -c`). Node 22 (the package wants
// it): the one tests/conformance pins. It lists the endpoint's tools, calls each in order with
// `{}` by the client's `callTool` (which fulfils MRTR rounds itself: its round cap, its own
// refusals, its elicitation handler), goes on after a failed call (one JSON line per call on
// stdout), reads each URI of the context's `read_twice` twice, one read after the other (its
// `readResource`, which fulfils rounds the same way), answers each elicitation as
// MCP_CONFORMANCE_CONTEXT's `answers` say, and exits 0 once the calls are done.
//
// The handler sees no input key, so the answer is found by the elicitation's message
// (`answer_by_message`), or is the context's one answer when it has one. The context's
// `capabilities` are declared as given, else `{elicitation: {}}` (the package's documented
// form: it fulfils form elicitation only). Its `callTool` takes no MRTR fields, so `forge` is
// unsupported; it has no hook for a server's notification, so `cancel_on` is unsupported too.
import { createMCPClient, ElicitationRequestSchema } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

const target = process.argv[process.argv.length - 1];
const stdio = process.env.MCP_PROBE_TRANSPORT === "stdio";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
const answers = context.answers ?? {};
const decline = { action: "decline" };
const report = (line) => console.log(JSON.stringify(line));
const byMessage = (message) => {
  const key = context.answer_by_message?.[message] ?? (Object.keys(answers).length === 1 ? Object.keys(answers)[0] : undefined);
  return answers[key] ?? decline;
};
if (context.cancel_on) {
  console.log("mrtr-probe: unsupported: cancel");
  process.exit(0);
}
if (context.forge) console.log("mrtr-probe: unsupported: forge");

const transport = stdio
  ? new Experimental_StdioMCPTransport({ command: "/bin/sh", args: ["-c", `exec ${target}`], stderr: "inherit" })
  : { type: "http", url: target };
const client = await createMCPClient({
  transport,
  clientName: "mrtr-gate-probe-ai-sdk",
  capabilities: context.capabilities ?? { elicitation: {} },
});
client.onElicitationRequest(ElicitationRequestSchema, async (request) => {
  report({ handler: request.params.message });
  return byMessage(request.params.message);
});
try {
  for (const tool of (await client.listTools()).tools) {
    try {
      const result = await client.callTool({ name: tool.name, arguments: {} });
      report(result.isError ? { tool: tool.name, ok: false, error: "the tool's result is an error" } : { tool: tool.name, ok: true });
    } catch (e) {
      report({ tool: tool.name, ok: false, error: String(e?.message ?? e).slice(0, 300) });
    }
  }
  for (const uri of context.read_twice ?? []) {
    for (let n = 0; n < 2; n++) {
      try {
        const result = await client.readResource({ uri });
        report({ read: uri, ok: true, text: result?.contents?.[0]?.text });
      } catch (e) {
        report({ read: uri, ok: false, error: String(e?.message ?? e).slice(0, 300) });
      }
    }
  }
} finally {
  await client.close();
}
