// The canonical JSON text (RFC 8785, JCS) of the answers a retry carries, and its SHA-256:
// what the gate binds consent to (`responsesSha256`). Held to the gate's own function by the
// vectors in tests/canonical/responses_vectors.json. JavaScript's own `sort()` is UTF-16
// order and `JSON.stringify` writes numbers and strings as JCS does; a number beyond 2^53
// cannot be held exactly here (nor in the text this package sends for it, so the two agree).

/** The JCS text of a JSON value. */
export function canonical(value) {
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value)) throw new TypeError("answers may not hold NaN or an infinity");
    if (value === undefined || typeof value === "function" || typeof value === "symbol" || typeof value === "bigint") {
      throw new TypeError(`not a JSON value: ${typeof value}`);
    }
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  return `{${Object.keys(value)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
    .join(",")}}`;
}

/** Lowercase hex SHA-256 of a text's UTF-8 bytes (WebCrypto: Node and browsers alike). */
export async function sha256Hex(text) {
  const d = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The SHA-256 of the canonical text of `inputResponses`: an object, or the JSON text the host
 * will pass to `buildRetry` (an object).
 */
export async function responsesSha256(responses) {
  const value = typeof responses === "string" ? JSON.parse(responses) : responses;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError("`inputResponses` must be an object");
  }
  return sha256Hex(canonical(value));
}
