// The non-Node side of package.json "imports" #load: a page has no file system; the component
// is fetched (src/component.js), and a file: URL is refused. A page has no synchronous SHA-256
// (Web Crypto's digest returns a promise), so the `digest` import answers none: the component
// then hashes in WebAssembly, and does not ask again.

/** Refuses: a browser cannot read a file: URL. */
export async function readFileUrl(url) {
  throw new Error(`cannot read ${url} outside Node: pass the component as a URL, a Response or bytes`);
}

/** No SHA-256 faster than the component's own. */
export const sha256Hex = null;
