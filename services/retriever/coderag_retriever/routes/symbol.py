"""Symbol route: query words against the parts of qualified names (``resolve_redirects`` matches
"how are redirects resolved"), with prefix matching for abbreviations (``auth`` ~
``authentication``)."""

from __future__ import annotations

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


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units whose symbol parts the query mentions, by the share of parts matched."""
    vocab = index.by_symbol_token
    hits: dict[int, set[str]] = {}
    for word in set(query.tokens):
        for token in _matches(word, vocab):
            for pos in vocab[token]:
                hits.setdefault(pos, set()).add(token)
    scored = []
    for pos, matched in hits.items():
        parts = index.symbol_tokens[pos]
        exact = 1.0 if index.units[pos].symbol.lower() in query.lowered else 0.0
        scored.append((pos, len(matched) / (len(parts) ** 0.5) + len(matched) * 0.1 + exact))
    scored.sort(key=lambda p: -p[1])
    return scored[:n]
