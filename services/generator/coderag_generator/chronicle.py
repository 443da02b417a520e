"""Who/when answers (X7) from the repository's history over what the question names: a path
(``src/foo.py``, ``cors.py``, a folder) or a subsystem named by its file ("the routing code")
is answered about its whole files, a symbol about its unit, anything else about the units found;
the commits that changed them in the question's time window, newest first, with short hash,
author, date, subject and the changed lines; or a plain statement that no commit in the window
changed them (with the last change before it), or that the repository has no history."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from coderag.history import CommitFact, HistoryResponse, LineRange, RangeChange
from coderag.schemas import Hit
from coderag.terms import named_terms
from coderag_generator.evidence import is_doc, support
from coderag_generator.window import Window, named_paths, subject

MAX_UNITS = 3
"""Units whose history one answer reports."""

MAX_COMMITS = 5
"""Commits listed when the question names no window."""

MAX_FILES = 4
"""Files named per commit of a folder's history."""

MAX_EARLIER = 3
"""Commits listed before a window no commit changed."""

SIMILARITY_MARGIN = 0.03
"""A runner-up joins the best unit only when its similarity is this close to the best."""


WHOLE_FILE = 1_000_000_000
"""The end line asked for a whole file: the history route answers up to the file's last line."""

FILE_TARGET = "file history"
"""The ``kind`` of a whole-file target, which no unit has."""

FOLDER_TARGET = "folder history"
"""The ``kind`` of a folder target: the history of every indexed file inside it."""

_IDENT = re.compile(r"`([^`]+)`|([A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*)(?:\(\))?")
_NAME_PARTS = re.compile(r"\.|::")

NO_HISTORY = "no_history"
"""The ``reason`` of a who/when question asked of a repository without history."""


@dataclass(frozen=True)
class GitFacts:
    """What a who/when answer is built from: the units, their history, the question's window."""

    units: list[Hit]
    history: HistoryResponse
    window: Window | None
    origin: bool = False
    """Whether the question asks who added it: the oldest commit leads."""
    pickaxe: str | None = None
    """The name whose commits were asked for (who brought it in), when the question names one."""
    earlier: HistoryResponse | None = None
    """The history without the window, when no commit changed it within the window."""


@cache
def phrases(lang: str) -> dict[str, Any]:
    """The phrases of ``prompts/chronicle_<lang>.txt``."""
    lang = lang if lang in ("en", "zh") else "en"
    path = resources.files("coderag_generator").joinpath(f"prompts/chronicle_{lang}.txt")
    return tomllib.loads(path.read_text("utf-8"))


def targets(query: str, hits: list[Hit]) -> list[Hit]:
    """What the question is about, most specific first: the files of a path it names (a named
    path no hit is in is still asked, as written), the units of a symbol it names, the files
    whose name or folder is a word of it ("routing" names ``routing.py``); else the best code
    hit, and a runner-up among the next two that mentions at least as much of the question and
    is nearly as similar."""
    about = subject(query)
    words = about
    for path in named_paths(query):  # "cors.py" names a file, not a symbol "py"
        words = words.replace(path, " ")
    return (
        _named_files(query, hits)
        or _named_units(words, hits)
        or _subsystem_files(words, hits)
        or _best_units(about, hits)
    )


def whole_file(path: str, like: Hit | None = None) -> Hit:
    """A target standing for all of ``path``."""
    return Hit(
        file=path,
        start_line=1,
        end_line=WHOLE_FILE,
        symbol=path,
        kind=FILE_TARGET,
        language=like.language if like else "",
        score=like.score if like else 0.0,
    )


def _in_path(file: str, path: str) -> bool:
    """Whether ``file`` is ``path``, ends with it after a folder, or lies in folder ``path``."""
    path = path.strip("/")
    return file == path or file.endswith("/" + path) or file.startswith(path + "/")


def _files(hits: list[Hit]) -> list[tuple[str, Hit]]:
    """Each code file of ``hits`` once, in rank order, with its best hit."""
    seen: dict[str, Hit] = {}
    for h in hits:
        if not is_doc(h):
            seen.setdefault(h.file, h)
    return list(seen.items())


def _folder(path: str, files: list[str]) -> str | None:
    """The repository folder a named path means (``supervisors`` of
    ``uvicorn/supervisors/statreload.py``), when it names a folder rather than a file: no
    extension, and it is no file but holds one (or, not seen among the hits, has a ``/``)."""
    path = path.strip("/")
    if not path or "." in path.rsplit("/", 1)[-1] or any(_in_file(f, path) for f in files):
        return None
    for f in files:
        if f.startswith(path + "/"):
            return path
        if (at := f.find("/" + path + "/")) >= 0:
            return f[: at + 1 + len(path)]
    return path if "/" in path else None


def _in_file(file: str, path: str) -> bool:
    return file == path or file.endswith("/" + path)


def folder_target(folder: str) -> Hit:
    """A target standing for every indexed file inside ``folder``."""
    return Hit(
        file=folder, start_line=1, end_line=WHOLE_FILE, symbol=folder, kind=FOLDER_TARGET,
        language="", score=0.0,
    )  # fmt: skip


def _named_files(query: str, hits: list[Hit]) -> list[Hit]:
    out: list[Hit] = []
    files = _files(hits)
    for path in named_paths(query):
        if (folder := _folder(path, [f for f, _ in files])) is not None:
            # a folder's last change may be in a file no hit is in (issue 43's trial)
            if folder not in {o.file for o in out}:
                out.append(folder_target(folder))
            continue
        found = [whole_file(f, h) for f, h in files if _in_path(f, path)]
        if not found and "/" in path.strip("/") and "." in path.rsplit("/", 1)[-1]:
            found = [whole_file(path)]  # the history route knows whether the file is there
        out += [t for t in found if t.file not in {o.file for o in out}]
    return out[:MAX_UNITS]


def _named_units(about: str, hits: list[Hit]) -> list[Hit]:
    """Units whose symbol the question writes out: whole (``App.route``) before by last part."""
    code = [h for h in hits if h.kind != "file" and not is_doc(h)]
    names = [m.group(1) or m.group(2) for m in _IDENT.finditer(about)]
    exact = [h for h in code if h.symbol in names]
    if exact:
        return exact[:MAX_UNITS]
    coded = [n for n in names if "_" in n or "." in n or "::" in n or n[1:] != n[1:].lower()]
    tails = {_NAME_PARTS.split(n)[-1] for n in coded}
    by_tail = [h for h in code if _NAME_PARTS.split(h.symbol)[-1] in tails]
    return by_tail[:MAX_UNITS]


def _subsystem_files(about: str, hits: list[Hit]) -> list[Hit]:
    """Whole files whose name (without extension) or one of whose folders is a word of the
    question, in rank order."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][\w-]{2,}", about)}
    out: list[Hit] = []
    for f, h in _files(hits):
        parts = f.lower().split("/")
        stem = parts[-1].rsplit(".", 1)[0]
        if stem in words or words & set(parts[:-1]):
            out.append(whole_file(f, h))
    return out[:MAX_UNITS]


def _best_units(about: str, hits: list[Hit]) -> list[Hit]:
    code = [h for h in hits if not is_doc(h) and h.kind != "file"][:3] or hits[:1]
    if not code:
        return []
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


_DISTINCT = re.compile(r"[a-z0-9][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]")
"""camelCase or snake_case: a name whose text is rarely anything but that name."""

DISTINCT_LENGTH = 12
"""A name at least this long is taken as its own, whatever its case."""


def distinctive(name: str) -> bool:
    """Whether a pickaxe for ``name`` finds that name rather than every use of a common word
    (``genLevelComparison``, ``compress_if_large``; not ``route`` or ``child``)."""
    return bool(_DISTINCT.search(name)) or len(name) >= DISTINCT_LENGTH


_QUOTED_CODE = re.compile(r"`([^`\n]{3,120})`")
"""Code a question quotes between backticks."""

_NAME_ONLY = re.compile(r"[\w.:$]+(?:\(\))?")
"""A quoted name (``App.route``, ``unsign()``) rather than a fragment of code."""


def introduced_term(query: str, units: list[Hit]) -> str | None:
    """What a "who added X" question asks about, when the code of what it is about holds it as
    written: a fragment of code it quotes (``age < 0``: the fifth trial was told the oldest
    commit of the enclosing method), a name inside a unit, or a unit's own name when it is
    ``distinctive``. A unit's oldest commit is where its lines began, which may be code that
    held another name (issue 43's fourth trial: ``genLevelComparison``'s lines date from 2018,
    the name from 2024); a short name keeps that oldest commit, since a pickaxe for it finds
    every use of the word."""
    for m in _QUOTED_CODE.finditer(query):
        code = m.group(1).strip()
        if not _NAME_ONLY.fullmatch(code) and any(_holds(u, code) for u in units):
            return code
    for term in named_terms(query):
        if any(term == u.symbol or u.symbol.endswith("." + term) for u in units):
            leaf = _NAME_PARTS.split(term)[-1]
            return leaf if distinctive(leaf) else None
        if any(_holds(u, term) for u in units):
            return term
    return None


def _holds(unit: Hit, term: str) -> bool:
    """Whether a unit's code holds ``term``, or it is a file or folder (whose text is not read
    here: the pickaxe over it says)."""
    return term in (unit.text or "") or unit.kind in (FILE_TARGET, FOLDER_TARGET)


def ranges(units: list[Hit]) -> list[LineRange]:
    """The line ranges to ask the history of."""
    return [LineRange(file=u.file, start_line=u.start_line, end_line=u.end_line) for u in units]


def _day(iso: str) -> str:
    return iso[:10]


def _spans(spans: list[list[int]]) -> str:
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def _spans_of(units: list[Hit], history: HistoryResponse) -> list[tuple[str, int, int]]:
    """Each target's file and lines as the history route answered them: a whole file's end is
    its last line there (``WHOLE_FILE`` still when the file is not in the repository)."""
    out = []
    for i, u in enumerate(units):
        r = history.ranges[i] if i < len(history.ranges) else None
        if r is not None and r.file == u.file and r.start_line == u.start_line:
            out.append((u.file, u.start_line, r.end_line))
        else:
            out.append((u.file, u.start_line, u.end_line))
    return out


def _what(p: dict[str, Any], u: Hit, span: tuple[str, int, int], term: str | None = None) -> str:
    if u.kind == FOLDER_TARGET:
        return p["folder"].format(folder=u.file)
    if u.kind == FILE_TARGET or (term and _NAME_PARTS.split(u.symbol)[-1] == term):
        # "brought `_lazy_sha1` into `signer.py`", not "into `_lazy_sha1`" (the fifth trial)
        return p["file"].format(file=u.file)
    return p["what"].format(symbol=u.symbol, place=f"{u.file}:{span[1]}-{span[2]}")


def compose(
    units: list[Hit],
    history: HistoryResponse,
    win: Window | None,
    lang: str,
    origin: bool = False,
    pickaxe: str | None = None,
    earlier: HistoryResponse | None = None,
) -> str:
    """The answer text, with one citation anchor per unit reported; whole files are cited over
    the lines the history route found in them. With ``origin`` (who added it?) the oldest
    commit leads, then the ones after it, each with the files it changed (an old commit's line
    numbers are not today's); with ``pickaxe``, the commits that brought that name in or out.
    A window no commit changed is followed by the last ``MAX_EARLIER`` commits of ``earlier``
    (the history without the window)."""
    p = phrases(lang)
    spans = _spans_of(units, history)
    term = pickaxe if origin else None
    what = p["and"].join(_what(p, u, s, term) for u, s in zip(units, spans, strict=True))
    if not history.has_history:
        return p["no_history"].format(what=what)
    folders = {r.file for r in history.ranges if r.folder}
    missing = [
        u.file
        for u, s in zip(units, spans, strict=True)
        if s[2] >= WHOLE_FILE and u.file not in folders
    ]
    if missing and len(missing) == len(units):
        return p["no_file"].format(file=p["and"].join(f"`{f}`" for f in missing))
    last: CommitFact | None = None
    for r in history.ranges:
        if r.last is not None and (last is None or r.last.date > last.date):
            last = r.last
    ordered, where = _commits(history, p, origin)
    since = _day(win.since.isoformat()) if win and win.since else "…"
    until = win.label().split(" – ")[1] if win else "…"
    open_ended = win is not None and win.until is None
    if ordered:
        head = p["head_all"] if win is None else p["head_since" if open_ended else "head_window"]
        if origin:
            head = p["head_pickaxe"] if pickaxe else p["head_origin"]
        lines = [head.format(since=since, until=until, what=what, term=pickaxe)]
        for c in ordered[: None if win else MAX_COMMITS]:
            lines.append(_item(p, c, where))
    else:
        text = p["none_since" if open_ended else "none_in_window"].format(
            since=since, until=until, what=what
        )
        before, said = _commits(earlier, p, False) if earlier is not None else ([], {})
        if before:
            # a quiet window still says what changed last, not one commit alone (issue 43's
            # third trial)
            lines = [text, p["earlier"]] + [_item(p, c, said) for c in before[:MAX_EARLIER]]
        else:
            if last is not None:
                text += p["last_change"].format(
                    commit=last.commit,
                    author=last.author,
                    date=_day(last.date),
                    summary=last.summary,
                )
            lines = [text]
    for i, (file, start, end) in enumerate(spans):
        if end >= WHOLE_FILE:
            continue
        if units[i].kind == FILE_TARGET and win is None and not origin:
            # the file's newest commit touched nothing after it, so its lines are today's: the
            # lines that answer "who last changed it" come before the whole file
            for a, b in _newest_lines(history, i, end):
                lines.append(p["cite"].format(file=file, start=a, end=b))
        lines.append(p["cite"].format(file=file, start=start, end=end))
    return "\n".join(lines)


def _commits(
    history: HistoryResponse, p: dict[str, Any], origin: bool
) -> tuple[list[RangeChange], dict[str, list[str]]]:
    """The commits of a history, newest (or, ``origin``, oldest) first, and what each changed
    in words: lines of a file, files of a folder, files only for an old commit."""
    commits: dict[str, RangeChange] = {}
    where: dict[str, list[str]] = {}
    for r in history.ranges:
        for c in r.changes:
            commits.setdefault(c.commit, c)
            if origin:
                changed = p["join"].join(list(dict.fromkeys(c.files or [r.file]))[:MAX_FILES])
            elif r.folder:
                more = "…" if len(c.files) > MAX_FILES else ""
                changed = p["join"].join(c.files[:MAX_FILES]) + more
            else:
                one = len(c.ranges) == 1 and c.ranges[0][0] == c.ranges[0][1]
                changed = p["changed_line" if one else "changed"].format(
                    file=r.file, ranges=_spans(c.ranges)
                )
            where.setdefault(c.commit, []).append(changed)
    return sorted(commits.values(), key=lambda c: c.date, reverse=not origin), where


def _item(p: dict[str, Any], c: RangeChange, where: dict[str, list[str]]) -> str:
    return p["item"].format(
        commit=c.commit,
        author=c.author,
        date=_day(c.date),
        summary=c.summary,
        changed=p["join"].join(where[c.commit]),
    )


def _newest_lines(history: HistoryResponse, i: int, end: int) -> list[tuple[int, int]]:
    """The first few line spans the newest commit of range ``i`` changed, within ``1..end``."""
    if i >= len(history.ranges) or not history.ranges[i].changes:
        return []
    spans = history.ranges[i].changes[0].ranges
    return [(a, min(b, end)) for a, b in spans[:MAX_UNITS] if 1 <= a <= end][:MAX_UNITS]
