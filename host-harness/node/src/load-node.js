// Node's side of package.json "imports" #load: reads a file: URL (Node's fetch does not), and
// hashes for the component's `digest` import. Browser bundles resolve #load to ./load-web.js
// instead, so none of them sees `node:`.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";

/** The bytes of the file at `url` (a file: URL). */
export const readFileUrl = (url) => readFile(url);

/** The `digest` import: OpenSSL's SHA-256 (the CPU's SHA extensions where it has them). */
export const sha256Hex = (text) => createHash("sha256").update(text, "utf8").digest("hex");
