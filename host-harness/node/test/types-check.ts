// Compiled by test/types.test.js with `tsc --noEmit --strict`: the package's TypeScript types
// describe the API as a client uses it (a mistake here or in src/*.d.ts fails the test).
import { Gate, GateError, LoadError, UnexpectedComponent, type Services, type Verdict } from "mrtr-gate";
import { DecidedConsent, ManualClock, MemoryAudit, MemoryStorage, SystemClock, shardOk } from "mrtr-gate/hosts";
import { AnchoredAudit, AuthenticatedStorage, HostKeys, Pseudonyms, verifyAnchor, verifyTrail } from "mrtr-gate/host-keys";
import type { AuditEntry } from "mrtr-gate";

export async function example(services: Services): Promise<string> {
  const gate = await Gate.create(services);
  const server = { origin: "https://mcp.example.com/mcp" };
  const sent = await gate.register({ requestId: 1, server, user: "alice", tenant: "acme", method: "tools/call", params: { name: "t" } });
  const verdict: Verdict = await gate.acceptResponse(server, sent.requestJson);
  if (verdict.kind === "input_required") {
    const retry = await gate.buildRetry({ server, requestId: 1, retryId: 2n, user: "alice", tenant: "acme", responses: {} });
    const mine = await gate.retryFromClient({ server, requestId: null, retryId: "c", user: "alice", tenant: "acme", method: "tools/call", params: "{}" });
    const refused: GateError = await gate.refuseUnbound({ server, user: "alice", tenant: "acme", refusal: "server-request", method: "roots/list" });
    const unbound: GateError = await gate.refuseUnbound({ server, user: "alice", tenant: "acme", refusal: "input-responses" });
    return refused.code + unbound.code + retry.requestJson + mine.requestJson + String(verdict.round) + verdict.inputKeys.join(",");
  }
  if (verdict.kind === "error") return String(verdict.code);
  try {
    await gate.finish({ server: { endpoint: "stdio:x" }, requestId: "r", user: "alice", tenant: "acme", error: "transport_closed" });
  } catch (e) {
    if (e instanceof GateError) return `${e.code} ${e.cause} ${e.audited}`;
  }
  return String(await gate.expireStale());
}

const clock = new ManualClock();
const storage = new MemoryStorage(clock);
const audit = new MemoryAudit(1024);
const consent = new DecidedConsent();
consent.decide("a".repeat(64), "b".repeat(64), true);
void example({ clock: new SystemClock(), storage, consent, audit });

// The SDK client adapter, wired the way its README shows.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { GatedSdkClient, SdkAdapterError } from "mrtr-gate/sdk-client";

export async function gatedSdk(gate: Gate, url: string): Promise<unknown> {
  const gated = new GatedSdkClient({ gate, url, user: "alice", tenant: "acme", answer: async () => null, openUrl: (u: string) => void u });
  const client = new Client({ name: "app", version: "1" }, GatedSdkClient.clientOptions({ capabilities: { elicitation: { form: {} } } }));
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: gated.fetch }));
  gated.attach(client);
  try {
    return await gated.callTool({ name: "book_flight", arguments: { origin: "OSL" } });
  } catch (e) {
    if (e instanceof SdkAdapterError) return e.code;
    throw e;
  }
}

export async function keyed(secret: Uint8Array): Promise<string> {
  const keys = new HostKeys("2026-12", secret);
  keys.add("2026-11", secret);
  keys.rotateTo("2026-12");
  keys.retire("2026-11");
  const clock = new ManualClock();
  const names = new Pseudonyms(keys);
  const storage = new AuthenticatedStorage(new MemoryStorage(clock), keys);
  const gate = await Gate.create({ clock, storage, consent: new DecidedConsent(), audit: new MemoryAudit() });
  const server = { origin: "https://mcp.example.com/mcp" };
  const sent = await gate.register({ requestId: 1, server, user: names.user("ada"), tenant: names.tenant("acme"), method: "tools/call", params: { name: "t" } });
  return sent.requestJson + keys.currentId;
}

// Pinning the component, and the errors a refused one rejects with.
export async function pinned(services: Services, sha256: string, bytes: Uint8Array): Promise<string> {
  try {
    await Gate.create(services, { expectedSha256: sha256, component: bytes });
    return "loaded";
  } catch (e) {
    if (e instanceof UnexpectedComponent) return `${e.code} ${e.whose} ${e.expected} ${e.actual}`;
    if (e instanceof LoadError) return e.code;
    throw e;
  }
}

// The sharded trail: an entry names its shard; checks name the shard they found.
export function sharded(keys: HostKeys, entry: AuditEntry, trail: string, links: string, anchor: string): string {
  const inner = new MemoryAudit();
  const audit = new AnchoredAudit(inner, keys, "audit.anchor", "audit.jsonl.links");
  const written = shardOk(entry) ? audit.append(entry).written : false;
  const head: { seq: bigint; sha256: string } = inner.head(entry.shard);
  const check = verifyAnchor(trail, links, anchor, keys);
  let found = "";
  if (check.kind === "truncated" || check.kind === "extended") found = `${check.shard} ${check.events} ${check.anchored}`;
  else if (check.kind === "unkeyed") found = `${check.shard} ${check.seq}`;
  else if (check.kind === "diverged") found = check.shard;
  const chains = verifyTrail(trail);
  const heads = chains.ok ? [...chains.heads].map(([s, h]) => `${s}:${h.seq}:${h.sha256}`).join() : `${chains.kind}@${chains.at}`;
  return `${written} ${head.seq} ${found} ${heads}`;
}
