// Puts any probe client behind `mrtr-gate proxy` over streamable HTTP:
// `node via-proxy.mjs MRTR_GATE_BIN -- CLIENT [ARGS...] URL` (Node builtins only). The probe
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
import { join } from "node:path";
import { createInterface } from "node:readline";

const argv = process.argv.slice(2);
const split = argv.indexOf("--");
if (split !== 1 || argv.length < 4) {
  console.error("usage: node via-proxy.mjs MRTR_GATE_BIN -- CLIENT [ARGS...] URL");
  process.exit(2);
}
const bin = argv[0];
const client = argv.slice(2, -1);
const upstream = argv[argv.length - 1];
const dir = mkdtempSync(join(tmpdir(), "mrtr-gate-probe-proxy-"));
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
  const child = spawn(client[0], [...client.slice(1), url], { stdio: "inherit" });
  status = await new Promise((resolve) => {
    child.on("error", (e) => { console.error(`via-proxy: ${e.message}`); resolve(127); });
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
} catch (e) {
  console.error(`via-proxy: ${e.message}`);
} finally {
  await stopProxy();
}
process.exit(status);
