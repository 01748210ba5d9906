// The browser example in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core; no browser is downloaded): the page loads the transpiled component with
// no WASI shim, runs rounds against the local fixture server, and asks in its consent dialog.
// Screenshots go to $MRTR_GATE_ARTIFACTS (default: target/browser-artifacts).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { CSP, start } from "../server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = process.env.MRTR_GATE_ARTIFACTS ?? path.resolve(here, "../../../target/browser-artifacts");
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
let fixture;
let browser;

before(async () => {
  await mkdir(artifacts, { recursive: true });
  fixture = await start(0);
  browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  await fixture?.close();
});

async function open() {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(String(e)));
  // Nothing but the fixture is ever fetched: not the URL a server names, not its favicon.
  const elsewhere = [];
  page.on("request", (r) => {
    if (!r.url().startsWith(fixture.url)) elsewhere.push(r.url());
  });
  // Every breach of the page's Content-Security-Policy, from the first script on.
  await page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) => window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  await page.goto(fixture.url);
  await page.waitForFunction(() => window.gateReady === true);
  return { page, problems, elsewhere };
}

const shot = (page, name) => page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });

test("the page loads the component without WASI and with nothing but the fixture", async () => {
  const { page, problems, elsewhere } = await open();
  assert.deepEqual(problems, []);
  assert.deepEqual(elsewhere, []);
  assert.ok(!fixture.requests.some((u) => u.includes("preview2-shim")));
  // The component itself, fetched once and split in the page (its digest checked by
  // WebCrypto: 127.0.0.1 is a secure context); jco's separate core modules are never asked for.
  assert.equal(fixture.requests.filter((u) => u === "/gate/component/mrtr-gate.wasm").length, 1);
  assert.deepEqual(fixture.requests.filter((u) => u.endsWith(".wasm") && u !== "/gate/component/mrtr-gate.wasm"), []);
  await page.close();
});

test("a form round: the dialog shows the request and every field, and a valid answer is sent", async () => {
  const { page, problems, elsewhere } = await open();
  await page.getByRole("button", { name: "Book a flight (a form)" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  await assert.doesNotReject(dialog.getByText(`Server (verified by this page's connection): ${fixture.url}mcp`).waitFor());
  await dialog.getByText('tools/call "book_flight", round 1 of at most 10').waitFor();
  await dialog.getByText('{"from":"OSL","to":"SFO"}').waitFor();
  // Focus on open, on the first field; every field labelled, with its constraints.
  assert.equal(await page.evaluate(() => document.activeElement?.id), "f-0");
  const name = dialog.getByLabel("Full name");
  await dialog.getByText("As printed in the passport — required, 1 to 100 characters").waitFor();
  await dialog.getByText("a whole number, from 0, to 3").waitFor();
  await name.fill("Ada Lovelace");
  await dialog.getByLabel("Seat").selectOption("window");
  await dialog.getByLabel("Checked bags").fill("1");
  await shot(page, "form-filled");
  await dialog.getByRole("button", { name: "Accept" }).click();
  await page.getByText("Done: book_flight completed.").waitFor();
  await page.getByText('the server answered: complete').waitFor();
  await page.getByText(/receipt consent-1/).waitFor();
  await page.getByText("audit trail: received, consented, submitted, terminal").waitFor();
  await shot(page, "form-complete");
  assert.deepEqual(problems, []);
  assert.deepEqual(elsewhere, []);
  await page.close();
});

test("an invalid answer is refused by the gate, shown in the dialog, and can be corrected", async () => {
  const { page } = await open();
  await page.getByRole("button", { name: "Book a flight (a form)" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  await dialog.getByLabel("Full name").fill("Ada Lovelace");
  await dialog.getByLabel("Seat").selectOption("aisle");
  await dialog.getByLabel("Checked bags").fill("7");
  await dialog.getByRole("button", { name: "Accept" }).click();
  const error = dialog.getByRole("alert");
  await error.waitFor();
  // The field and the rule it broke, in the gate's words (the dialog escapes them: server text).
  assert.equal(await error.textContent(),
    "The gate refused these answers: input_response_schema_mismatch: the content for `passenger` does not match its requested schema: `bags`: at most 3");
  await shot(page, "form-invalid");
  // Nothing went to the server; the round stays open and takes the corrected answer.
  await dialog.getByLabel("Checked bags").fill("2");
  await dialog.getByRole("button", { name: "Accept" }).click();
  await page.getByText("Done: book_flight completed.").waitFor();
  await page.close();
});

test("decline and cancel are answers the user sends, each with its own receipt", async () => {
  const { page } = await open();
  await page.getByRole("button", { name: "Book a flight (a form)" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Decline" }).click();
  await page.getByText(/you chose decline; retry \d+ carries your answers with receipt consent-1/).waitFor();
  await page.getByText("Done: book_flight completed.").waitFor();
  // Escape cancels.
  await page.getByRole("button", { name: "Book a flight (a form)" }).click();
  await page.getByRole("dialog").waitFor();
  await page.keyboard.press("Escape");
  await page.getByText(/you chose cancel; retry \d+ carries your answers with receipt consent-2/).waitFor();
  await page.getByText("Done: book_flight completed.").waitFor();
  await shot(page, "cancelled");
  await page.close();
});

test("a URL round: the full URL, its registrable domain marked, the warnings, and nothing fetched", async () => {
  const { page, elsewhere } = await open();
  await page.getByRole("button", { name: "Pay (a URL to open)" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  assert.equal(await dialog.locator(".url code").textContent(), "https://xn--pypal-4ve.com/authorize?session=SECRET-SESSION");
  assert.equal(await dialog.locator(".url mark").textContent(), "xn--pypal-4ve.com");
  await dialog.getByText("Site: xn--pypal-4ve.com").waitFor();
  await dialog.getByText("The host reads as: pаypal.com (sent as xn--pypal-4ve.com)").waitFor();
  assert.deepEqual(await dialog.locator(".warnings li").evaluateAll((l) => l.map((e) => e.dataset.warning)), ["punycode", "mixed_script"]);
  await dialog.getByText(/accepting opens https:\/\/xn--pypal-4ve.com\/authorize\?session=SECRET-SESSION in your browser/).waitFor();
  await shot(page, "url-consent");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Accept");
  await dialog.getByRole("button", { name: "Accept" }).click();
  await page.getByText("Done: pay completed.").waitFor();
  assert.deepEqual(elsewhere, [], "the page never fetched the URL");
  await page.close();
});

test("a hostile round is refused with a clear error, and no dialog opens", async () => {
  const { page } = await open();
  await page.getByRole("button", { name: "A hostile server round" }).click();
  const error = page.locator("#error");
  await error.waitFor();
  assert.equal(await error.getAttribute("data-code"), "unsafe_url_elicitation");
  assert.match(await error.textContent(), /Refused by the gate: unsafe_url_elicitation \(the server misbehaved\)/);
  assert.equal(await page.getByRole("dialog").count(), 0);
  await page.getByText("Stopped: nothing was sent back to the server.").waitFor();
  await shot(page, "hostile-refused");
  await page.close();
});

// The characters no screen may show raw (tests/screen/shown_text.json, shared with the Rust
// and Python hosts).
const vectors = JSON.parse(readFileSync(new URL("../../../tests/screen/shown_text.json", import.meta.url), "utf8"));
const hidden = new RegExp(`[${vectors.escaped.map(([a, b]) => `\\u{${a}}-\\u{${b}}`).join("")}]`, "u");

test("the page is served with a strict Content-Security-Policy and keeps to it", async () => {
  for (const p of ["", "app.js", "gate/src/index.js", "no-such-file"]) {
    const res = await fetch(fixture.url + p);
    assert.equal(res.headers.get("content-security-policy"), CSP, p);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", p);
  }
  const directives = Object.fromEntries(CSP.split("; ").map((d) => [d.split(" ")[0], d.split(" ").slice(1)]));
  assert.deepEqual(directives["default-src"], ["'none'"]);
  assert.deepEqual(directives["script-src"], ["'self'", "'wasm-unsafe-eval'"], "no inline script, no eval");
  assert.deepEqual(directives["frame-ancestors"], ["'none'"]);
  const { page, problems } = await open();
  // The gate loaded and compiled under the policy, with nothing refused on the way.
  assert.deepEqual(await page.evaluate(() => window.cspViolations), []);
  assert.deepEqual(problems, []);
  // And the policy holds: no eval, no inline script. (The eval runs from a timer: code the
  // test harness evaluates directly is exempt from the page's policy, a timer's is not.)
  await page.evaluate(() => setTimeout(() => {
    try {
      window.evalResult = String(eval("1 + 1"));
    } catch (e) {
      window.evalResult = e.name;
    }
  }, 0));
  await page.waitForFunction(() => window.evalResult !== undefined);
  assert.equal(await page.evaluate(() => window.evalResult), "EvalError");
  await page.evaluate(() => {
    const s = document.createElement("script");
    s.textContent = "window.inlineRan = true";
    document.body.append(s);
  });
  await page.waitForFunction(() => window.cspViolations.some((v) => v.startsWith("script-src")));
  assert.equal(await page.evaluate(() => window.inlineRan ?? false), false);
  await page.close();
});

test("a server's bidi overrides, invisible characters and escapes are shown marked", async () => {
  const { page, problems } = await open();
  await page.getByRole("button", { name: "A server that hides text" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  assert.equal(await dialog.locator(".message").textContent(), "Send to \\u{202e}SU ,knab ruoy\\u{202c}\\u{200b} now\\u{001b}[2J");
  await dialog.getByText("I agree\\u{2066} to pay\\u{2069}").waitFor();
  await dialog.getByText("pay\\u{200d}pal\\u{feff} — required").waitFor();
  // Line by line: the dialog's own line breaks are the only control characters left.
  const text = await dialog.evaluate((d) => d.innerText);
  assert.ok(!text.split("\n").some((line) => hidden.test(line)), `nothing hidden left in the dialog: ${JSON.stringify(text)}`);
  await shot(page, "hidden-text-marked");
  // The answer the user gives is unchanged by the marking.
  await dialog.getByLabel("I agree\\u{2066} to pay\\u{2069}").check();
  await dialog.getByRole("button", { name: "Accept" }).click();
  await page.getByText("Done: spoof completed.").waitFor();
  assert.deepEqual(await page.evaluate(() => window.cspViolations), []);
  assert.deepEqual(problems, []);
  await page.close();
});

test("Chromium runs the same form round as the other hosts' benches", async () => {
  const { page } = await open();
  const r = await page.evaluate(() => window.benchRounds(400));
  assert.ok(r.median_us > 0);
  console.log(`# chromium form round: median ${r.median_us.toFixed(1)} us (timing only, no budget here; see scripts/bench)`);
  await page.close();
});
