// The official TypeScript SDK client (@modelcontextprotocol/client 2.4.0), unmodified and in its
// automatic MRTR mode, pointed at `mrtr-gate proxy` in front of the conformance suite's server:
// `node proxied-client.mjs MRTR_GATE_BIN URL`. The runner sets MCP_CONFORMANCE_SCENARIO and
// appends the scenario server's URL; this script starts the proxy on a free loopback port with
// that URL as its upstream (a trail in a temporary folder, the host key in XDG_CONFIG_HOME as
// scripts/conformance sets it), connects the client to the proxy, and runs the scenario as
// ts-client.mjs does. The elicitation handler answers the suite's one form (confirmed: true).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const [bin, upstream] = process.argv.slice(-2);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const dir = mkdtempSync(join(tmpdir(), "mrtr-gate-conformance-proxy-"));
const proxy = spawn(bin, ["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream,
  "--user", "conformance", "--audit", join(dir, "audit.jsonl")], { stdio: ["ignore", "inherit", "pipe"] });
// The proxy names its address on stderr once it listens; everything it says is passed on.
const url = await new Promise((resolve, reject) => {
  const lines = createInterface({ input: proxy.stderr });
  lines.on("line", (line) => {
    console.error(line);
    const m = /listening on (http:\/\/\S+?),/.exec(line);
    if (m) resolve(m[1]);
  });
  proxy.on("exit", (code) => reject(new Error(`the proxy exited (${code}) before it listened`)));
});

let during = async () => {};
const client = new Client({ name: "mrtr-gate-proxied-ts-sdk", version: "0.6.0" }, {
  capabilities: { elicitation: { form: {}, url: {} } },
  versionNegotiation: { mode: "auto" },
});
client.setRequestHandler("elicitation/create", async (request) => {
  await during();
  during = async () => {};
  return request.params.mode === "url" ? { action: "decline" } : { action: "accept", content: { confirmed: true } };
});
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  if (scenario === "sep-2322-client-request-state") {
    await client.listTools();
    // An unrelated call while the first call's round is open, before its retry goes out.
    during = () => client.callTool({ name: "test_mrtr_unrelated", arguments: {} });
    await client.callTool({ name: "test_mrtr_echo_state", arguments: {} });
    await client.callTool({ name: "test_mrtr_no_state", arguments: {} });
    // SDK 2.4.0 refuses a result without resultType itself (nothing is retried either way).
    try {
      await client.callTool({ name: "test_mrtr_no_result_type", arguments: {} });
    } catch (e) {
      if (!String(e?.message).includes("missing required resultType")) throw e;
      console.error(`the SDK refused the result without resultType: ${e.message}`);
    }
  } else if (scenario === "tools_call") {
    const { tools } = await client.listTools();
    if (tools[0]) await client.callTool({ name: tools[0].name, arguments: { a: 2, b: 3 } });
  } else if (scenario === "request-metadata") {
    await client.listTools();
  } else if (scenario === "http-standard-headers") {
    for (const t of (await client.listTools()).tools) await client.callTool({ name: t.name, arguments: {} });
    for (const r of (await client.listResources()).resources) await client.readResource({ uri: r.uri });
    for (const p of (await client.listPrompts()).prompts) await client.getPrompt({ name: p.name, arguments: {} });
  } else {
    console.error(`no handler for scenario ${JSON.stringify(scenario)}`);
    process.exitCode = 2;
  }
  await client.close();
} finally {
  proxy.kill("SIGTERM");
  await new Promise((resolve) => proxy.exitCode !== null ? resolve() : proxy.on("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
}
