"""Keyword route: BM25 over unit tokens (identifiers split, stemmed; Chinese mapped to English)."""

from __future__ import annotations

from coderag_retriever.index import RepoIndex, bm25_scores
from coderag_retriever.query import Query


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units by BM25 score."""
    return bm25_scores(index, query.tokens, n)
