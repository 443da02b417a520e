// The coderag page: repositories, search, chat over server-sent events, and a file view.
"use strict";
const $ = (sel) => document.querySelector(sel);
const state = { repos: [], session: newSessionId(), poll: null, health: {} };

function newSessionId() {
  return "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);
}

function headers(json = true) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  const token = $("#token").value.trim();
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function api(method, path, body) {
  const r = await fetch(path, { method, headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => ({ detail: r.statusText }));
  if (!r.ok) throw new Error(typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail));
  return data;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else if (v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function currentRepo() { return $("#repo-select").value; }
function repoInfo(name) { return state.repos.find((r) => r.name === name); }
// "" is the repository's own branch: requests then carry no ref
function currentRef() { return $("#ref-select").value; }
const withRef = (ref, fields) => (ref ? { ...fields, ref } : fields);
// the page URL: repo, ref when one is picked, then the rest (q, or file, start and end)
const pageUrl = (repo, ref, rest = {}) => "/?" + new URLSearchParams({ repo, ...withRef(ref, {}), ...rest });

// ready but not complete: keyword search works while vectors fill in
const stateOf = (r) => (r.status === "ready" && r.complete === false ? "filling" : r.status);
const busy = (r) => ["queued", "indexing", "filling"].includes(stateOf(r));

// The ref picker: the repository's own branch, then each ref with its state when not ready.
function fillRefs(keep) {
  const repo = currentRepo(), info = repoInfo(repo), refs = (info && info.refs) || [], select = $("#ref-select");
  select.replaceChildren(el("option", { value: "" }, (info && info.branch) || t("defaultBranch")),
    ...refs.map((x) => el("option", { value: x.ref, "data-status": stateOf(x) }, x.ref +
      (stateOf(x) === "ready" ? "" : ` (${stateOf(x) === "filling" ? t("filling") : x.status}${x.error ? ": " + x.error : ""})`))));
  select.value = keep && refs.some((x) => x.ref === keep) ? keep : "";
  state.refsOf = repo;
  $("#freshness").textContent = freshnessLine(repo, currentRef());
  // HEAD is asked once per indexed commit (health walks the tree), never while it indexes
  const known = state.health[repo];
  if (info && info.commit && info.status === "ready" && (known === undefined || (known && known.seen !== info.commit))) loadHealth(repo, info.commit);
}

// ---- repositories ----
async function loadRepos() {
  try { state.repos = await api("GET", "/repos"); } catch (e) { $("#repo-msg").textContent = t("error", e.message); return; }
  const rows = $("#repo-rows");
  rows.replaceChildren();
  if (!state.repos.length) rows.append(el("tr", {}, el("td", { colspan: "9" }, t("noRepos"))));
  for (const r of state.repos) {
    rows.append(el("tr", { "data-repo": r.name },
      el("td", {}, r.name),
      el("td", { class: "status-" + r.status, "data-status": stateOf(r) },
        r.status + (stateOf(r) === "filling" ? ` (${t("filling")})` : "") + (r.error ? ": " + r.error : "")),
      el("td", {}, r.progress || ""),
      el("td", {}, String(r.files)), el("td", {}, String(r.units)),
      el("td", {}, el("button", { type: "button", class: "link skipped", title: t("health"),
        onclick: () => showHealth(r.name) }, String(r.skipped))),
      el("td", { title: r.indexed_at || "" }, (r.commit || "-").slice(0, 10)),
      el("td", { class: "refs" }, (r.refs || []).map((x) => x.ref).join(", ") || "-"),
      el("td", {},
        el("button", { type: "button", class: "reindex", onclick: () => reindex(r.name) }, t("reindex")), " ",
        el("button", { type: "button", class: "danger delete", onclick: () => removeRepo(r.name) }, t("remove")))));
  }
  const select = $("#repo-select"), keep = select.value || new URLSearchParams(location.search).get("repo");
  select.replaceChildren(...state.repos.map((r) => el("option", { value: r.name }, r.name)));
  if (keep && repoInfo(keep)) select.value = keep;
  // the first load takes the URL's ref; later ones keep the pick while the repository stays
  fillRefs(state.refsOf === undefined ? new URLSearchParams(location.search).get("ref")
    : state.refsOf === currentRepo() ? currentRef() : "");
  clearTimeout(state.poll);
  if (state.repos.some((r) => busy(r) || (r.refs || []).some(busy))) state.poll = setTimeout(loadRepos, 1500);
}

async function showHealth(name) {
  const msg = $("#repo-msg");
  try {
    const h = await api("GET", `/repos/${encodeURIComponent(name)}/health`);
    const reasons = Object.entries(h.skipped).map(([k, v]) => `${k} ${v}`).join(", ") || "-";
    msg.textContent = t("healthLine", name, reasons, h.vectors_agree ? "✓" : "✗", h.up_to_date ? "✓" : "✗") +
      (h.problems.length ? " — " + h.problems.join("; ") : "");
  } catch (e) { msg.textContent = t("error", e.message); }
}

async function reindex(name) {
  delete state.health[name];
  try { await api("POST", `/repos/${encodeURIComponent(name)}/reindex`); $("#repo-msg").textContent = t("reindexed", name); }
  catch (e) { $("#repo-msg").textContent = t("error", e.message); }
  loadRepos();
}

async function removeRepo(name) {
  if (!confirm(t("confirmDelete", name))) return;
  try { await api("DELETE", `/repos/${encodeURIComponent(name)}`); $("#repo-msg").textContent = t("deleted", name); }
  catch (e) { $("#repo-msg").textContent = t("error", e.message); }
  loadRepos();
}

$("#register").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, source = f.source.value.trim();
  const isUrl = /^(https?|ssh|file):\/\/|^git@/.test(source);
  const body = { name: f.name.value.trim(), [isUrl ? "url" : "path"]: source };
  try { await api("POST", "/repos", body); $("#repo-msg").textContent = t("registered", body.name); f.reset(); }
  catch (e) { $("#repo-msg").textContent = t("error", e.message); }
  await loadRepos();
  $("#repo-select").value = body.name;
  fillRefs("");
});
$("#repo-select").addEventListener("change", () => fillRefs(""));
$("#ref-select").addEventListener("change", () => { $("#freshness").textContent = freshnessLine(currentRepo(), currentRef()); });

// ---- search ----
function fileLink(repo, ref, file, start, end, label) {
  return el("a", { href: pageUrl(repo, ref, { file, start, end }), class: "file-link", "data-file": file, "data-start": start,
    "data-end": end, onclick: (ev) => { ev.preventDefault(); openFile(repo, ref, file, start, end); } }, label || `${file}:${start}-${end}`);
}

async function search(q, push = true) {
  const repo = currentRepo(), ref = currentRef();
  if (!repo) { $("#search-msg").textContent = t("pickRepo"); return; }
  if (push) history.pushState(null, "", pageUrl(repo, ref, { q }));
  $("#search-msg").textContent = "…";
  const list = $("#results");
  list.replaceChildren();
  let data;
  try { data = await api("POST", "/search", withRef(ref, { query: q, repo, top_k: 10 })); }
  catch (e) { $("#search-msg").textContent = t("error", e.message); return; }
  $("#search-msg").textContent = data.results.length ? t("results", data.results.length, data.took_ms) : t("noResults");
  for (const h of data.results) {
    const pre = el("pre", { class: "code" });
    list.append(el("li", { class: "hit" },
      el("div", { class: "hit-head" }, fileLink(repo, ref, h.file, h.start_line, h.end_line),
        el("span", { class: "symbol" }, h.symbol),
        el("span", { class: "meta" }, `${h.kind} · ${h.language}` + (h.last_commit ? ` · ${h.last_commit.slice(0, 8)}` : "") +
          (h.last_author ? " · " + t("by", h.last_author) : ""))),
      pre));
    showSnippet(pre, repo, ref, h, q);
  }
}

// A hit's snippet opens at the lines that answer: the SNIPPET_LINES of the unit that hold most
// of the query's words (its head when none does), those lines marked; the rest is a click away.
const SNIPPET_LINES = 15;
const STOP = new Set("the and for are how what where when who which does did this that with from into its not can".split(" "));
const queryWords = (q) => [...new Set((q.toLowerCase().match(/[\p{L}\p{N}_]{3,}/gu) || []))].filter((w) => !STOP.has(w));

function bestWindow(lines, words, size) {
  if (lines.length <= size || !words.length) return [0, Math.min(lines.length, size)];
  const score = lines.map((line) => { const l = line.toLowerCase(); return words.filter((w) => l.includes(w)).length; });
  let best = 0, bestSum = -1, sum = 0;
  for (let i = 0; i < lines.length; i++) {
    sum += score[i] - (i >= size ? score[i - size] : 0);
    if (i >= size - 1 && sum > bestSum) { bestSum = sum; best = i - size + 1; }
  }
  return bestSum > 0 ? [best, best + size] : [0, size];
}

async function showSnippet(pre, repo, ref, h, q = "") {
  const end = Math.min(h.end_line, h.start_line + 399);
  try {
    const r = await api("GET", `/repos/${encodeURIComponent(repo)}/file?` + new URLSearchParams(withRef(ref, { path: h.file, start: h.start_line, end })));
    const words = queryWords(q), [a, b] = bestWindow(r.lines, words, SNIPPET_LINES);
    const shown = r.lines.slice(a, b), first = r.start_line + a;
    // mark the lines holding most of the query's words, not every line with one of them
    const counts = shown.map((line) => words.filter((w) => line.toLowerCase().includes(w)).length);
    const top = Math.max(0, ...counts);
    const hits = top ? counts.map((c, i) => (c === top ? first + i : 0)).filter(Boolean) : [];
    renderCode(pre, shown, first, r.language);
    for (const n of hits) { const ln = pre.querySelector(`[data-n="${n}"]`); if (ln) ln.classList.add("mark"); }
    pre.dataset.first = first;
    if (h.end_line - h.start_line + 1 > shown.length) {
      pre.after(el("div", { class: "snippet-more" }, fileLink(repo, ref, h.file, h.start_line, h.end_line,
        t("wholeUnit", h.end_line - h.start_line + 1))));
    }
  } catch (e) { pre.textContent = e.message; }
}

$("#search-form").addEventListener("submit", (ev) => { ev.preventDefault(); search($("#q").value.trim()); });

// ---- file view ----
async function openFile(repo, ref, file, start, end, push = true) {
  start = Number(start); end = Number(end);
  if (push) history.pushState(null, "", pageUrl(repo, ref, { file, start, end }));
  const dlg = $("#file-view"), pre = $("#file-code"), where = repo + (ref ? "@" + ref : "");
  $("#file-title").textContent = `${where}: ${file}:${start}-${end}`;
  pre.textContent = "…";
  if (!dlg.open) dlg.showModal();
  let r;
  try { r = await api("GET", `/repos/${encodeURIComponent(repo)}/file?` + new URLSearchParams(withRef(ref, { path: file }))); }
  catch (e) { pre.textContent = e.message; return; }
  renderCode(pre, r.lines, r.start_line, r.language, start, end);
  $("#file-title").textContent = `${where}: ${file}:${start}-${end} (${t("lines", start, end, r.total_lines)})`;
  const editor = $("#file-editor");
  editor.hidden = !r.local_path;
  if (r.local_path) editor.href = "vscode://file" + encodeURI(r.local_path.startsWith("/") ? r.local_path : "/" + r.local_path) + ":" + start;
  const target = pre.querySelector(`[data-n="${start}"]`);
  if (target) target.scrollIntoView({ block: "center" });
  pre.focus();
}

$("#file-close").addEventListener("click", () => $("#file-view").close());
$("#file-view").addEventListener("close", () => {
  const p = new URLSearchParams(location.search);
  if (p.has("file")) history.pushState(null, "", pageUrl(p.get("repo"), p.get("ref"), p.get("q") ? { q: p.get("q") } : {}));
});

// ---- chat ----
const CITATION = /(?:FILE:\s*)?([\w.\/@+-]+\.[\w]+|[\w.\/@+-]+):(\d+)-(\d+)/g;

// The nodes of a plain run of answer text: each citation a link that opens the file view there,
// and, on the repository's own branch of a local repository, a link into the editor beside it.
function linkCitations(text, repo, ref) {
  const out = [], info = repoInfo(repo);
  let last = 0;
  for (const m of text.matchAll(CITATION)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(fileLink(repo, ref, m[1], m[2], m[3], m[0]));
    if (info && info.path && !ref) {  // the working tree holds the repository's own branch
      const path = info.path.replace(/\/$/, "") + "/" + m[1];
      out.push(" ", el("a", { href: "vscode://file" + encodeURI(path) + ":" + m[2], class: "editor-link", title: t("editor") }, "↗"));
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function renderAnswer(node, text, repo, ref) {
  renderMarkdown(node, text, (run) => linkCitations(run, repo, ref));
}

// Citations whose lines the answer does not quote in a code block get a snippet of those lines
// below it (at most EVIDENCE_LINES, the rest one click away in the file view).
const EVIDENCE_LINES = 20;
function showEvidence(box, answerNode, citations, repo, ref) {
  const quoted = new Set([...answerNode.querySelectorAll("pre.md-code")].map((pre) => {
    const prev = pre.previousElementSibling, links = prev ? prev.querySelectorAll("a.file-link") : [];
    const a = links[links.length - 1];
    return a ? `${a.dataset.file}:${a.dataset.start}-${a.dataset.end}` : "";
  }));
  const rest = citations.filter((c) => !quoted.has(`${c.file}:${c.start_line}-${c.end_line}`)).slice(0, 5);
  box.replaceChildren();
  box.hidden = !rest.length;
  if (!rest.length) return;
  box.append(el("h3", {}, t("evidence")));
  for (const c of rest) {
    const pre = el("pre", { class: "code" }), shown = Math.min(c.end_line, c.start_line + EVIDENCE_LINES - 1);
    const more = c.end_line > shown ? " " + t("moreLines", c.end_line - shown) : "";
    box.append(el("div", { class: "evidence-item" },
      el("div", { class: "hit-head" }, fileLink(repo, ref, c.file, c.start_line, c.end_line),
        el("span", { class: "meta" }, (c.last_commit ? t("lastChange", c.last_commit.slice(0, 8), c.last_author || "?",
          (c.last_date || "").slice(0, 10)) : "") + more)),
      pre));
    api("GET", `/repos/${encodeURIComponent(repo)}/file?` + new URLSearchParams(withRef(ref, { path: c.file, start: c.start_line, end: shown })))
      .then((r) => renderCode(pre, r.lines, r.start_line, r.language))  // all cited: no marks
      .catch((e) => { pre.textContent = e.message; });
  }
}

// Why an answer was decided without the model or refused, in words (AskResponse.reason).
function reasonWords(reason) {
  const key = "reason_" + reason;
  return reason && t(key) !== key ? t(key) : "";
}

const seconds = (ms) => (ms / 1000).toFixed(ms < 10000 ? 1 : 0);

async function ask(question) {
  const repo = currentRepo(), ref = currentRef();
  if (!repo) return;
  const stages = el("ul", { class: "stages" }), answer = el("div", { class: "answer" });
  const evidence = el("div", { class: "evidence", hidden: "" });
  const turn = el("div", { class: "turn" }, el("div", { class: "q" }, question), stages, answer, evidence);
  $("#turns").append(turn);
  const stage = (text, cls) => { const li = el("li", { class: cls }, text); stages.append(li); return li; };
  let writing = null, streamed = "", found = 0;
  const searching = stage(t("searching"), "stage-search");
  const r = await fetch("/ask", { method: "POST", headers: { ...headers(), Accept: "text/event-stream" },
    body: JSON.stringify(withRef(ref, { query: question, repo, session_id: state.session })) });
  if (!r.ok) { const d = await r.json().catch(() => ({})); searching.remove(); stage(t("error", d.detail || r.statusText), "error"); return; }
  const reader = r.body.getReader(), decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
      const name = (block.match(/^event: (.*)$/m) || [])[1];
      const data = JSON.parse((block.match(/^data: (.*)$/m) || [, "{}"])[1]);
      if (name === "retrieval") {
        searching.remove();
        found = data.results.length;
        const li = stage(found ? t("retrieval", found) : t("retrievalNone"), "stage-retrieval");
        const hits = el("ol", {});
        for (const h of data.results.slice(0, 5)) hits.append(el("li", {}, fileLink(repo, ref, h.file, h.start_line, h.end_line), " " + h.symbol));
        if (found) li.append(el("details", {}, el("summary", {}, t("bestPlaces", Math.min(5, found))), hits));
      } else if (name === "prompt") stage(t("prompt", data.input_tokens, data.window), "stage-prompt");
      else if (name === "retry") { stage(t("retry"), "stage-retry"); streamed = ""; }
      else if (name === "token") {
        streamed += data.text;
        writing = writing || stage(t("writing"), "stage-writing");
        renderAnswer(answer, streamed, repo, ref);
      } else if (name === "done") {
        if (writing) writing.remove();
        searching.remove();
        const why = reasonWords(data.reason);
        const head = data.refused ? t("declined", seconds(data.took_ms)) : t("done", seconds(data.took_ms));
        const done = stage(head + (why ? " — " + why : ""), "stage-done" + (data.refused ? " refused" : ""));
        const source = answerFreshness(data.freshness) || freshnessLine(repo, ref, true);
        if (source) done.append(el("span", { class: "freshness" }, " · " + source));
        answer.classList.toggle("refused", data.refused);
        renderAnswer(answer, data.answer, repo, ref);
        showEvidence(evidence, answer, data.citations || [], repo, ref);
      } else if (name === "error") stage(t("error", data.detail), "error");
    }
  }
  turn.scrollIntoView({ block: "nearest" });
}

// Which commit the index answers from, and whether HEAD has moved since (GET /repos/NAME/health);
// `short` for an answer's stage line.
function freshnessLine(repo, ref, short = false) {
  const info = repoInfo(repo), health = state.health[repo];
  const target = ref ? ((info && info.refs) || []).find((x) => x.ref === ref) : info;
  const commit = target && target.commit;
  if (!commit) return "";
  let line = short ? t("answeredFrom", commit.slice(0, 8))
    : t("indexedAt", commit.slice(0, 8), (target.indexed_at || "").slice(0, 16).replace("T", " "));
  const head = health && health.head_commit;
  if (!ref && head && !head.startsWith(commit) && !commit.startsWith(head)) line += " " + t("behind", head.slice(0, 8));
  return line;
}

// The answer's own freshness (the done event's `freshness`): its commit, and how far HEAD has
// moved since, counted by the server.
function answerFreshness(fresh) {
  if (!fresh || !fresh.indexed_commit) return "";
  let line = t("answeredFrom", fresh.indexed_commit.slice(0, 8));
  const n = fresh.commits_behind, head = (fresh.head_commit || "").slice(0, 8);
  if (n === 0) line += " (" + t("atHead") + ")";
  else if (n === 1) line += ", " + t("behindByOne", head);
  else if (n > 1) line += ", " + t("behindBy", n, head);
  return line;
}

async function loadHealth(repo, commit) {
  state.health[repo] = null;  // one request at a time
  try { state.health[repo] = { ...(await api("GET", `/repos/${encodeURIComponent(repo)}/health`)), seen: commit }; }
  catch (e) { state.health[repo] = { seen: commit }; }
  $("#freshness").textContent = freshnessLine(currentRepo(), currentRef());
}

$("#ask-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("#question").value.trim();
  if (q) { $("#question").value = ""; ask(q); }
});
$("#question").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); $("#ask-form").requestSubmit(); }
});
$("#new-session").addEventListener("click", () => { state.session = newSessionId(); $("#turns").replaceChildren(); });

// ---- page ----
$("#lang").addEventListener("click", () => {
  LANG = LANG === "zh" ? "en" : "zh"; localStorage.setItem("coderag.lang", LANG); applyLang(); loadRepos();
});
$("#token").value = sessionStorage.getItem("coderag.token") || "";
$("#token").addEventListener("change", () => { sessionStorage.setItem("coderag.token", $("#token").value); loadRepos(); });
document.addEventListener("keydown", (ev) => {
  const typing = /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
  if (ev.key === "/" && !typing) { ev.preventDefault(); $("#q").focus(); }
});

async function route() {
  const p = new URLSearchParams(location.search);
  if (p.get("repo") && repoInfo(p.get("repo"))) { $("#repo-select").value = p.get("repo"); fillRefs(p.get("ref")); }
  if (p.get("q")) { $("#q").value = p.get("q"); await search(p.get("q"), false); }
  if (p.get("file")) openFile(p.get("repo"), p.get("ref") || "", p.get("file"), p.get("start") || 1, p.get("end") || p.get("start") || 1, false);
  else if ($("#file-view").open) $("#file-view").close();
}
window.addEventListener("popstate", route);

applyLang();
loadRepos().then(route);
