// Times the same form round as the other hosts' benches in a real Chromium (Debian's, through
// playwright-core): the page's Gate over in-page reference hosts, no network, no dialog.
// Prints min/median/max in microseconds as one JSON line (`mrtr-gate-testkit bench --external`).
// The page's clock is coarse (0.1 ms), so rounds are timed in batches of 20; the first run
// of the page is a warm-up (V8 tiers the module up while it runs). Three timed runs follow,
// and the row is their median run: a browser's several processes share this VM's two cores
// with whatever else it runs, and one run in three or four comes out twice as slow.
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
  const runs = [];
  for (let i = 0; i < 3; i++) runs.push(await page.evaluate((n) => window.benchRounds(n), rounds));
  runs.sort((a, b) => a.median_us - b.median_us);
  console.log(JSON.stringify({ engine: `component (jco, chromium ${browser.version()})`, workload: "form, schema seen", rounds, ...runs[1],
    run_medians_us: runs.map((r) => r.median_us) }));
} finally {
  await browser.close();
  await fixture.close();
}
