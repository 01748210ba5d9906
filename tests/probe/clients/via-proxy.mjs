// Puts any probe client behind `mrtr-gate proxy`:
// `node via-proxy.mjs MRTR_GATE_BIN [--stdio] -- CLIENT [ARGS...] LAST` (Node builtins only).
// With --stdio (the probe run with `--transport stdio`), LAST is the server command line the
// client is to spawn: the client gets instead `[env XDG_CONFIG_HOME=...] MRTR_GATE_BIN proxy
// --user probe --audit ... --server-log ... -- LAST` (the SDKs give a server a minimal
// environment, so the host key's folder is named on the line), spawns the proxy as its stdio
// server, and the proxy spawns the probe's relay. Without it, over streamable HTTP, the probe
// appends its endpoint's URL last; this starts `MRTR_GATE_BIN proxy --listen 127.0.0.1:0
// --upstream URL` (user `probe`, a trail in a temporary folder, the host key in XDG_CONFIG_HOME),
// reads the address from the proxy's `listening on` line, runs CLIENT ARGS with the proxy's URL
// last instead, then stops the proxy before exiting with the client's status. Stopping it
// first matters: the proxy holds the probe's pipes, and the probe judges only once every
// process of the client's tree has closed them. Everything the proxy and the client print is
// passed on (the probe keeps it with the scenario's record).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const argv = process.argv.slice(2);
const stdio = argv[1] === "--stdio";
const split = argv.indexOf("--");
if (split !== (stdio ? 2 : 1) || argv.length < split + 3) {
  console.error("usage: node via-proxy.mjs MRTR_GATE_BIN [--stdio] -- CLIENT [ARGS...] LAST");
  process.exit(2);
}
const bin = argv[0];
const client = argv.slice(split + 1, -1);
const upstream = argv[argv.length - 1];
const dir = mkdtempSync(join(tmpdir(), "mrtr-gate-probe-proxy-"));
const run = (last) => new Promise((done) => {
  const child = spawn(client[0], [...client.slice(1), last], { stdio: "inherit" });
  child.on("error", (e) => { console.error(`via-proxy: ${e.message}`); done(127); });
  child.on("exit", (code, signal) => done(code ?? (signal ? 128 : 1)));
});
if (stdio) {
  const quote = (word) => `'${word.replaceAll("'", "'\\''")}'`;
  const env = process.env.XDG_CONFIG_HOME ? ["env", quote(`XDG_CONFIG_HOME=${process.env.XDG_CONFIG_HOME}`)] : [];
  const proxyLine = [...env, quote(resolve(bin)), "proxy", "--user", "probe", "--audit", quote(join(dir, "audit.jsonl")),
    "--server-log", quote(join(dir, "server.log")), "--", upstream].join(" ");
  const status = await run(proxyLine);
  // The proxy is the client's child and ends when the client closes its stdin; the probe
  // waits for it (its stderr is the probe's pipe), so nothing here stops it.
  rmSync(dir, { recursive: true, force: true });
  process.exit(status);
}
const proxy = spawn(bin, ["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream,
  "--user", "probe", "--audit", join(dir, "audit.jsonl")], { stdio: ["ignore", "inherit", "pipe"] });
const stopProxy = async () => {
  if (proxy.exitCode === null && proxy.signalCode === null) {
    const exited = new Promise((resolve) => proxy.on("exit", resolve));
    proxy.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
};

let status = 1;
try {
  const url = await new Promise((resolve, reject) => {
    createInterface({ input: proxy.stderr }).on("line", (line) => {
      console.error(line);
      const m = /listening on (http:\/\/\S+?),/.exec(line);
      if (m) resolve(m[1]);
    });
    proxy.on("error", reject);
    proxy.on("exit", (code) => reject(new Error(`the proxy exited (${code}) before it listened`)));
  });
  status = await run(url);
} catch (e) {
  console.error(`via-proxy: ${e.message}`);
} finally {
  await stopProxy();
}
process.exit(status);
