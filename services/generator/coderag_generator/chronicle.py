"""Who/when answers (X7) from the repository's history over the units found: the commits that
changed them in the question's time window, newest first, with short hash, author, date, subject
and the changed lines; or a plain statement that no commit in the window changed them (with the
last change before it), or that the repository has no history."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from coderag.schemas import CommitFact, HistoryResponse, Hit, LineRange, RangeChange
from coderag_generator.evidence import is_doc, support
from coderag_generator.window import Window, subject

MAX_UNITS = 3
"""Units whose history one answer reports."""

MAX_COMMITS = 5
"""Commits listed when the question names no window."""

SIMILARITY_MARGIN = 0.03
"""A runner-up joins the best unit only when its similarity is this close to the best."""


NO_HISTORY = "no_history"
"""The ``reason`` of a who/when question asked of a repository without history."""


@dataclass(frozen=True)
class GitFacts:
    """What a who/when answer is built from: the units, their history, the question's window."""

    units: list[Hit]
    history: HistoryResponse
    window: Window | None


@cache
def phrases(lang: str) -> dict[str, Any]:
    """The phrases of ``prompts/chronicle_<lang>.txt``."""
    lang = lang if lang in ("en", "zh") else "en"
    path = resources.files("coderag_generator").joinpath(f"prompts/chronicle_{lang}.txt")
    return tomllib.loads(path.read_text("utf-8"))


def targets(query: str, hits: list[Hit]) -> list[Hit]:
    """The units the question is about: the best code hit, and a runner-up among the next two
    that mentions at least as much of the question and is nearly as similar."""
    code = [h for h in hits if not is_doc(h) and h.kind != "file"][:3] or hits[:1]
    if not code:
        return []
    about = subject(query)
    best = code[0]
    floor = (best.similarity or 0.0) - SIMILARITY_MARGIN
    out = [best]
    for h in code[1:]:
        if len(out) >= MAX_UNITS:
            break
        close = (h.similarity or 0.0) >= floor
        if close and support(about, h) >= max(support(about, best), 1e-9):
            out.append(h)
    return out


def ranges(units: list[Hit]) -> list[LineRange]:
    """The line ranges to ask the history of."""
    return [LineRange(file=u.file, start_line=u.start_line, end_line=u.end_line) for u in units]


def _day(iso: str) -> str:
    return iso[:10]


def _spans(spans: list[list[int]]) -> str:
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def compose(units: list[Hit], history: HistoryResponse, win: Window | None, lang: str) -> str:
    """The answer text, with one citation anchor per unit reported."""
    p = phrases(lang)
    what = p["and"].join(
        p["what"].format(symbol=u.symbol, place=f"{u.file}:{u.start_line}-{u.end_line}")
        for u in units
    )
    if not history.has_history:
        return p["no_history"].format(what=what)
    commits: dict[str, RangeChange] = {}
    where: dict[str, list[str]] = {}
    last: CommitFact | None = None
    for r in history.ranges:
        if r.last is not None and (last is None or r.last.date > last.date):
            last = r.last
        for c in r.changes:
            commits.setdefault(c.commit, c)
            changed = p["changed"].format(file=r.file, ranges=_spans(c.ranges))
            where.setdefault(c.commit, []).append(changed)
    ordered = sorted(commits.values(), key=lambda c: c.date, reverse=True)
    since = _day(win.since.isoformat()) if win and win.since else "…"
    until = win.label().split(" – ")[1] if win else "…"
    open_ended = win is not None and win.until is None
    if ordered:
        head = p["head_all"] if win is None else p["head_since" if open_ended else "head_window"]
        lines = [head.format(since=since, until=until, what=what)]
        for c in ordered[: None if win else MAX_COMMITS]:
            lines.append(
                p["item"].format(
                    commit=c.commit,
                    author=c.author,
                    date=_day(c.date),
                    summary=c.summary,
                    changed=p["join"].join(where[c.commit]),
                )
            )
    else:
        text = p["none_since" if open_ended else "none_in_window"].format(
            since=since, until=until, what=what
        )
        if last is not None:
            text += p["last_change"].format(
                commit=last.commit, author=last.author, date=_day(last.date), summary=last.summary
            )
        lines = [text]
    for u in units:
        lines.append(p["cite"].format(file=u.file, start=u.start_line, end=u.end_line))
    return "\n".join(lines)
