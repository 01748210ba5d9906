// Times the same form round as the other hosts' benches in a real Chromium (Debian's, through
// playwright-core): the page's Gate over in-page reference hosts, no network, no dialog.
// Prints min/median/max in microseconds as one JSON line (`mrtr-gate bench --external`).
// The page's clock is coarse (0.1 ms), so rounds are timed in batches of 20; the first run
// of the page is a warm-up (V8 tiers the module up while it runs).
//
// Usage: node bench.mjs [rounds]
import { chromium } from "playwright-core";
import { start } from "./server.mjs";

const rounds = Number(process.argv[2] ?? 2000);
const fixture = await start(0);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  await page.goto(fixture.url);
  await page.waitForFunction(() => window.gateReady === true);
  await page.evaluate((n) => window.benchRounds(n), rounds);
  const r = await page.evaluate((n) => window.benchRounds(n), rounds);
  console.log(JSON.stringify({ engine: `component (jco, chromium ${browser.version()})`, workload: "form, schema seen", rounds, ...r }));
} finally {
  await browser.close();
  await fixture.close();
}
