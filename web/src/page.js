// The try-it page of `dwstok page`: every registered tokenizer encodes the text box, in
// the browser, and shows its tokens. Test hook: window.dwstokEncode(name, text).
import { makeEncoder } from "./encoders.js";

const t0 = performance.now(); // the data scripts are parsed by now
const utf8 = new TextEncoder();
const EXAMPLES = {
  English: "The quick brown fox jumps over the lazy dog. Tokenizers cut text into pieces a model can count, and fewer pieces means more text fits in its context.",
  Code: "def fib(n: int) -> int:\n    \"\"\"The n-th Fibonacci number.\"\"\"\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint([fib(k) for k in range(10)])\n",
  Han: "研究就是在不知道自己在做什么的时候所做的事。",
  "Digits and money": "In 2026 the budget grew from $1,234,567.89 to €9876543 (+12.5%); call 1-800-555-0199 before 31/12/2026.",
  Hindi: "भारत एक विशाल देश है जिसकी संस्कृति हज़ारों वर्ष पुरानी है।",
  Arabic: "اللغة العربية من أكثر اللغات انتشاراً في العالم، ويتحدثها أكثر من أربعمائة مليون إنسان.",
  "Emoji with joiners": "A family 👨‍👩‍👧‍👦, a rainbow flag 🏳️‍🌈, a wave 👋🏽 and a scientist 👩🏾‍🔬.",
  "Spells <bos>": "This text spells <bos> and <eos>, even <|endoftext|> and <s>, yet each stays plain text.",
};
const MODES = { tokens: "tokens", characters: "characters / token", bytes: "bytes / token" };

const tokenizers = new Map(); // name -> {entry, enc}
let mode = "tokens";

function build() {
  for (const entry of window.DWSTOK_DATA || []) {
    const s = performance.now();
    tokenizers.set(entry.name, { entry, enc: makeEncoder(entry), loadMs: performance.now() - s });
  }
}

// Token i covers bytes [start, end) of the text's UTF-8 (the dummy prefix of a
// SentencePiece model is not the user's); tokens that share a character form one unit,
// drawn once, with the number of tokens it took.
export function layout(text, ids, enc) {
  const buf = utf8.encode(text);
  const charOfByte = new Int32Array(buf.length + 1);
  const charStart = []; // UTF-16 index of each character
  let b = 0;
  let c = 0;
  let u = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    const n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; // a lone surrogate: U+FFFD, 3
    charOfByte.fill(c, b, b + n);
    charStart.push(u);
    u += ch.length;
    b += n;
    c++;
  }
  charStart.push(text.length);
  charOfByte[buf.length] = c;
  const units = [];
  let pos = ids.length && text.length ? -enc.prefixBytes : 0;
  for (const id of ids) {
    const bytes = enc.bytesOf(id);
    const start = Math.max(pos, 0);
    pos += bytes.length;
    const end = Math.max(pos, 0);
    const tok = { id, bytes };
    if (end <= start) {
      units.push({ c0: charOfByte[start], c1: charOfByte[start], tokens: [tok], bytes: 0 });
      continue;
    }
    const c0 = charOfByte[start];
    const c1 = charOfByte[end - 1] + 1;
    const last = units[units.length - 1];
    if (last && c0 < last.c1) {
      last.tokens.push(tok);
      last.c1 = Math.max(last.c1, c1);
      last.bytes += end - start;
    } else {
      units.push({ c0, c1, tokens: [tok], bytes: end - start });
    }
  }
  return units.map((u) => ({ ...u, text: text.slice(charStart[u.c0], charStart[u.c1]), chars: u.c1 - u.c0 }));
}

const hex = (bytes) => Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(" ");
const esc = (s) => s.replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[ch]);
const visible = (s) => s.replace(/ /g, "\u00b7").replace(/\n/g, "\u21b5\n").replace(/\t/g, "\u2192");

function renderUnits(units) {
  const out = [];
  units.forEach((u, k) => {
    const n = u.tokens.length;
    let cls = `tok c${k % 6}`;
    let extra = "";
    if (n > 1) {
      cls += " split";
      extra = `<sup class="n">${n}</sup>`;
    }
    let style = "";
    if (mode !== "tokens") {
      const per = (mode === "characters" ? u.chars : u.bytes) / n;
      const heat = Math.min(per / (mode === "characters" ? 6 : 12), 1);
      style = ` style="background:hsl(${210 - 170 * heat},70%,${88 - 18 * heat}%)"`;
      extra += `<sub class="m">${Number.isInteger(per) ? per : per.toFixed(1)}</sub>`;
    }
    out.push(`<span class="${cls}"${style} data-u="${k}">${esc(visible(u.text)) || "\u2581"}${extra}</span>`);
  });
  return out.join("");
}

function update() {
  const text = document.getElementById("text").value;
  const nBytes = utf8.encode(text).length;
  const nChars = [...text].length;
  const rows = [];
  const started = performance.now();
  const times = {};
  for (const [name, { entry, enc }] of tokenizers) {
    const s = performance.now();
    const ids = enc.encode(text);
    times[name] = performance.now() - s;
    const units = layout(text, ids, enc);
    const panel = document.querySelector(`.panel[data-name="${CSS.escape(name)}"]`);
    panel.units = units; // for the hover title, made when a token is hovered
    panel.querySelector(".tokens").innerHTML = renderUnits(units);
    const bpt = ids.length ? (nBytes / ids.length).toFixed(2) : "–";
    panel.querySelector(".stats").textContent = `${ids.length} tokens · ${bpt} bytes/token · ${units.filter((u) => u.tokens.length > 1).length} split units`;
    rows.push({ entry, tokens: ids.length, bpt, cpt: ids.length ? (nChars / ids.length).toFixed(2) : "–" });
  }
  const best = Math.min(...rows.map((r) => r.tokens));
  document.querySelector("#table tbody").innerHTML = rows
    .map(
      (r) =>
        `<tr${r.tokens === best && text ? ' class="best"' : ""}><td>${esc(r.entry.label)}</td><td>${r.entry.n_vocab.toLocaleString("en")}</td><td>${r.tokens}</td><td>${r.cpt}</td><td>${r.bpt}</td><td>${esc(r.entry.note || "")}</td></tr>`,
    )
    .join("");
  window.dwstokTimings.update_ms = performance.now() - started;
  window.dwstokTimings.encode_ms = times;
}

function vocabNote() {
  const o200k = tokenizers.get("o200k");
  const ours = [...tokenizers.values()].find((t) => t.entry.dwstok);
  if (!o200k || !ours) return "";
  const r = o200k.entry.n_vocab / ours.entry.n_vocab;
  return `Fewer tokens is better, but vocabularies differ: o200k has ${o200k.entry.n_vocab.toLocaleString("en")} ids, ${r.toFixed(1)}× the ${ours.entry.n_vocab.toLocaleString("en")} of ${ours.entry.label}.`;
}

function setup() {
  const ex = document.getElementById("examples");
  for (const [label, text] of Object.entries(EXAMPLES)) {
    const b = document.createElement("button");
    b.textContent = label;
    b.onclick = () => {
      document.getElementById("text").value = text;
      update();
    };
    ex.appendChild(b);
  }
  const modes = document.getElementById("modes");
  for (const [key, label] of Object.entries(MODES)) {
    const b = document.createElement("button");
    b.textContent = label;
    b.dataset.mode = key;
    b.className = key === mode ? "on" : "";
    b.onclick = () => window.dwstokSetMode(key);
    modes.appendChild(b);
  }
  const panels = document.getElementById("panels");
  for (const [name, { entry }] of tokenizers) {
    const div = document.createElement("section");
    div.className = "panel";
    div.dataset.name = name;
    div.addEventListener("mouseover", (ev) => {
      const span = ev.target.closest(".tok");
      if (!span || span.title) return;
      const u = div.units[+span.dataset.u];
      span.title = u.tokens.map((t) => `id ${t.id} · bytes ${hex(t.bytes) || "(prefix)"}`).join("\n");
    });
    div.innerHTML = `<h2>${esc(entry.label)} <small>${entry.n_vocab.toLocaleString("en")} ids</small></h2><div class="stats"></div><div class="tokens"></div>`;
    panels.appendChild(div);
  }
  document.getElementById("vocab-note").textContent = vocabNote();
  let pending = false;
  document.getElementById("text").addEventListener("input", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      update();
    });
  });
  document.getElementById("text").value = EXAMPLES.English;
  update();
}

window.dwstokTimings = {};
window.dwstokSetMode = (m) => {
  if (!(m in MODES)) throw new Error(`unknown mode ${m}; one of ${Object.keys(MODES)}`);
  mode = m;
  document.querySelectorAll("#modes button").forEach((b) => (b.className = b.dataset.mode === m ? "on" : ""));
  update();
};
const ready = new Promise((resolve, reject) => {
  const start = () => {
    try {
      build();
      setup();
      window.dwstokTimings.ready_ms = performance.now();
      window.dwstokTimings.scripts_ms = t0;
      window.dwstokTimings.build_ms = Object.fromEntries([...tokenizers].map(([k, v]) => [k, v.loadMs]));
      document.body.dataset.ready = "1";
      resolve();
    } catch (e) {
      document.getElementById("error").textContent = `The page could not start: ${e.message}`;
      reject(e);
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
});
window.dwstokReady = ready;
window.dwstokEncode = (name, text) =>
  ready.then(() => {
    const t = tokenizers.get(name);
    if (!t) throw new Error(`no tokenizer ${name}; this page has ${[...tokenizers.keys()].join(", ")}`);
    return t.enc.encode(text);
  });
