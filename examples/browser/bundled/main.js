// The npm package as a web app uses it: imported by name, bundled by Vite from the installed
// tarball (test/bundled.test.mjs). A whole form round with the component pinned (to the digest
// given at build time, or to `?pin=` for the test of a wrong pin); the trail's events, or the
// error, end up in #out.
import { Gate } from "mrtr-gate";
import { DecidedConsent, MemoryAudit, MemoryStorage, SystemClock } from "mrtr-gate/hosts";

const out = document.getElementById("out");
try {
  const server = { origin: "https://weather.example.com/mcp" };
  const consent = new DecidedConsent();
  const audit = new MemoryAudit();
  const gate = await Gate.create(
    { clock: new SystemClock(), storage: new MemoryStorage(), consent, audit },
    { expectedSha256: new URLSearchParams(location.search).get("pin") ?? import.meta.env.VITE_MRTR_GATE_SHA256 },
  );
  const params = { name: "get_forecast", arguments: { city: "Oslo" },
    _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
             "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {} } } } };
  await gate.register({ requestId: 41, server, user: "alice", tenant: "acme", method: "tools/call", params });
  const verdict = await gate.acceptResponse(server, JSON.stringify({ jsonrpc: "2.0", id: 41, result: {
    resultType: "input_required", requestState: "opaque-server-state",
    inputRequests: { units: { method: "elicitation/create", params: { message: "Which units?",
      requestedSchema: { type: "object", properties: { units: { type: "string", enum: ["metric", "imperial"] } },
                         required: ["units"] } } } } } }));
  const responses = { units: { action: "accept", content: { units: "metric" } } };
  await consent.decideFor(verdict, responses, true);
  await gate.buildRetry({ server, requestId: 41, retryId: 42, user: "alice", tenant: "acme", responses });
  await gate.acceptResponse(server, '{"jsonrpc":"2.0","id":42,"result":{"resultType":"complete","content":[]}}');
  out.textContent = audit.lines.map((line) => JSON.parse(line).event).join(",");
} catch (e) {
  out.textContent = `error: ${e?.code ?? ""} ${e?.message ?? e}`;
}
