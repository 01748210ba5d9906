// The gated TypeScript SDK client as the conformance suite's client: the official SDK client
// (@modelcontextprotocol/client 2.4.0, manual mode) with every round driven through the gate by
// the JavaScript package's adapter (host-harness/node/src/sdk-client.js). The runner sets
// MCP_CONFORMANCE_SCENARIO and appends the scenario server's URL. The "user" here consents to
// the suite's one form (confirm: true) in advance.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Gate } from "../../host-harness/node/src/index.js";
import { CallbackConsent, MemoryAudit, MemoryStorage, SystemClock } from "../../host-harness/node/src/hosts.js";
import { GatedSdkClient } from "../../host-harness/node/src/sdk-client.js";

const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const clock = new SystemClock();
const gate = await Gate.create({ clock, storage: new MemoryStorage(clock), consent: new CallbackConsent(() => true), audit: new MemoryAudit() });
const confirm = (view) => Object.fromEntries(view.inputs.map((i) => [i.key, i.kind === "form" ? { action: "accept", content: { confirmed: true } } : { action: "decline" }]));
let during = async () => {};
const gated = new GatedSdkClient({
  gate, url, user: "conformance", tenant: "default",
  answer: async (view) => { await during(); during = async () => {}; return confirm(view); },
});
const client = new Client({ name: "mrtr-gate-ts-sdk", version: "0.3.0" },
  GatedSdkClient.clientOptions({ capabilities: { elicitation: { form: {}, url: {} } } }));
await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: gated.fetch }));
gated.attach(client);

if (scenario === "sep-2322-client-request-state") {
  await client.listTools();
  // An unrelated call while the first call's round is open, before its retry goes out.
  during = () => gated.callTool({ name: "test_mrtr_unrelated", arguments: {} });
  await gated.callTool({ name: "test_mrtr_echo_state", arguments: {} });
  await gated.callTool({ name: "test_mrtr_no_state", arguments: {} });
  // The gate takes a result without resultType as complete and never retries it; the SDK 2.4.0
  // goes further and refuses the result itself (SdkError InvalidResult). Either way nothing is
  // retried, which is what the check asks; the app sees the SDK's refusal.
  try {
    await gated.callTool({ name: "test_mrtr_no_result_type", arguments: {} });
  } catch (e) {
    if (!String(e?.message).includes("missing required resultType")) throw e;
    console.error(`the SDK refused the result without resultType: ${e.message}`);
  }
} else if (scenario === "tools_call") {
  const { tools } = await client.listTools();
  if (tools[0]) await gated.callTool({ name: tools[0].name, arguments: { a: 2, b: 3 } });
} else if (scenario === "request-metadata") {
  await client.listTools();
} else if (scenario === "http-standard-headers") {
  for (const t of (await client.listTools()).tools) await gated.callTool({ name: t.name, arguments: {} });
  for (const r of (await client.listResources()).resources) await gated.readResource({ uri: r.uri });
  for (const p of (await client.listPrompts()).prompts) await gated.getPrompt({ name: p.name, arguments: {} });
} else {
  console.error(`no handler for scenario ${JSON.stringify(scenario)}`);
  process.exit(2);
}
await client.close();
