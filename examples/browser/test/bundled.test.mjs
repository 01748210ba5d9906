// The npm package from a browser bundler (issue 27: "usable from Node and from a browser
// bundler"): the release's tarball installed in a fresh project in a temp folder, a page that
// imports it by name built by Vite (pinned in this example's package-lock.json), the bundle
// served with the example's Content-Security-Policy and opened in Debian's chromium.
//   MRTR_GATE_NPM_TARBALL  the tarball (default: <repo>/target/dist/npm/mrtr-gate-<version>.tgz,
//                          which scripts/package and scripts/node --pack write)
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CSP } from "../server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const example = path.resolve(here, "..");
const repo = path.resolve(example, "../..");
const version = JSON.parse(readFileSync(path.join(repo, "host-harness/node/package.json"), "utf8")).version;
const tarball = process.env.MRTR_GATE_NPM_TARBALL ?? path.join(repo, `target/dist/npm/mrtr-gate-${version}.tgz`);
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
let tmp;
let dist;
let server;
let url;
let browser;

before(async () => {
  assert.ok(existsSync(tarball), `no ${tarball}: run ./scripts/node --pack (or ./scripts/package) first`);
  tmp = mkdtempSync(path.join(os.tmpdir(), "mrtr-gate-bundled-"));
  const app = path.join(tmp, "app");
  cpSync(path.join(example, "bundled"), app, { recursive: true });
  cpSync(tarball, path.join(app, path.basename(tarball)));
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "bundled-app", private: true, type: "module" }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--silent", "--prefer-offline", `./${path.basename(tarball)}`],
    { cwd: app, stdio: "inherit" });
  // The digest the page pins: the one the package ships beside its component.
  const shipped = readFileSync(path.join(app, "node_modules/mrtr-gate/component/mrtr-gate.wasm.sha256"), "utf8").split(" ")[0];
  execFileSync(process.execPath, [path.join(example, "node_modules/vite/bin/vite.js"), "build", "--logLevel", "warn"],
    { cwd: app, stdio: "inherit", env: { ...process.env, VITE_MRTR_GATE_SHA256: shipped } });
  dist = path.join(app, "dist");
  const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".wasm": "application/wasm" };
  server = createServer((req, res) => {
    const wanted = new URL(req.url, "http://x").pathname;
    if (wanted === "/favicon.ico") {
      res.writeHead(204).end(); // the browser asks by itself; the app has none
      return;
    }
    const file = path.join(dist, wanted === "/" ? "index.html" : decodeURIComponent(wanted));
    const type = types[path.extname(file)];
    if (!file.startsWith(dist + path.sep) || !type || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": type, "content-security-policy": CSP }).end(readFileSync(file));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${server.address().port}/`;
  browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve()));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const assets = () => readdirSync(path.join(dist, "assets"));

test("the bundle carries the component as one asset, byte for byte, and nothing of Node", () => {
  const wasm = assets().filter((f) => f.endsWith(".wasm"));
  assert.equal(wasm.length, 1, `wasm assets: ${wasm}`);
  const bytes = readFileSync(path.join(dist, "assets", wasm[0]));
  const digest = createHash("sha256").update(bytes).digest("hex");
  const shipped = readFileSync(path.join(tmp, "app/node_modules/mrtr-gate/component/mrtr-gate.wasm.sha256"), "utf8").split(" ")[0];
  assert.equal(digest, shipped);
  for (const f of assets().filter((a) => a.endsWith(".js"))) {
    assert.doesNotMatch(readFileSync(path.join(dist, "assets", f), "utf8"), /node:|__vite-browser-external/, f);
  }
});

async function run(query = "") {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(url + query);
  await page.waitForFunction(() => document.getElementById("out")?.textContent !== "running");
  const out = await page.locator("#out").textContent();
  await page.close();
  return { out, problems, requests };
}

test("the bundled page runs a whole form round with the component pinned, under a strict CSP", async () => {
  const { out, problems, requests } = await run();
  assert.equal(out, "received,consented,submitted,terminal");
  assert.deepEqual(problems, []);
  assert.deepEqual(requests.filter((r) => !r.startsWith(url)), []);
  assert.equal(requests.filter((r) => r.endsWith(".wasm")).length, 1);
});

test("the bundled page refuses a component its pin does not name, before compiling it", async () => {
  const { out } = await run(`?pin=${"0".repeat(64)}`);
  assert.match(out, /^error: unexpected_component /);
});
