// The npm package's dependency policy, over the SBOMs cyclonedx-npm wrote (scripts/node --pack):
// - run time: the package depends on nothing (the SBOM without dev dependencies lists no
//   component, and package.json names none);
// - the whole tree (dev too: jco, TypeScript, the SDK client): every license is one the
//   repository's deny.toml [licenses] allow-list permits, or one licenses.json adds with its
//   reason; a package without a license is refused unless licenses.json clarifies it.
// Prints the licenses with their packages, then `# pass N` / `# fail N`; exits 1 on a failure.
//
// Usage: node licenses.mjs <runtime.cdx.json> <all.cdx.json> <deny.toml>
import { readFileSync } from "node:fs";

const [runtimePath, allPath, denyPath] = process.argv.slice(2);
if (!denyPath) {
  console.error("usage: node licenses.mjs <runtime.cdx.json> <all.cdx.json> <deny.toml>");
  process.exit(2);
}
const extra = JSON.parse(readFileSync(new URL("./licenses.json", import.meta.url), "utf8"));

/** The quoted entries of deny.toml's [licenses] allow = [ ... ]. */
function denyAllow(text) {
  const section = text.split(/^\[licenses\]\s*$/m)[1]?.split(/^\[/m)[0] ?? "";
  const list = section.match(/^allow\s*=\s*\[([\s\S]*?)^\]/m)?.[1];
  if (list === undefined) throw new Error(`${denyPath}: no [licenses] allow list`);
  return list.split("\n").map((l) => l.replace(/#.*/, "").match(/"([^"]+)"/)?.[1]).filter(Boolean);
}

const allowed = new Set([...denyAllow(readFileSync(denyPath, "utf8")), ...Object.keys(extra.allow)]);

/**
 * Whether an SPDX expression is permitted: `A OR B` needs one side, `A AND B` both, and
 * `id WITH exception` must be listed as a whole. Anything it cannot parse is refused.
 */
function permitted(expression) {
  const tokens = expression.match(/\(|\)|[^\s()]+/g) ?? [];
  let at = 0;
  const primary = () => {
    if (tokens[at] === "(") {
      at += 1;
      const v = or();
      if (tokens[at++] !== ")") throw new Error("unbalanced");
      return v;
    }
    let id = tokens[at++];
    if (id === undefined || /^(AND|OR|WITH|\))$/.test(id)) throw new Error("an identifier is missing");
    if (tokens[at] === "WITH") {
      id = `${id} WITH ${tokens[at + 1]}`;
      at += 2;
    }
    return allowed.has(id);
  };
  const and = () => {
    let v = primary();
    while (tokens[at] === "AND") { at += 1; v = primary() && v; }
    return v;
  };
  const or = () => {
    let v = and();
    while (tokens[at] === "OR") { at += 1; v = and() || v; }
    return v;
  };
  try {
    const v = or();
    return at === tokens.length && v;
  } catch {
    return false;
  }
}

const components = (bom) => (bom.components ?? []).flatMap(function walk(c) {
  return [c, ...(c.components ?? []).flatMap(walk)];
});
const nameOf = (c) => `${c.group ? `${c.group}/` : ""}${c.name}@${c.version}`;

let pass = 0;
let fail = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "not ok"} - ${what}`);
  if (ok) pass += 1; else fail += 1;
};

// Run time: nothing.
const runtime = JSON.parse(readFileSync(runtimePath, "utf8"));
const shipped = components(runtime).map(nameOf);
check(shipped.length === 0, `the package has no run-time dependency${shipped.length ? `: ${shipped.join(", ")}` : ""}`);

// The whole tree: each package's licenses (a list of ids or names means all of them apply).
const byLicense = new Map();
const refused = [];
for (const c of components(JSON.parse(readFileSync(allPath, "utf8")))) {
  const name = nameOf(c);
  let expressions = (c.licenses ?? []).map((l) => l.expression ?? l.license?.id ?? l.license?.name).filter(Boolean);
  if (expressions.length === 0 && extra.clarify[name]) expressions = [extra.clarify[name].license];
  if (expressions.length === 0) expressions = ["(none)"];
  for (const e of new Set(expressions)) {
    if (!byLicense.has(e)) byLicense.set(e, []);
    byLicense.get(e).push(name);
    if (!permitted(e)) refused.push(`${name}: ${e}`);
  }
}
for (const [license, names] of [...byLicense].sort((a, b) => b[1].length - a[1].length)) {
  console.log(`# ${license}: ${names.length} (${names.slice(0, 4).join(", ")}${names.length > 4 ? ", ..." : ""})`);
}
check(refused.length === 0, `every license in the npm tree is allowed${refused.length ? `; not: ${refused.join("; ")}` : ""}`);
console.log(`# pass ${pass}`);
console.log(`# fail ${fail}`);
process.exit(fail === 0 ? 0 : 1);
