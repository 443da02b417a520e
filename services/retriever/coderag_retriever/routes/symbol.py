"""Symbol route: query words against the parts of qualified names (``resolve_redirects`` matches
"how are redirects resolved"), with prefix matching for abbreviations (``auth`` ~
``authentication``)."""

from __future__ import annotations

import re

from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query

MIN_PREFIX = 4
"""Shortest shared prefix that counts as a fuzzy match."""


def _matches(word: str, vocabulary: dict[str, list[int]]) -> list[str]:
    if word in vocabulary:
        return [word]
    if len(word) < MIN_PREFIX:
        return []
    return [
        t for t in vocabulary if len(t) >= MIN_PREFIX and (t.startswith(word) or word.startswith(t))
    ]


_NAME = re.compile(r"[\w.]+")


def _named(text: str) -> set[str]:
    """Every whole name the text could be naming: each run of word characters and dots, and its
    dotted prefixes (``session.get.x`` names ``session``, ``session.get`` and itself)."""
    out: set[str] = set()
    for run in _NAME.findall(text):
        parts = run.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


def _mentions(text: str, symbol: str, named: set[str]) -> bool:
    """Whether the question names the symbol as a whole word (``order`` is not in
    ``processorder``); ``named`` is ``_named(text)``, computed once per question, since a common
    word matches thousands of symbols in a large repository."""
    if _NAME.fullmatch(symbol):
        return symbol in named
    return re.search(rf"(?<![\w.]){re.escape(symbol)}(?![\w])", text) is not None


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units whose symbol parts the query mentions, by the share of parts matched."""
    vocab = index.by_symbol_token
    hits: dict[int, set[str]] = {}
    # dict.fromkeys, not set: the walk order decides ties, and a set's order changes with
    # every process's string hashing
    for word in dict.fromkeys(query.tokens):
        for token in _matches(word, vocab):
            for pos in vocab[token]:
                hits.setdefault(pos, set()).add(token)
    scored = []
    named = _named(query.lowered)
    for pos, matched in hits.items():
        parts = index.symbol_tokens[pos]
        exact = 1.0 if _mentions(query.lowered, index.units[pos].symbol.lower(), named) else 0.0
        scored.append((pos, len(matched) / (len(parts) ** 0.5) + len(matched) * 0.1 + exact))
    scored.sort(key=lambda p: (-p[1], p[0]))
    return scored[:n]
