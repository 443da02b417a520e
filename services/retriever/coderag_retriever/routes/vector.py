"""Vector routes: the query's embedding against the unit vectors of one space in Chroma
(``vector`` for the main encoder, ``vector2`` for the second)."""

from __future__ import annotations

from collections.abc import Callable

from coderag.store import get_vectors
from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query

Route = Callable[[Query, RepoIndex, int], list[tuple[int, float]]]


def route(space: str) -> Route:
    """The vector route of one space."""

    def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
        """Units by cosine similarity."""
        vector = query.vector(space)
        if vector is None:
            return []
        out = []
        # the index knows its registration: the collection's name needs no read of the row
        found = get_vectors().query(query.repo, vector, n, space, index.registration or None)
        for uid, sim in found:
            pos = index.position.get(uid)
            if pos is not None:
                out.append((pos, sim))
        return out

    return rank
