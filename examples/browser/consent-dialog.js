// The consent dialog: shows exactly the gate's consent view (docs/consent-view.md) and the
// answers the user gives, and says what the user decided. Everything the server wrote is set
// as text, never as HTML, and passes `shownText` first: a bidi control or an invisible
// character is shown as `\u{h}`, so it can neither reorder nor hide what is around it
// (docs/consent-view.md, "Server text on a screen"). Nothing is fetched from a URL it names.
import { getDomain } from "/node_modules/tldts/dist/index.esm.min.js";
import { shownJson, shownText } from "/gate/src/shown.js";

const $ = (id) => document.getElementById(id);

function el(tag, text, attrs = {}) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

const WARNINGS = {
  punycode: "The host is written in Punycode: its letters may imitate another site's.",
  mixed_script: "The host mixes alphabets (for example Latin and Cyrillic): it may imitate another site.",
  ip_literal: "The host is a bare IP address, not a name.",
  non_default_port: "The URL uses an unusual port.",
};

function constraints(f) {
  const parts = [];
  if (f.required) parts.push("required");
  if (f.type === "string") {
    if (f.min_length !== undefined && f.max_length !== undefined) parts.push(`${f.min_length} to ${f.max_length} characters`);
    else if (f.min_length !== undefined) parts.push(`at least ${f.min_length} characters`);
    else if (f.max_length !== undefined) parts.push(`at most ${f.max_length} characters`);
    if (f.format) parts.push(`format: ${shownText(f.format)}`);
  }
  if (f.type === "number") {
    parts.push(f.integer ? "a whole number" : "a number");
    if (f.minimum !== undefined) parts.push(`from ${f.minimum}`);
    if (f.maximum !== undefined) parts.push(`to ${f.maximum}`);
  }
  if (f.type === "multi_select") {
    if (f.min_items !== undefined) parts.push(`at least ${f.min_items}`);
    if (f.max_items !== undefined) parts.push(`at most ${f.max_items}`);
  }
  if (f.default !== undefined) parts.push(`default ${shownJson(f.default)}`);
  return parts.join(", ");
}

/** One control per field, labelled; `read()` gives the value the user set (undefined: empty). */
function fieldControl(inputKey, f, n) {
  const id = `f-${n}`;
  const wrap = el("div", null, { class: "field" });
  const label = el("label", shownText(f.title ?? f.name), { for: id });
  wrap.append(label);
  const hint = el("small", [f.description === undefined ? undefined : shownText(f.description), constraints(f)].filter(Boolean).join(" — "), { id: `${id}-hint` });
  let read;
  if (f.type === "single_select") {
    const select = el("select", null, { id, "aria-describedby": hint.id });
    if (!f.required) select.append(el("option", "(none)", { value: "" }));
    for (const o of f.options) select.append(el("option", shownText(o.title ?? o.value), { value: o.value }));
    if (f.default !== undefined) select.value = f.default;
    wrap.append(select);
    read = () => (select.value === "" ? undefined : select.value);
  } else if (f.type === "multi_select") {
    const group = el("fieldset", null, { id, "aria-describedby": hint.id });
    group.append(el("legend", shownText(f.title ?? f.name)));
    const boxes = f.options.map((o, i) => {
      const box = el("input", null, { type: "checkbox", id: `${id}-${i}`, value: o.value });
      group.append(box, el("label", shownText(o.title ?? o.value), { for: `${id}-${i}` }));
      return box;
    });
    label.remove();
    wrap.append(group);
    read = () => boxes.filter((b) => b.checked).map((b) => b.value);
  } else if (f.type === "boolean") {
    const box = el("input", null, { type: "checkbox", id, "aria-describedby": hint.id });
    if (f.default === true) box.checked = true;
    wrap.prepend(box);
    read = () => box.checked;
  } else {
    const type = f.type === "number" ? "number" : f.format === "email" ? "email" : f.format === "date" ? "date" : "text";
    const input = el("input", null, { id, type, "aria-describedby": hint.id, autocomplete: "off" });
    if (f.required) input.setAttribute("aria-required", "true");
    if (f.default !== undefined) input.value = String(f.default);
    wrap.append(input);
    read = () => {
      if (input.value === "") return undefined;
      if (f.type !== "number") return input.value;
      const v = Number(input.value);
      return Number.isFinite(v) ? v : input.value;
    };
  }
  wrap.append(hint);
  return { wrap, name: f.name, read, inputKey };
}

/** The full URL with its registrable domain marked, as text nodes only. */
function urlLine(url) {
  const p = el("p", null, { class: "url" });
  // The gate let only a URL without controls or white space through; shown escaped all the same.
  const full = shownText(url.full);
  const host = shownText(url.ascii_host);
  const domain = getDomain(host, { allowPrivateDomains: true }) ?? host;
  const at = full.indexOf(host);
  if (at < 0) {
    p.append(el("code", full));
    return p;
  }
  const dAt = at + host.length - domain.length;
  const code = el("code");
  code.append(document.createTextNode(full.slice(0, dAt)), el("mark", full.slice(dAt, at + host.length), { title: "the site you would be sent to" }), document.createTextNode(full.slice(at + host.length)));
  p.append(code);
  return p;
}

function renderInput(input, controls) {
  const box = el("section", null, { class: `input ${input.kind}`, "aria-label": `Input ${shownJson(input.key)}` });
  box.append(el("h3", `${shownJson(input.key)} (${shownText(input.kind)})`));
  if (input.message !== undefined) box.append(el("p", shownText(input.message), { class: "message" }));
  if (input.kind === "form") {
    for (const f of input.fields) {
      const c = fieldControl(input.key, f, controls.length);
      controls.push(c);
      box.append(c.wrap);
    }
  } else if (input.kind === "url") {
    const u = input.url;
    box.append(el("p", "Accepting opens this address in your browser; this page and the model cannot see it:"));
    box.append(urlLine(u));
    const domain = getDomain(u.ascii_host, { allowPrivateDomains: true }) ?? u.ascii_host;
    box.append(el("p", `Site: ${shownText(domain)}`, { class: "domain" }));
    if (u.unicode_host !== u.ascii_host) box.append(el("p", `The host reads as: ${shownText(u.unicode_host)} (sent as ${shownText(u.ascii_host)})`));
    if (u.warnings?.length) {
      const ul = el("ul", null, { class: "warnings", "aria-label": "Warnings" });
      for (const w of u.warnings) ul.append(el("li", WARNINGS[w] ?? shownText(w), { "data-warning": w }));
      box.append(ul);
    }
  } else {
    box.append(el("p", "A deprecated request this client's policy allows."));
  }
  return box;
}

/**
 * Show `view` (parsed consent view) and resolve once the user chose:
 *   { action: "accept" | "decline" | "cancel", responses }
 * where `responses` is the `inputResponses` object the choice sends. `onAccept(responses)`
 * may reject with a message (the gate refused the answers): the dialog then stays open.
 */
export function askConsent(view, onDecide) {
  const dialog = $("consent");
  $("consent-server").textContent = `Server (verified by this page's connection): ${shownText(view.server)}`;
  const req = $("consent-request");
  req.replaceChildren(
    el("p", `${shownText(view.request.method)} ${shownJson(view.request.name ?? "")}, round ${view.round} of at most ${view.max_rounds}`),
    el("p", "Arguments: "),
  );
  const args = view.request.arguments;
  req.lastChild.append(el("code", args.value !== undefined ? shownJson(args.value) : `(${args.bytes} bytes, sha256 ${shownText(args.sha256 ?? "")})`));
  if (view.state?.present) req.append(el("p", `The server keeps state for this request (${view.state.bytes} bytes, not shown).`));
  const controls = [];
  $("consent-inputs").replaceChildren(...view.inputs.map((i) => renderInput(i, controls)));
  $("consent-effects").replaceChildren(...view.effects.map((e) => el("li", shownText(e))));
  const error = $("consent-error");
  error.hidden = true;

  const answers = (action) => {
    const out = {};
    for (const input of view.inputs) {
      if (action !== "accept") {
        out[input.key] = { action };
      } else if (input.kind === "form") {
        const content = {};
        for (const c of controls.filter((c) => c.inputKey === input.key)) {
          const v = c.read();
          if (v !== undefined) content[c.name] = v;
        }
        out[input.key] = { action: "accept", content };
      } else {
        out[input.key] = { action: "accept" };
      }
    }
    return out;
  };

  return new Promise((resolve) => {
    const buttons = ["accept", "decline", "cancel"].map((a) => $(`consent-${a}`));
    const finish = (result) => {
      for (const b of buttons) b.onclick = null;
      dialog.oncancel = null;
      dialog.close();
      resolve(result);
    };
    const choose = async (action) => {
      const responses = answers(action);
      const failed = await onDecide(action, responses);
      if (failed) {
        error.textContent = failed;
        error.hidden = false;
        return;
      }
      finish({ action, responses });
    };
    buttons[0].onclick = () => choose("accept");
    buttons[1].onclick = () => choose("decline");
    buttons[2].onclick = () => choose("cancel");
    // Escape cancels (the dialog's own `cancel` event): a cancel answer, sent like the others.
    dialog.oncancel = (e) => {
      e.preventDefault();
      choose("cancel");
    };
    dialog.showModal();
    const first = dialog.querySelector("input, select, button");
    first?.focus();
  });
}
