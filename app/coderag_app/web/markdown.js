// A small Markdown renderer for answers: fenced code, headings, lists, quotes, paragraphs, inline
// code, bold and links. It builds DOM nodes and sets text, never HTML from the answer, so nothing
// the answer holds can become markup or script; code is highlighted by highlight.js, which escapes.
"use strict";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^(\s*)[-*+]\s+(.*)$/;
const NUMBERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
// inline code (any run of backticks), **bold**, __bold__, [text](url)
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__|\[([^\]\n]+)\]\(([^)\s]+)\)/g;
// a citation just before a fence numbers the quoted lines from its start
const ANCHOR_END = /([\w.\/@+-]+):(\d+)\s*-\s*(\d+)`?\s*$/;
const LANGUAGES = { py: "python", js: "javascript", mjs: "javascript", ts: "typescript", tsx: "typescript",
  go: "go", rs: "rust", java: "java", rb: "ruby", sh: "shell", sql: "sql", c: "c", h: "c", cpp: "cpp",
  cs: "csharp", kt: "kotlin", toml: "toml", yml: "yaml", yaml: "yaml" };

function mdNode(tag, cls, children) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const c of children || []) e.append(c);
  return e;
}

// Only web and page-relative links are followed; anything else (javascript:, data:) stays text.
function safeHref(url) {
  return /^(https?:\/\/|\/(?!\/)|#)/i.test(url) ? url : null;
}

// Inline Markdown of one run of text; plain runs go through `text` (which links citations).
function inlineNodes(src, text) {
  const out = [];
  let last = 0;
  for (const m of src.matchAll(INLINE)) {
    if (m.index > last) out.push(...text(src.slice(last, m.index)));
    if (m[1]) {
      const body = m[2].length > 1 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2];
      out.push(mdNode("code", null, text(body)));
    } else if (m[3] || m[4]) out.push(mdNode("strong", null, inlineNodes(m[3] || m[4], text)));
    else {
      const href = safeHref(m[6]);
      if (href) {
        const a = mdNode("a", null, inlineNodes(m[5], text));
        a.href = href;
        a.rel = "noopener noreferrer";
        out.push(a);
      } else out.push(...text(m[0]));
    }
    last = m.index + m[0].length;
  }
  if (last < src.length) out.push(...text(src.slice(last)));
  return out;
}

// Lines of a paragraph, each rendered inline, with line breaks kept (answers use them).
function paragraph(lines, text) {
  const p = mdNode("p");
  lines.forEach((line, i) => {
    if (i) p.append(document.createElement("br"));
    p.append(...inlineNodes(line.trim(), text));
  });
  return p;
}

function codeBlock(lines, lang, anchor) {
  const pre = mdNode("pre", "code md-code");
  const start = anchor && Number(anchor[3]) - Number(anchor[2]) + 1 === lines.length ? Number(anchor[2]) : 1;
  const ext = anchor ? anchor[1].split(".").pop().toLowerCase() : "";
  const language = (lang || LANGUAGES[ext] || ext || "").toLowerCase();
  if (typeof renderCode === "function") renderCode(pre, lines, start, language);
  else pre.textContent = lines.join("\n");
  if (!anchor || start === 1 && Number(anchor[2]) !== 1) pre.classList.add("no-numbers");
  return pre;
}

// Renders `src` as Markdown into `node`; `text(run)` returns the nodes of a plain text run.
function renderMarkdown(node, src, text = (s) => [s]) {
  node.replaceChildren(...markdownBlocks(String(src).replace(/\r\n?/g, "\n").split("\n"), text));
}

function markdownBlocks(lines, text) {
  const out = [];
  let para = [];
  const flush = () => { if (para.length) { out.push(paragraph(para, text)); para = []; } };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m;
    if ((m = line.match(FENCE))) {
      const close = new RegExp("^ {0,3}" + m[1][0] + "{" + m[1].length + ",}\\s*$");
      const body = [];
      for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i]);
      const before = para.length ? para[para.length - 1] : "";
      flush();
      out.push(codeBlock(body, m[2], before.match(ANCHOR_END)));
    } else if (!line.trim()) flush();
    else if ((m = line.match(HEADING))) {
      flush();
      out.push(mdNode("h" + Math.min(6, m[1].length + 2), "md-h", inlineNodes(m[2], text)));
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      flush();
      const ordered = !BULLET.test(line);
      const list = mdNode(ordered ? "ol" : "ul");
      const first = line.match(NUMBERED);
      if (ordered && first[2] !== "1") list.start = Number(first[2]);
      let item = null;
      for (; i < lines.length; i++) {
        const b = lines[i].match(BULLET), n = lines[i].match(NUMBERED);
        const hit = ordered ? n : b;
        if (hit) {
          item = mdNode("li", null, inlineNodes(ordered ? hit[3] : hit[2], text));
          list.append(item);
        } else if (lines[i].trim() && /^\s+/.test(lines[i]) && item && !FENCE.test(lines[i])) {
          item.append(document.createElement("br"), ...inlineNodes(lines[i].trim(), text));
        } else break;
      }
      i--;
      out.push(list);
    } else if (QUOTE.test(line)) {
      flush();
      const quoted = [];
      for (; i < lines.length && (m = lines[i].match(QUOTE)); i++) quoted.push(m[1]);
      i--;
      out.push(mdNode("blockquote", null, markdownBlocks(quoted, text)));
    } else para.push(line);
  }
  flush();
  return out;
}
