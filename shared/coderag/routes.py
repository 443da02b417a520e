"""The retrieval routes, named once: every list of route names (the settings' ``route_weights``,
the retriever's route table, the learned ranker's features, the vector stages, the self-check's
doc routes) is derived from ``REGISTRY``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """One retrieval route: its name, the vector space it reads (None: it works once the keyword
    stage is published), whether the learned ranker reads its rank and score, whether the
    self-check scores doc questions with it (it reads only doc-stripped texts), and when it runs
    (0: over the whole repository; 1, 2, ...: after the others in this order, reading what they
    found)."""

    name: str
    space: str | None = None
    ranked: bool = False
    doc: bool = False
    after: int = 0


REGISTRY = (
    Route("vector", space="vector", ranked=True),
    Route("vector2", space="vector2", ranked=True),
    Route("keyword", ranked=True, doc=True),
    Route("symbol", ranked=True, doc=True),
    Route("exact", ranked=True, doc=True),
    Route("feedback", ranked=True, after=2),
    Route("cluster", space="vector"),
    Route("history", after=1),
)
"""Every route, in the order the settings list them; the learned ranker's feature columns follow
this order too, so a new route goes last."""

NAMES = tuple(r.name for r in REGISTRY)
"""Route names that ``route_weights`` can name."""

SEARCH = tuple(r.name for r in REGISTRY if not r.after)
"""Routes that search the whole repository."""

PRIOR = tuple(r.name for r in sorted((r for r in REGISTRY if r.after), key=lambda r: r.after))
"""Routes that run after the others, in their running order, and read what those found."""

RANKED = tuple(r.name for r in REGISTRY if r.ranked)
"""Routes whose rank and score are the learned ranker's features."""

DOC = tuple(r.name for r in REGISTRY if r.doc)
"""Routes the self-check scores doc questions with."""

VECTOR = {r.name: r.space for r in REGISTRY if r.space}
"""Routes that read vectors, with the space they read."""
