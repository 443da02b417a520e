// Interface text in English and Chinese; t(key) picks the current language.
"use strict";
const TEXT = {
  en: {
    repo: "Repository", token: "API token (if required)", repos: "Repositories", name: "Name",
    status: "Status", progress: "Progress", files: "Files", units: "Units", skipped: "Skipped",
    commit: "Last commit", actions: "Actions", newName: "name", newSource: "local path or git URL",
    register: "Register", search: "Search", go: "Search",
    searchPh: "what are you looking for? ( / )", ask: "Ask", send: "Ask",
    askPh: "ask about the code (Ctrl+Enter)", newSession: "New conversation", editor: "Open in editor",
    close: "Close", reindex: "Reindex", remove: "Delete", confirmDelete: "Delete repository {0} and its index?",
    noRepos: "No repository yet: register one below.", registered: "Registered {0}; indexing started.",
    reindexed: "Reindex of {0} queued.", deleted: "Deleted {0}.", results: "{0} results in {1} ms",
    noResults: "No relevant code found.", pickRepo: "Pick a ready repository first.",
    retrieval: "retrieval: {0} hits", prompt: "prompt: {0} tokens (window {1})",
    tokens: "tokens: {0}", done: "done in {0} ms", refused: "refused", retry: "retrying: no valid citation",
    error: "error: {0}", lines: "lines {0}-{1} of {2}", by: "by {0}", health: "health report",
    healthLine: "{0}: skipped {1}; vectors agree with units {2}; index at HEAD {3}",
    ref: "Branch or tag", refs: "Branches and tags", defaultBranch: "default branch", filling: "vectors…",
  },
  zh: {
    repo: "代码库", token: "API 令牌（如需要）", repos: "代码库", name: "名称",
    status: "状态", progress: "进度", files: "文件", units: "单元", skipped: "跳过",
    commit: "最近提交", actions: "操作", newName: "名称", newSource: "本地路径或 git 地址",
    register: "注册", search: "搜索", go: "搜索",
    searchPh: "要找什么代码？（/）", ask: "提问", send: "提问",
    askPh: "关于代码的问题（Ctrl+Enter）", newSession: "新对话", editor: "在编辑器中打开",
    close: "关闭", reindex: "重新索引", remove: "删除", confirmDelete: "删除代码库 {0} 及其索引？",
    noRepos: "还没有代码库：请在下方注册。", registered: "已注册 {0}，开始索引。",
    reindexed: "{0} 已加入重新索引队列。", deleted: "已删除 {0}。", results: "{0} 条结果，用时 {1} 毫秒",
    noResults: "没有找到相关代码。", pickRepo: "请先选择一个已就绪的代码库。",
    retrieval: "检索：{0} 条命中", prompt: "提示词：{0} 个 token（窗口 {1}）",
    tokens: "生成：{0} 个片段", done: "完成，用时 {0} 毫秒", refused: "已拒答", retry: "重试：引用无效",
    error: "错误：{0}", lines: "第 {0}-{1} 行，共 {2} 行", by: "作者 {0}", health: "健康报告",
    healthLine: "{0}：跳过 {1}；向量与单元一致 {2}；索引为最新提交 {3}",
    ref: "分支或标签", refs: "分支和标签", defaultBranch: "默认分支", filling: "向量生成中…",
  },
};
let LANG = localStorage.getItem("coderag.lang") ||
  ((navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en");

function t(key, ...args) {
  const s = (TEXT[LANG] && TEXT[LANG][key]) || TEXT.en[key] || key;
  return s.replace(/\{(\d)\}/g, (_, i) => String(args[Number(i)]));
}

function applyLang() {
  document.documentElement.lang = LANG === "zh" ? "zh-CN" : "en";
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-ph]")) el.placeholder = t(el.dataset.i18nPh);
  document.getElementById("lang").textContent = LANG === "zh" ? "English" : "中文";
}
