"""Cluster route (seed 004 stage 2): the query goes to the HDBSCAN cluster whose centroid is
nearest, and that cluster's units closest to the query rank first."""

from __future__ import annotations

import numpy as np

from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query

CLUSTERS_VISITED = 2
"""Nearest clusters whose members are ranked (a query often sits between two)."""


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units of the nearest clusters by cosine similarity to the query."""
    labels = index.labels
    if not len(labels) or labels.max() < 0:
        return []
    q = query.vector()
    if q is None:
        return []
    vectors = index.vectors()
    if vectors.shape[1] != len(q):
        return []  # the units are not embedded (yet) in the query's space
    names = [c for c in np.unique(labels) if c >= 0]
    centroids = np.stack([vectors[labels == c].mean(axis=0) for c in names])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True) + 1e-9
    nearest = [names[i] for i in np.argsort(-(centroids @ q))[:CLUSTERS_VISITED]]
    members = np.flatnonzero(np.isin(labels, nearest))
    sims = vectors[members] @ q
    order = np.argsort(-sims)[:n]
    return [(int(members[i]), float(sims[i])) for i in order]
