"""The words of a question and of code, compared alike: stemmed content words, identifiers split
into their parts, and how much of a question a unit mentions. The one reading of words in the
house: the retriever's tokens (``coderag_retriever.text``), the answer's evidence, the relevance
verdict and the refusal checks all split and stem with these (issue 41: two stemmers read
"running" as "runn" and "run")."""

from __future__ import annotations

import re
from collections.abc import Iterable

from coderag.language import STOP_EN
from coderag.schemas import Hit

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A Latin word or identifier."""
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
"""The parts of one ``_``-free piece of an identifier (``getHTTPResponse``: get, HTTP, Response)."""


def stem(word: str) -> str:
    """A light English stemmer, lower-casing: enough to match redirects/redirect,
    parsing/parse, classes/class, running/run."""
    word = word.lower()
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es") and re.search(r"(s|x|z|ch|sh)es$", word):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]
            return base
    return word


def parts(word: str) -> list[str]:
    """The lower-case parts of an identifier (``parse_args`` and ``parseArgs`` -> parse, args)."""
    return [p.lower() for chunk in word.split("_") for p in CAMEL.findall(chunk) if p]


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
