"""The words of a question and of code, compared alike: stemmed content words, identifiers split
into their parts, and how much of a question a unit mentions. The answer's evidence and the
relevance verdict read the same words."""

from __future__ import annotations

import re
from collections.abc import Iterable

from coderag.language import STOP_EN
from coderag.schemas import Hit

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A Latin word or identifier."""
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def stem(word: str) -> str:
    """A word lower-cased with a plural or verb ending cut ("parsing" -> "pars")."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def parts(word: str) -> list[str]:
    """The lower-case parts of an identifier (``parse_args`` and ``parseArgs`` -> parse, args)."""
    return [p.lower() for chunk in word.split("_") for p in _CAMEL.findall(chunk) if p]


def terms(query: str, extra: Iterable[str] = ()) -> list[str]:
    """Stemmed content words of the question, identifiers split into their parts; ``extra``
    words (the code words a Chinese question's phrases translate to) count as its own."""
    out: list[str] = []
    for w in [*WORD.findall(query), *extra]:
        for p in [w.lower(), *parts(w)]:
            if len(p) >= 3 and p not in STOP_EN:
                out.append(stem(p))
    return list(dict.fromkeys(out))


def words(text: str) -> set[str]:
    """The stemmed words and identifier parts of a text, as ``terms`` reads a question."""
    return {stem(p) for w in WORD.findall(text) for p in [w.lower(), *parts(w)] if len(p) >= 3}


def support(wanted: list[str], unit: Hit) -> float:
    """Share of the ``wanted`` terms the unit mentions (symbol, path, doc, code)."""
    if not wanted:
        return 0.0
    hay = words(f"{unit.symbol} {unit.file} {unit.doc} {unit.text or ''}")
    return sum(t in hay for t in wanted) / len(wanted)
