import { readFile } from "node:fs/promises";

/** Compiles each core module of gen/ once for the whole test file. */
export function cachedLoader() {
  const cache = new Map();
  const base = new URL("../gen/", import.meta.url);
  return (file) => {
    if (!cache.has(file)) cache.set(file, readFile(new URL(file, base)).then((b) => WebAssembly.compile(b)));
    return cache.get(file);
  };
}
