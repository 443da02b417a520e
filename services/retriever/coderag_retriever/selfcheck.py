"""Self-check questions made from a repository itself (``coderag eval``): commit messages with the
units their commit changed, and doc comments' first sentences with their definitions, plus the
doc-stripped copies of the units those doc questions must be scored against.

A doc question would be answered by matching its own words if the doc stayed in what is
searched, so ``strip_docs`` removes from every unit each line that belongs to a doc comment of its
file; ``bench/docquestions.py`` uses the same first-sentence rule on doc-blanked corpus copies.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from coderag import gitsafe
from coderag.schemas import Unit
from coderag_retriever.learned import DOC_LANGUAGES

MIN_WORDS = 4
"""Shortest first sentence (or commit subject) that makes a question."""

MAX_GOLD = 8
"""Most units a commit may have changed to be a question (bigger ones are refactors, too vague)."""

MAX_COMMITS = 400
"""Newest commits read for commit questions."""

DEFINITIONS = frozenset({"function", "method", "class", "interface", "struct", "type", "enum"})
"""Unit kinds whose doc comments make questions (blocks and file units do not)."""

TRIVIAL = re.compile(
    r"^(merge\b|revert\b|wip\b|fixup!|squash!|initial commit|bump\b|release\b|v?\d+(\.\d+)+\b)"
    r"|\b(version|changelog)\b.*\d",
    re.IGNORECASE,
)
"""Commit subjects that say nothing about code: merges, reverts, work in progress, version bumps."""

_SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.DOTALL)
_MARKERS = re.compile(r"^(?:[rRbBuU]?(?:\"\"\"|''')|/\*\*?|\*/|//[/!]?|#+|\*|--)\s*")
_TAIL = re.compile(r"\s*(?:\"\"\"|'''|\*/)\s*$")


@dataclass
class Question:
    """One self-check question: its kind (``commit`` or ``doc``), text, and the index positions
    of the units that answer it."""

    kind: str
    query: str
    gold: list[int]


def first_sentence(doc: str) -> str | None:
    """The doc comment's first sentence, if it is long enough to ask with."""
    text = " ".join(doc.strip().split())
    m = _SENTENCE.match(text)
    sentence = (m.group(1) if m else text).strip()
    if len(sentence.split()) < MIN_WORDS or sentence.startswith((":", "..", "Deprecated")):
        return None
    return sentence


def is_trivial(subject: str) -> bool:
    """Whether a commit subject is too short or too formulaic ("fix", "wip", a version bump, a
    merge) to be a question."""
    return len(subject.split()) < MIN_WORDS or bool(TRIVIAL.search(subject.strip()))


def _core(line: str) -> str:
    """A line's words without comment or docstring markers, whitespace collapsed."""
    text = _MARKERS.sub("", line.strip())
    return " ".join(_TAIL.sub("", text).split())


def strip_docs(units: list[Unit]) -> list[Unit]:
    """Copies of the units (same order and ranges) without doc text: ``doc`` emptied and every
    line whose words belong to a doc comment of the same file blanked, so a class header or a
    file unit does not keep its members' docs either."""
    docs: dict[str, list[str]] = {}
    for u in units:
        if u.doc.strip():
            docs.setdefault(u.file, []).append(" ".join(u.doc.split()))
    out = []
    for u in units:
        file_docs = docs.get(u.file)
        if not file_docs:
            out.append(u.model_copy(update={"doc": ""}))
            continue
        lines = [
            "" if (core := _core(line)) and any(core in d for d in file_docs) else line
            for line in u.text.split("\n")
        ]
        out.append(u.model_copy(update={"doc": "", "text": "\n".join(lines)}))
    return out


def doc_questions(units: list[Unit]) -> list[Question]:
    """A question per documented definition outside tests: its doc's first sentence, answered by
    the definition (all its parts when it was split)."""
    parts: dict[tuple[str, str], list[int]] = {}
    for pos, u in enumerate(units):
        parts.setdefault((u.file, u.symbol.split("[part")[0]), []).append(pos)
    out = []
    for u in units:
        split_later = "[part" in u.symbol and "[part 1]" not in u.symbol
        if u.kind not in DEFINITIONS or u.is_test or split_later:
            continue
        sentence = first_sentence(u.doc) if u.doc else None
        if sentence:
            out.append(Question("doc", sentence, parts[(u.file, u.symbol.split("[part")[0])]))
    return out


def _git(root: Path, *args: str) -> str:
    """Output of a git command in ``root``, on its view (``coderag.gitsafe``: the repository's
    own config is never read); '' when git fails: no history is no questions."""
    try:
        done = gitsafe.run(root, list(args), search_parent_directories=True)
    except gitsafe.NotARepository:
        return ""
    return done.stdout if done.returncode == 0 else ""


def blame(root: Path, path: str) -> dict[int, str]:
    """Line number -> full sha of the commit that last changed it, for the working-tree file
    (uncommitted lines are left out)."""
    out: dict[int, str] = {}
    for line in _git(root, "blame", "--porcelain", "--no-textconv", "--", path).splitlines():
        if line.startswith("\t"):
            continue
        head = line.split(" ")
        sha = head[0]
        if len(head) >= 3 and len(sha) == 40 and head[2].isdigit() and set(sha) != {"0"}:
            out[int(head[2])] = sha
    return out


def commit_questions(root: Path, units: list[Unit]) -> list[Question]:
    """A question per recent non-trivial commit: its subject, answered by the non-test code units
    whose lines it last changed (``git blame`` of the indexed files it touched); a commit that
    only changed documentation makes no question."""
    subjects: dict[str, str] = {}
    touched: set[str] = set()
    log = _git(
        root,
        "log",
        "--no-merges",
        "--relative",
        f"-n{MAX_COMMITS}",
        "--format=%x1e%H%x1f%s",
        "--name-only",
    )
    for record in log.split("\x1e")[1:]:
        head, _, names = record.partition("\n")
        sha, _, subject = head.partition("\x1f")
        if not is_trivial(subject):
            subjects[sha] = subject.strip()
            touched.update(n.strip() for n in names.splitlines() if n.strip())
    by_file: dict[str, list[int]] = {}
    for pos, u in enumerate(units):
        # a doc unit as gold would score the search on finding prose for a commit subject
        # ("Add sponsorship page"), which says nothing about finding code
        if not u.is_test and u.language not in DOC_LANGUAGES:
            by_file.setdefault(u.file, []).append(pos)
    gold: dict[str, set[int]] = {}
    for path in sorted(touched & by_file.keys()):
        lines = blame(root, path)
        for pos in by_file[path]:
            u = units[pos]
            for n in range(u.start_line, u.end_line + 1):
                last = lines.get(n)
                if last is not None and last in subjects:
                    gold.setdefault(last, set()).add(pos)
    return [
        Question("commit", subjects[sha], sorted(found))
        for sha, found in gold.items()
        if len(found) <= MAX_GOLD
    ]


def sample(
    commits: list[Question], docs: list[Question], limit: int, seed: int = 0
) -> list[Question]:
    """At most ``limit`` questions, half of each kind where there are enough, the rest from the
    other kind; the same questions every run."""
    rng = random.Random(seed)
    commits, docs = rng.sample(commits, len(commits)), rng.sample(docs, len(docs))
    n_commits = min(len(commits), max(limit // 2, limit - len(docs)))
    n_docs = min(len(docs), limit - n_commits)
    return commits[:n_commits] + docs[:n_docs]
