/** The form round every gate test runs: a booking that asks for an email. */
export const SERVER = { origin: "https://mcp.example.com/mcp" };
export const META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {}, url: {} } },
};
export const PARAMS = { name: "book", arguments: { party: 4 }, _meta: META };
export const SCHEMA = { type: "object", properties: { email: { type: "string", format: "email" } }, required: ["email"] };
export const formRound = (id) => JSON.stringify({ jsonrpc: "2.0", id, result: { resultType: "input_required", inputRequests: {
  contact: { method: "elicitation/create", params: { message: "Email?", requestedSchema: SCHEMA } } } } });
export const complete = (id) => JSON.stringify({ jsonrpc: "2.0", id, result: { resultType: "complete", content: [] } });
export const ANSWERS = { contact: { action: "accept", content: { email: "ada@example.com" } } };
