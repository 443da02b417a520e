"""Vector route: the query's embedding against the unit vectors in Chroma."""

from __future__ import annotations

from coderag.store import get_vectors
from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units by cosine similarity."""
    out = []
    for uid, sim in get_vectors().query(query.repo, query.vector(), n):
        pos = index.position.get(uid)
        if pos is not None:
            out.append((pos, sim))
    return out
