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
    searching: "Searching the code…", retrieval: "Found {0} places in the code that may answer",
    retrievalNone: "Found nothing in the code that matches", bestPlaces: "the best {0}",
    prompt: "Reading the best of them ({0} of the model's {1} tokens)", writing: "Writing the answer…",
    done: "Answered in {0} s", declined: "Not answered ({0} s)", refused: "refused",
    retry: "The first draft cited no code correctly; asking again",
    reason_unsafe: "the question asks to get around a security control",
    reason_vague: "the question needs to say more", reason_no_hits: "nothing in the code matches it",
    reason_score_gate: "what was found does not look like the answer",
    reason_absent_term: "a word of the question is not in the code",
    reason_no_citation: "the model cited no code", reason_no_history: "the repository has no git history",
    reason_premise: "the code contradicts the question's premise",
    reason_no_antecedent: "no earlier question says what it refers to",
    evidence: "Evidence", moreLines: "(first 20 lines; {0} more in the file view)",
    lastChange: "last changed in {0} by {1} on {2}", wholeUnit: "all {0} lines",
    answeredFrom: "from the index of commit {0}",
    indexedAt: "Answers come from the index of commit {0} (built {1} UTC).",
    behind: "HEAD has moved on to {0} since: reindex to see the newest code.",
    behindBy: "{0} commits behind HEAD ({1})", behindByOne: "1 commit behind HEAD ({0})",
    atHead: "at HEAD",
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
    searching: "正在检索代码…", retrieval: "在代码中找到 {0} 处可能相关的位置",
    retrievalNone: "代码中没有找到匹配的内容", bestPlaces: "最相关的 {0} 处",
    prompt: "正在阅读其中最相关的部分（模型窗口 {1} 个 token 中的 {0} 个）", writing: "正在撰写回答…",
    done: "已回答，用时 {0} 秒", declined: "未作回答（{0} 秒）", refused: "已拒答",
    retry: "初稿没有正确引用代码，正在重新作答",
    reason_unsafe: "问题要求绕过安全控制", reason_vague: "问题需要说得更具体",
    reason_no_hits: "代码中没有与之匹配的内容", reason_score_gate: "找到的代码看起来不是答案",
    reason_absent_term: "问题中的某个词不在代码里", reason_no_citation: "模型没有引用代码",
    reason_no_history: "该代码库没有 git 历史", reason_premise: "代码与问题的前提不符",
    reason_no_antecedent: "没有更早的问题说明它指的是什么",
    evidence: "依据", moreLines: "（前 20 行；其余 {0} 行见文件视图）",
    lastChange: "最近一次修改：{0}，{1}，{2}", wholeUnit: "全部 {0} 行",
    answeredFrom: "依据提交 {0} 的索引",
    indexedAt: "回答依据提交 {0} 的索引（构建于 {1} UTC）。",
    behind: "此后 HEAD 已前进到 {0}：重新索引即可看到最新代码。",
    behindBy: "落后 HEAD {0} 个提交（{1}）", behindByOne: "落后 HEAD 1 个提交（{0}）",
    atHead: "即 HEAD",
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
