"""Who/when questions and their time window, in English and Chinese: "who changed the retry logic
last month?", "上个月谁改过超时逻辑？", "when was parse_args last modified?", "what changed in
the last 2 weeks in the cache?". Windows are half-open ``[since, until)`` in UTC, calendar based
("last month" is the previous calendar month, "last week" the previous Monday-to-Sunday week)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_PAST = (
    r"(?:changed|modified|touched|edited|updated|rewrote|rewritten|wrote|written|added|"
    r"introduced|removed|deleted|refactored|fixed|committed|last)"
)
_HISTORY = re.compile(
    rf"\bwho\b.{{0,60}}\b{_PAST}\b|"
    rf"\bwhen\s+(?:was|were|did|has|have|had)\b.{{0,60}}\b(?:{_PAST}|change|modify|add|"
    r"introduce|remove|touch|edit|update|fix)\b|"
    r"\blast\s+(?:modified|changed|touched|edited|updated)\b|\bwhich\s+commits?\b|"
    r"\bwhat\s+(?:commits?|changed)\b|\bgit\s+(?:history|blame|log)\b|"
    r"\bhistory\s+of\b|\bchange\s+history\b|"
    r"谁.{0,12}(?:改|修改|动过|写|提交|加|删|重构|修复)|(?:什么时候|何时|哪天|哪一天|何日).{0,12}"
    r"(?:改|修改|加|引入|提交|删|重构|修复|动)|最后一次(?:修改|改动|提交|变更)|最近一次(?:修改|改动|提交)|"
    r"哪(?:个|些|次)提交|提交记录|改了哪几处|修改记录|变更记录|历史记录",
    re.IGNORECASE,
)
_HISTORY_WORDS = re.compile(
    r"\b(?:who|when|whom|which|what|did|was|were|has|have|had|last|recently|commits?|"
    r"changed|changes?|modified|modify|touched|edited|updated|rewrote|wrote|written|added|"
    r"introduced|removed|refactored|fixed|history|git|blame|log|and|where|how|many|places?|"
    r"the|in|on|of|during|since|before|between|it|to|ago|this|past|previous|days?|weeks?|"
    r"months?|years?|today|yesterday|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|\d+)\b|被|是|谁|什么时候|何时|哪天|上个?月|本月|这个月|上周|本周|这周|"
    r"上星期|昨天|今天|今年|去年|最近|最后一次|改过|改了|修改过|修改了|修改|改动|提交|哪几处|哪些|"
    r"哪个|在哪里|以来|之前|以后|之后|天|周|个月|年|内|过|了|的|？|\?",
    re.IGNORECASE,
)
_PATH = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]*|[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|"
    r"java|kt|c|h|cc|cpp|hpp|cs|rb|php|swift|scala|sh|sql|md|rst|txt|toml|ya?ml|json|cfg|ini))"
    r"(?![\w/])",
    re.IGNORECASE,
)
"""A path the question names: one with a folder (``src/foo.py``, ``starlette/middleware/``) or a
file name with a source or text extension (``cors.py``)."""
_N = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|一|两|二|三|四|五|六|七|八|九|十)"
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5,
    "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
}  # fmt: skip
_UNIT_DAYS = {"day": 1, "天": 1, "week": 7, "周": 7, "星期": 7, "month": 30, "个月": 30, "月": 30,
              "year": 365, "年": 365}  # fmt: skip
_RELATIVE = re.compile(
    rf"\b(?:in\s+the\s+|over\s+the\s+|during\s+the\s+|within\s+the\s+)?(?:last|past)\s+{_N}\s+"
    r"(day|week|month|year)s?\b|\b" + _N + r"\s+(day|week|month|year)s?\s+ago\b|"
    rf"(?:最近|过去|近){_N}\s*(天|周|星期|个月|年)|{_N}\s*(天|周|个月|年)(?:内|以来)",
    re.IGNORECASE,
)
_DATE = re.compile(r"(\d{4})-(\d{1,2})(?:-(\d{1,2}))?|(\d{4})\s*年\s*(\d{1,2})\s*月")
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), 1)}
_MONTH_NAME = re.compile(r"\b(?:in\s+)?(" + "|".join(_MONTHS) + r")(?:\s+(\d{4}))?\b", re.I)


@dataclass(frozen=True)
class Window:
    """A time window ``[since, until)``; either end may be open."""

    since: datetime | None
    until: datetime | None

    def label(self) -> str:
        """``2026-10-01 – 2026-10-31`` (the last day included), for answers."""
        a = self.since.strftime("%Y-%m-%d") if self.since else "…"
        b = (self.until - timedelta(days=1)).strftime("%Y-%m-%d") if self.until else "…"
        return f"{a} – {b}"


def is_history_question(query: str) -> bool:
    """Whether the question asks who changed something or when."""
    return bool(_HISTORY.search(query))


_ORIGIN = re.compile(
    r"\b(?:who|when)\b.{0,60}\b(?:added|introduced|created|wrote|written|first)\b|"
    r"\b(?:was|were)\b.{0,60}\b(?:added|introduced|created)\b|\bfirst\s+(?:added|introduced)\b|"
    r"谁.{0,12}(?:添加|加入|加了|引入|创建|新增|最早写)|"
    r"(?:什么时候|何时|哪天|哪一天).{0,12}(?:添加|加入|加的|引入|创建|新增)",
    re.IGNORECASE,
)
_LATEST = re.compile(r"\blast\b|\blatest\b|\brecent|最近|最后", re.IGNORECASE)


def asks_origin(query: str) -> bool:
    """Whether a who/when question asks who added (introduced, created) something, whose answer
    is its oldest commit, rather than who changed it last."""
    return bool(_ORIGIN.search(query)) and not _LATEST.search(query)


def _month(year: int, month: int) -> Window:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return Window(start, end)


def _day(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def window(query: str, now: datetime) -> Window | None:
    """The time window the question names, or None when it names none."""
    q = query.lower()
    today = _day(now)
    first = today.replace(day=1)
    monday = today - timedelta(days=today.weekday())
    if re.search(r"\blast\s+month\b|\bprevious\s+month\b|上个?月", q):
        prev = first - timedelta(days=1)
        return _month(prev.year, prev.month)
    if re.search(r"\bthis\s+month\b|本月|这个月", q):
        return Window(first, None)
    if re.search(r"\blast\s+week\b|\bprevious\s+week\b|上周|上星期|上个星期", q):
        return Window(monday - timedelta(days=7), monday)
    if re.search(r"\bthis\s+week\b|本周|这周|这个星期", q):
        return Window(monday, None)
    if re.search(r"\byesterday\b|昨天", q):
        return Window(today - timedelta(days=1), today)
    if re.search(r"\btoday\b|今天", q):
        return Window(today, None)
    if re.search(r"\blast\s+year\b|去年", q):
        return Window(
            datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC)
        )
    if re.search(r"\bthis\s+year\b|今年", q):
        return Window(datetime(today.year, 1, 1, tzinfo=UTC), None)
    if m := _RELATIVE.search(q):
        groups = [g for g in m.groups() if g]
        count, unit = _NUMBERS.get(groups[0]) or int(groups[0]), groups[1]
        return Window(now.astimezone(UTC) - timedelta(days=count * _UNIT_DAYS[unit]), None)
    if m := _DATE.search(q):
        year, month = int(m.group(1) or m.group(4)), int(m.group(2) or m.group(5))
        if m.group(3):
            day = datetime(year, month, int(m.group(3)), tzinfo=UTC)
            if re.search(r"\bsince\b|以来|之后|以后", q):
                return Window(day, None)
            if re.search(r"\bbefore\b|之前|以前", q):
                return Window(None, day)
            return Window(day, day + timedelta(days=1))
        return _month(year, month)
    if m := _MONTH_NAME.search(q):
        month = _MONTHS[m.group(1).lower()]
        year = int(m.group(2)) if m.group(2) else today.year - (month > today.month)
        return _month(year, month)
    if re.search(r"\brecently\b|\blately\b|最近|近期", q):
        return Window(now.astimezone(UTC) - timedelta(days=30), None)
    return None


def named_paths(query: str) -> list[str]:
    """The paths the question names, as written (a trailing ``/`` and ``./`` dropped)."""
    out: list[str] = []
    for m in _PATH.finditer(query):
        path = m.group(1).rstrip("/.").removeprefix("./")
        if path.startswith(("http:", "https:")) or not path.strip("/."):
            continue
        if path not in out:
            out.append(path)
    return out


def subject(query: str) -> str:
    """The question without its who/when and time words: what to search the code for; a path it
    names is kept whole ("src/history/log.py" keeps its "history" and "log")."""
    paths = named_paths(query)
    rest = _PATH.sub(" ", query) if paths else query
    rest = _DATE.sub(" ", _RELATIVE.sub(" ", rest))
    rest = _HISTORY_WORDS.sub(" ", rest)
    rest = " ".join([*paths, rest])
    rest = " ".join(rest.split())
    return rest if len(rest) >= 3 else query
