"""Evidence: what a question asks about (its intents and content terms), how much of it a unit
mentions, and which of a unit's lines carry it (the statement that raises, reads the setting,
makes the call), as tight line ranges to quote and cite."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from coderag import words
from coderag.schemas import Hit
from coderag.words import terms

INTENTS: dict[str, re.Pattern[str]] = {
    "error": re.compile(
        r"\b(?:errors?|exceptions?|raises?|raised|raising|throws?|thrown|fail(?:s|ure|ed)?|"
        r"invalid|panics?)\b|错误|异常|报错|抛出|失败|出错",
        re.IGNORECASE,
    ),
    "config": re.compile(
        r"\b(?:config\w*|settings?|env(?:ironment)?|options?|flags?|configured)\b|"
        r"配置|环境变量|设置|选项",
        re.IGNORECASE,
    ),
    "flow": re.compile(
        r"\b(?:flows?|chain|reach(?:es)?|goes\s+through|passes\s+through|from\s+\S+.*\bto\b|"
        r"steps?|sequence|pipeline|end\s+to\s+end|calls?\s+into|path\s+from|leads?\s+to|"
        r"what\s+happens|how\s+does\s+\S+.*\b(?:get|end\s+up|become)|dispatch\w*|routed?)\b|"
        r"流程|调用链|经过|走到|链路|过程|从.+到|一路|怎么.*(?:调用|传递|到达)",
        re.IGNORECASE,
    ),
    "callers": re.compile(
        r"\bwho\s+calls\b|\bcallers?\b|\bcalled\s+(?:by|from)\b|谁调用|调用方|被.{0,12}调用",
        re.IGNORECASE,
    ),
    "test": re.compile(r"\btests?\b|\btested\b|\bcoverage\b|测试|覆盖", re.IGNORECASE),
    "deprecated": re.compile(r"\bdeprecat\w*|\bobsolete\b|废弃|弃用|过时", re.IGNORECASE),
}
"""Question patterns, both languages, per kind of fact asked for."""

_RAISE = re.compile(
    r"\braise\b|\bthrow\b|\bpanic\(|errors\.New|fmt\.Errorf|return\s+(?:nil,\s*)?\w*[eE]rr\w*\b"
    r"|\bexcept\b|\bcatch\b|Err\(",
)
_CONFIG = re.compile(
    r"os\.(?:environ|getenv|Getenv|LookupEnv)|\b(?:settings|config|cfg|conf|opts|options)\.\w+"
    r"|getenv\(|process\.env",
    re.IGNORECASE,
)
_DOCSTRING = re.compile(r"^\s*(?:[rRuU]?\"\"\"|[rRuU]?'''|///|/\*\*|//)")
_DECORATOR = re.compile(r"^\s*(?:@|#\[|//|#|/\*|\*)")

MAX_RANGES = 3
"""Ranges quoted per unit."""

MAX_RANGE_LINES = 8
"""Longest quoted range."""

DOC_LANGUAGES = frozenset({"markdown", "text", "rst", "restructuredtext", "asciidoc"})
"""Languages of documentation blocks, cited as documentation and never as code."""


@dataclass(frozen=True)
class Quote:
    """A tight range of a unit's lines and why it is quoted."""

    file: str
    start_line: int
    end_line: int
    why: str
    text: str

    @property
    def anchor(self) -> str:
        """The citation anchor of the range."""
        return f"FILE: {self.file}:{self.start_line}-{self.end_line}"


def intents(query: str) -> set[str]:
    """The kinds of fact the question asks for."""
    return {name for name, p in INTENTS.items() if p.search(query)}


def support(query: str, unit: Hit) -> float:
    """Share of the question's content terms the unit mentions (symbol, path, doc, code)."""
    return words.support(terms(query), unit)


def is_doc(unit: Hit) -> bool:
    """Whether a unit is a documentation block (README, CHANGELOG, prose)."""
    name = unit.file.rsplit("/", 1)[-1].upper()
    return (
        unit.language in DOC_LANGUAGES
        or name.startswith(("README", "CHANGELOG", "CHANGES", "HISTORY", "CONTRIBUTING"))
        or name.endswith((".MD", ".RST", ".TXT", ".ADOC"))
    )


def _header(lines: list[str]) -> list[int]:
    """Rows of the definition line and the rest of its signature (up to its ``:`` or ``{``)."""
    first = next((i for i, ln in enumerate(lines) if ln.strip() and not _DECORATOR.match(ln)), 0)
    rows = [first]
    depth = lines[first].count("(") - lines[first].count(")") if lines else 0
    i = first
    while depth > 0 and i + 1 < len(lines) and len(rows) < MAX_RANGE_LINES:
        i += 1
        rows.append(i)
        depth += lines[i].count("(") - lines[i].count(")")
    return rows


def _ranges(rows: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """Merge picked rows (row, why) into ranges, one gap line allowed, clipped in length."""
    out: list[list[Any]] = []
    for row, why in sorted(rows):
        if out and row <= out[-1][1] + 2 and row - out[-1][0] < MAX_RANGE_LINES:
            out[-1][1] = max(out[-1][1], row)
            if why not in out[-1][2]:
                out[-1][2].append(why)
        else:
            out.append([row, row, [why]])
    return [(s, e, "+".join(w)) for s, e, w in out]


def quotes(unit: Hit, query: str, asked: set[str], next_symbol: str | None = None) -> list[Quote]:
    """The unit's lines that carry the question's evidence: its signature, the statement the
    retriever found to do what the question asks (``focus_start``), the statements the
    question's intents point at, the call of ``next_symbol`` in a chain, the lines that mention
    most of the question's terms; at most ``MAX_RANGES`` tight ranges, first line first."""
    lines = (unit.text or "").splitlines()
    if not lines:
        return []
    n = min(len(lines), unit.end_line - unit.start_line + 1)
    lines = lines[:n]
    picked: list[tuple[int, str]] = []
    doc = is_doc(unit)
    head = _header(lines) if not doc else [0]
    if not doc:
        picked += [(r, "signature") for r in head]
        after = head[-1] + 1
        if not asked and after < len(lines) and _DOCSTRING.match(lines[after]):
            picked.append((after, "doc"))
    if "error" in asked and not doc:
        picked += [(i, "error") for i, ln in enumerate(lines) if _RAISE.search(ln)][:2]
    if "config" in asked and not doc:
        picked += [(i, "config") for i, ln in enumerate(lines) if _CONFIG.search(ln)][:2]
    if "deprecated" in asked:
        picked += [(i, "deprecated") for i, ln in enumerate(lines) if "deprecat" in ln.lower()][:1]
    if unit.focus_start is not None and unit.focus_end is not None and not doc:
        rows = range(unit.focus_start - unit.start_line, unit.focus_end - unit.start_line + 1)
        picked += [(r, "focus") for r in rows if 0 <= r < len(lines)]
    if next_symbol:
        name = next_symbol.rsplit(".", 1)[-1].split("[")[0]
        call = re.compile(rf"\b{re.escape(name)}\s*\(")
        picked += [(i, "call") for i, ln in enumerate(lines) if call.search(ln)][:1]
    wanted = terms(query)
    if wanted:
        # the code's own lines, not the comment above the definition
        scored = [
            (sum(t in words.words(ln) for t in wanted), i)
            for i, ln in enumerate(lines)
            if i >= head[0]
        ]
        have = {r for r, _ in picked}
        best = sorted((-s, i) for s, i in scored if s >= 2 and i not in have)[:2]
        if doc and not best:
            best = sorted((-s, i) for s, i in scored if s >= 1)[:1] or [(0, 0)]
        picked += [(i, "mentions") for _, i in best]
    ranges = _ranges(picked)
    # the signature and the statement found to do the asked work come first, then row order
    kept = sorted(ranges, key=lambda r: ("signature" not in r[2] and "focus" not in r[2], r[0]))
    out = []
    for s, e, why in sorted(kept[:MAX_RANGES]):
        start = unit.start_line + s
        out.append(Quote(unit.file, start, start + e - s, why, "\n".join(lines[s : e + 1])))
    return out
