"""Contradicted premises (seed 004 type C): a question that asks to confirm a claim about a unit
("`X` calls `Y`, right?", "X 会抛出异常，对吗？", "X both raises and exits, right?") is checked
against the retrieved unit's own code and facts; when they contradict the claim the answer says
so and cites the unit, whatever the backend. A claim the code bears out goes on to the backend."""

from __future__ import annotations

import re

from coderag.schemas import Hit
from coderag_generator.evidence import Quote, quotes
from coderag_generator.explain import phrases, render_quotes

_CONFIRM = re.compile(
    r"(?:right|correct|true|isn't it|doesn't it|don't they|yes)\s*[?？]\s*$|"
    r"(?:对吗|是吗|是不是|对不对|没错吧|是这样吗)\s*[？?]?\s*$",
    re.IGNORECASE,
)
_NAME = r"`?([A-Za-z_][\w.]*)`?(?:\(\))?"
_CALLS = re.compile(rf"{_NAME}\s+(?:calls|invokes)\s+{_NAME}|{_NAME}\s*(?:会)?调用了?\s*{_NAME}")
_RAISES = re.compile(
    rf"{_NAME}\s+(?:both\s+)?(?:raises|throws|returns)\s+(?:an?\s+)?{_NAME}?|"
    rf"{_NAME}\s*(?:既|会|在.{{0,12}}时会)?(?:抛出|返回)(?:异常|错误)?\s*{_NAME}?"
)
_EXITS = re.compile(r"\bexits?\b|\bcrash|\babort|\bpanics?\b|退出|崩溃|终止进程")
_EXIT_CODE = re.compile(
    r"sys\.exit|os\.Exit|log\.Fatal|process\.exit|\babort\(|\bexit\(|panic\(|SystemExit"
)
_ERROR_CODE = re.compile(
    r"\braise\b|\bthrow\b|panic\(|errors\.New|fmt\.Errorf|return\s+(?:nil,\s*)?\w*[eE]rr\w*\b|Err\("
)
_GENERIC = frozenset({"an", "a", "exception", "exceptions", "error", "errors", "err"})


def _unit(hits: list[Hit], name: str) -> Hit | None:
    last = name.rsplit(".", 1)[-1].lower()
    for h in hits:
        sym = re.sub(r"\[.*\]$", "", h.symbol).rsplit(".", 1)[-1].lower()
        if sym == last:
            return h
    return None


def _called(unit: Hit) -> list[str]:
    calls = unit.facts.get("calls") or []
    return list(dict.fromkeys(c.split(" (")[0].rsplit(".", 1)[-1] for c in calls))


def _correction(query: str, hits: list[Hit], lang: str) -> tuple[str, Hit] | None:
    p = phrases(lang)
    sep = p["join"]
    if m := _CALLS.search(query):
        subject, callee = (g for g in m.groups() if g)
        unit = _unit(hits, subject)
        name = callee.rsplit(".", 1)[-1]
        if unit and not re.search(rf"\b{re.escape(name)}\s*\(", unit.text or ""):
            items = sep.join(f"`{c}`" for c in _called(unit)[:4]) or "—"
            return p["premise_not_calls"].format(symbol=unit.symbol, name=callee,
                                                 items=items), unit  # fmt: skip
    if m := _RAISES.search(query):
        named = [g for g in m.groups() if g]
        unit = _unit(hits, named[0]) if named else None
        if unit is None:
            return None
        code = unit.text or ""
        if _EXITS.search(query) and not _EXIT_CODE.search(code):
            raised = re.findall(r"\b(?:raise|throw)\s+(?:new\s+)?([A-Za-z_]\w*)", code)
            errors = raised or (unit.facts.get("error") or [])[:2]
            items = sep.join(f"`{r}`" for r in dict.fromkeys(errors)) or "—"
            return p["premise_not_exits"].format(symbol=unit.symbol, items=items), unit
        wanted = named[1] if len(named) > 1 and named[1].lower() not in _GENERIC else None
        if not _ERROR_CODE.search(code):
            return p["premise_not_raises"].format(symbol=unit.symbol, name=wanted or "error",
                                                  items="—"), unit  # fmt: skip
        if wanted and not re.search(rf"\b{re.escape(wanted)}\b", code):
            raised = re.findall(r"\b(?:raise|throw)\s+(?:new\s+)?([A-Za-z_]\w*)", code)
            items = sep.join(f"`{r}`" for r in dict.fromkeys(raised)) or "—"
            return p["premise_not_raises"].format(symbol=unit.symbol, name=wanted,
                                                  items=items), unit  # fmt: skip
    return None


def correct(query: str, hits: list[Hit], lang: str) -> str | None:
    """The answer correcting the question's premise with a citation, or None when the question
    asks to confirm nothing or the retrieved code does not contradict it."""
    if not _CONFIRM.search(query.strip()):
        return None
    found = _correction(query, hits, lang)
    if found is None:
        return None
    text, unit = found
    p = phrases(lang)
    cited: list[Quote] = quotes(unit, query, {"error"})
    return p["premise"].format(correction=text) + "\n\n" + render_quotes(cited) + "\n"
