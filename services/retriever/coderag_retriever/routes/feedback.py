"""Feedback route: pseudo-relevance feedback from the multilingual encoder. The names of the
units the second encoder (else the first) ranks best join the question's words in a second BM25
query, so a Chinese or loosely worded question reaches code through the words of the code that
the encoder already found near it."""

from __future__ import annotations

from coderag.routes import COSINE
from coderag_retriever.index import RepoIndex, bm25_scores
from coderag_retriever.query import Query

SEEDS = 3
"""Best encoder hits whose names feed the query."""


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units by BM25 over the question's tokens plus the seed units' name parts."""
    # the last space's ranking that found anything: the second encoder's, else the main one's
    seeds = next((query.rankings[r] for r in reversed(COSINE) if query.rankings.get(r)), [])
    words = [t for pos, _ in seeds[:SEEDS] for t in sorted(index.symbol_tokens[pos])]
    if not words:
        return []
    return bm25_scores(index, query.tokens + words, n)
