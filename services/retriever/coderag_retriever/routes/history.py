"""History route (seed 004 stage 3): among what the other routes found, files changed often in the
last days and referenced widely rank first. It has no opinion of its own about the question."""

from __future__ import annotations

from coderag.store import get_catalog
from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Candidate units by their file's history score."""
    if not query.candidates:
        return []

    history = index.history_scores(get_catalog(), query.repo)
    if not len(history):
        return []
    scored = [(p, float(history[p])) for p in query.candidates if history[p] > 0]
    scored.sort(key=lambda t: -t[1])
    return scored[:n]
