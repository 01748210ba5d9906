// Node's side of package.json "imports" #load: reads a file: URL (Node's fetch does not).
// Browser bundles resolve #load to ./load-web.js instead, so none of them sees `node:`.
import { readFile } from "node:fs/promises";

/** The bytes of the file at `url` (a file: URL). */
export const readFileUrl = (url) => readFile(url);
