// A small line-by-line highlighter: comments, strings, numbers and the keywords of the parsed languages.
"use strict";
const KEYWORDS = new Set((
  "def class return if elif else for while in not and or import from as with try except finally raise " +
  "lambda yield async await pass break continue None True False self func package type struct interface " +
  "map chan go defer select case switch default var const let function new this extends implements " +
  "public private protected static final void int long boolean string fn pub impl trait enum match mut use " +
  "mod where loop null true false nil throw throws catch typeof instanceof export readonly char double float unsigned"
).split(" "));
const TOKEN = /(\/\/.*$|#.*$|\/\*.*?\*\/|--.*$)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)|(\b\d[\d_.xXa-fA-F]*\b)|([A-Za-z_][A-Za-z0-9_]*)/g;

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function highlightLine(line, language) {
  const hashComments = ["python", "ruby", "shell", "bash", "yaml", "toml"].includes(language);
  let out = "", last = 0;
  for (const m of line.matchAll(TOKEN)) {
    let cls = null;
    if (m[1] && (m[1][0] !== "#" || hashComments) && (m[1][0] !== "-" || language === "sql")) cls = "com";
    else if (m[2]) cls = "str";
    else if (m[3]) cls = "num";
    else if (m[4] && KEYWORDS.has(m[4])) cls = "kw";
    if (cls === null && m[1]) continue;
    out += escapeHtml(line.slice(last, m.index));
    out += cls ? `<span class="${cls}">${escapeHtml(m[0])}</span>` : escapeHtml(m[0]);
    last = m.index + m[0].length;
  }
  return out + escapeHtml(line.slice(last));
}

// Renders lines as numbered, highlighted spans; lines in [markFrom, markTo] are marked.
function renderCode(pre, lines, firstLine, language, markFrom, markTo) {
  pre.innerHTML = lines.map((line, i) => {
    const n = firstLine + i;
    const mark = markFrom && n >= markFrom && n <= markTo ? " mark" : "";
    return `<span class="ln${mark}" id="L${n}" data-n="${n}">${highlightLine(line, language) || " "}</span>`;
  }).join("");
}
