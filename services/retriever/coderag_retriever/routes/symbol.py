"""Symbol route: query words against the parts of qualified names (``resolve_redirects`` matches
"how are redirects resolved"), with prefix matching for abbreviations (``auth`` ~
``authentication``)."""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache

from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query
from coderag_retriever.text import qualified_names

MIN_PREFIX = 4
"""Shortest shared prefix that counts as a fuzzy match."""

CONTAINER = 0.5
"""Bonus for a symbol named only as the container of a named member (``Type`` in ``Type.m``)."""

_LAST = chr(0x10FFFF)
"""Sorts after every character: ``word + _LAST`` bounds the tokens that start with ``word``."""


def _matches(word: str, vocabulary: dict[str, list[int]], ordered: list[str]) -> list[str]:
    """The word itself when a symbol has it, else the tokens of at least ``MIN_PREFIX``
    characters that it begins or that begin with it (``ordered``: the vocabulary sorted, so
    those are a slice, not a walk over every token of a large repository)."""
    if word in vocabulary:
        return [word]
    if len(word) < MIN_PREFIX:
        return []
    heads = [word[:k] for k in range(MIN_PREFIX, len(word)) if word[:k] in vocabulary]
    longer = ordered[bisect_left(ordered, word) : bisect_left(ordered, word + _LAST)]
    return heads + longer


@lru_cache(maxsize=1 << 16)
def _symbol_text(symbol: str) -> str:
    """A unit's symbol as the question text is compared with it (kept: a common word matches
    thousands of symbols per question in a large repository)."""
    return qualified_names(symbol.lower())


_NAME = re.compile(r"[\w.]+")


def _named(text: str) -> dict[str, float]:
    """Every whole name the text could be naming, with its bonus: each run of word characters and
    dots and its dotted tails (``pkg.func`` names ``func``) 1.0, its dotted heads (``session.get``
    names ``session``) ``CONTAINER``, so a member the question names outranks its type."""
    out: dict[str, float] = {}
    for run in _NAME.findall(text):
        parts = [p for p in run.split(".") if p]  # a sentence's full stop is not a member
        for i in range(1, len(parts)):
            head = ".".join(parts[:i])
            out[head] = max(out.get(head, 0.0), CONTAINER)
        for i in range(len(parts)):
            out[".".join(parts[i:])] = 1.0
    return out


def _mentions(text: str, symbol: str, named: dict[str, float]) -> float:
    """How wholly the question names the symbol as a whole word (``order`` is not in
    ``processorder``); ``named`` is ``_named(text)``, computed once per question, since a common
    word matches thousands of symbols in a large repository."""
    if _NAME.fullmatch(symbol):
        return named.get(symbol, 0.0)
    return 1.0 if re.search(rf"(?<![\w.]){re.escape(symbol)}(?![\w])", text) else 0.0


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units whose symbol parts the query mentions, by the share of parts matched."""
    vocab = index.by_symbol_token
    hits: dict[int, set[str]] = {}
    # dict.fromkeys, not set: the walk order decides ties, and a set's order changes with
    # every process's string hashing
    for word in dict.fromkeys(query.tokens):
        for token in _matches(word, vocab, index.symbol_vocabulary):
            for pos in vocab[token]:
                hits.setdefault(pos, set()).add(token)
    scored = []
    text = qualified_names(query.lowered)
    named = _named(text)
    for pos, matched in hits.items():
        parts = index.symbol_tokens[pos]
        symbol = _symbol_text(index.units[pos].symbol)
        exact = _mentions(text, symbol, named)
        scored.append((pos, len(matched) / (len(parts) ** 0.5) + len(matched) * 0.1 + exact))
    scored.sort(key=lambda p: (-p[1], p[0]))
    return scored[:n]
