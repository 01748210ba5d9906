// The non-Node side of package.json "imports" #load: a page has no file system; the component
// is fetched (src/component.js), and a file: URL is refused.

/** Refuses: a browser cannot read a file: URL. */
export async function readFileUrl(url) {
  throw new Error(`cannot read ${url} outside Node: pass the component as a URL, a Response or bytes`);
}
