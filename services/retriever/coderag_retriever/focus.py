"""The lines of a unit that do what the question asks (issue 31, lever 6): each statement of the
body, past the signature and doc comment, scored against the question by a vector encoder and by
the question's own words, so the evidence an answer quotes is the line that computes the total
and not the ``def`` above it. /retrieve sends the best statement of its first hits as
``focus_start``/``focus_end``; the answer quotes it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from coderag import spaces
from coderag.schemas import Hit
from coderag_retriever.query import Query
from coderag_retriever.text import code_tokens

Embed = Callable[[list[str]], "np.ndarray | None"]
"""L2-normalised vectors of texts (one row each), or None when no encoder answers."""

SPACE = spaces.MAIN
"""The vector space whose encoder scores statements: MiniLM led e5-small on the tuning
questions (``bench/evidence_lines.py --grid``)."""

TERM_WEIGHT = 0.05
"""What one of the question's words on a statement adds to its cosine."""

TARGET_WEIGHT = 0.05
"""What one of the question's words adds again when the statement assigns it (``total = ...``):
"how is the total computed" asks for the line that computes it, not one that passes it on."""

MIN_BODY_LINES = 6
"""Shorter units are quoted whole by the answer's other rules: no line of them is deep."""

MAX_STATEMENT_LINES = 3
"""Longest statement quoted as one (a call whose arguments run over lines)."""

HITS = 1
"""Hits of a /retrieve answer whose focus is found: the first, which an answer quotes first.
Each costs the encoder up to ``MAX_STATEMENTS`` texts on one core (about 6 ms each here): three
hits of 24 statements took /ask from p95 114 ms to 1,026 (docs/BENCHMARKS.md)."""

MAX_STATEMENTS = 16
"""Statements of one unit the encoder reads at most: on the tuning set 16 found as many lines
as 24 and 8 found fewer (compared on tune once, not kept as a script)."""

_COMMENT = re.compile(r"^\s*(?:#|//|/\*|\*|--|<!--)")
_DOC_OPEN = re.compile(r"^\s*[rRbBuU]{0,2}(\"\"\"|''')")
_TRIVIAL = re.compile(r"^\s*(?:[{}()\[\];,]+|else\s*[:{]?|try\s*[:{]?|pass|end|\}\s*else\s*\{)\s*$")
_DECORATOR = re.compile(r"^\s*(?:@|#\[)")


@dataclass(frozen=True)
class Statement:
    """Rows ``first``..``last`` (0-based, inclusive) of a unit's text, and their text."""

    first: int
    last: int
    text: str


def body_start(lines: Sequence[str]) -> int:
    """The row after the definition line and the rest of its signature (decorators and comments
    above it skipped): where the body, doc comment included, begins."""
    row = next((i for i, ln in enumerate(lines) if ln.strip() and not _skipped(ln)), 0)
    depth = _depth(lines[row]) if lines else 0
    while depth > 0 and row + 1 < len(lines):
        row += 1
        depth += _depth(lines[row])
    return row + 1


def _skipped(line: str) -> bool:
    return bool(_DECORATOR.match(line) or _COMMENT.match(line))


def statements(lines: Sequence[str], first: int) -> list[Statement]:
    """The body's statements from row ``first`` on: comments, doc strings, blank lines and lone
    brackets left out; a statement whose brackets stay open runs on to where they close (at most
    ``MAX_STATEMENT_LINES`` rows)."""
    out: list[Statement] = []
    i = first
    while i < len(lines):
        line = lines[i]
        if m := _DOC_OPEN.match(line):
            quote = m.group(1)
            i += 1
            if quote not in line[m.end() :]:  # the doc string runs on to the line closing it
                while i < len(lines) and quote not in lines[i]:
                    i += 1
                i += 1
            continue
        if not line.strip() or _COMMENT.match(line) or _TRIVIAL.match(line):
            i += 1
            continue
        end, depth = i, _depth(line)
        while depth > 0 and end + 1 < len(lines) and end - i + 1 < MAX_STATEMENT_LINES:
            end += 1
            depth += _depth(lines[end])
        out.append(Statement(i, end, " ".join(s.strip() for s in lines[i : end + 1])))
        i = end + 1
    return out


_ASSIGN = re.compile(r"^(.*?[^=!<>:+\-*/%&|^])(?::=|\+=|-=|\*=|/=|=)(?![=>])")


def _target(text: str) -> str:
    """What a statement assigns (``self.total`` of ``self.total = a + b``), or ""."""
    m = _ASSIGN.match(text)
    return m.group(1) if m and "(" not in m.group(1) else ""


def _depth(line: str) -> int:
    """Round and square brackets a line leaves open; a brace opens a block of statements."""
    return line.count("(") + line.count("[") - line.count(")") - line.count("]")


def _words(terms: set[str], text: str) -> int:
    return len(terms & set(code_tokens(text)))


def candidates(terms: set[str], lines: Sequence[str]) -> list[Statement]:
    """The statements of a unit ``best`` chooses among, first row first: none for a short unit;
    of a long one, the ``MAX_STATEMENTS`` that hold most of the question's ``terms`` (earlier
    ones first among equals), so the encoder reads a bounded batch."""
    if len(lines) < MIN_BODY_LINES:
        return []
    found = statements(lines, body_start(lines))
    if len(found) < 2:
        return []
    if len(found) > MAX_STATEMENTS:
        kept = sorted(range(len(found)), key=lambda i: (-_words(terms, found[i].text), i))
        found = [found[i] for i in sorted(kept[:MAX_STATEMENTS])]
    return found


def best(
    terms: set[str],
    found: Sequence[Statement],
    cosines: np.ndarray | None,
    term_weight: float = TERM_WEIGHT,
    target_weight: float = TARGET_WEIGHT,
) -> Statement | None:
    """The statement of ``found`` that best does what the question asks: its cosine to the
    question (``cosines``, one per statement) plus ``term_weight`` for each of the question's
    ``terms`` it holds and ``target_weight`` for each it assigns; None when there is nothing to
    choose from, or with no cosines when no statement holds a term."""
    if not found:
        return None
    scores = np.array(
        [term_weight * _words(terms, s.text) + target_weight * _words(terms, _target(s.text))
         for s in found]
    )  # fmt: skip
    if cosines is not None and len(cosines) == len(found):
        scores = scores + cosines
    elif not scores.any():
        return None
    return found[int(np.argmax(scores))]


def with_focus(query: Query, hits: list[Hit], embed: Embed | None) -> list[Hit]:
    """The hits with ``focus_start``/``focus_end`` set on the first ``HITS`` that have a body to
    choose from: the file lines of their best statement. One call of ``embed`` for all of them
    (the question as asked: adding a Chinese question's English words, as the vector route
    does, found fewer lines on the tuning set); without vectors (``embed`` None or failing) the
    question's words, Chinese ones through the dictionaries, alone decide."""
    terms = set(query.tokens)
    found = [
        candidates(terms, (h.text or "").splitlines()[: h.end_line - h.start_line + 1])
        for h in hits[:HITS]
    ]
    texts = [s.text for group in found for s in group]
    vectors = embed([query.text, *texts]) if embed is not None and texts else None
    if vectors is not None and len(vectors) != len(texts) + 1:
        vectors = None
    out = list(hits)
    at = 0
    for i, group in enumerate(found):
        cosines = None if vectors is None else vectors[1 + at : 1 + at + len(group)] @ vectors[0]
        at += len(group)
        if (s := best(terms, group, cosines)) is not None:
            h = hits[i]
            out[i] = h.model_copy(
                update={"focus_start": h.start_line + s.first, "focus_end": h.start_line + s.last}
            )
    return out
