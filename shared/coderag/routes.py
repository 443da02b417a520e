"""The retrieval routes, named once: every list of route names (the settings' ``route_weights``
and its default, the retriever's route table, the learned ranker's features, the vector stages,
the self-check's doc routes, the routes that search an LLM's extra queries) is derived from
``REGISTRY``, and ``route_weights`` is read by ``parse_weights`` alone."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Route:
    """One retrieval route: its name, its default weight in the fusion, the vector space it reads
    (None: it works once the keyword stage is published), whether the learned ranker reads its
    rank and score, whether the self-check scores doc questions with it (it reads only
    doc-stripped texts), when it runs (0: over the whole repository; 1, 2, ...: after the others
    in this order, reading what they found) and whether it searches the extra queries of
    ``CODERAG_QUERY_REWRITE=llm`` (0: no; 1, 2, ...: in this order)."""

    name: str
    weight: float
    space: str | None = None
    ranked: bool = False
    doc: bool = False
    after: int = 0
    rewrite: int = 0


REGISTRY = (
    Route("vector", 0.5, space="vector", ranked=True, rewrite=2),
    Route("vector2", 1.0, space="vector2", ranked=True, rewrite=3),
    Route("keyword", 1.0, ranked=True, doc=True, rewrite=1),
    Route("symbol", 0.5, ranked=True, doc=True),
    Route("exact", 2.0, ranked=True, doc=True),
    Route("feedback", 0.0, ranked=True, after=2),
    Route("cluster", 0.0, space="vector"),
    Route("history", 0.0, after=1),
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

COSINE = tuple(r.name for r in REGISTRY if r.ranked and r.space)
"""Ranked routes that read vectors, one per space in the spaces' order: their cosines are the
learned ranker's features, and the score gate reads the last that runs."""

REWRITE = tuple(r.name for r in sorted((r for r in REGISTRY if r.rewrite), key=lambda r: r.rewrite))
"""Routes that search an LLM's extra queries, in the order their rankings are fused (the
fusion's sums and ties follow it)."""


def format_weights(weights: dict[str, float]) -> str:
    """``weights`` in ``route_weights``' form: ``route:weight`` pairs joined by commas."""
    return ",".join(f"{name}:{weight}" for name, weight in weights.items())


DEFAULT_WEIGHTS = format_weights({r.name: r.weight for r in REGISTRY})
"""The default of ``route_weights``: every route at its registered weight."""


def parse_weights(text: str) -> dict[str, float]:
    """``route_weights`` as a mapping of route to weight, in the order given; ValueError naming
    an unknown route or an entry that is not ``route:weight`` with a weight >= 0."""
    return dict(_parsed(text))


@lru_cache(maxsize=64)
def _parsed(text: str) -> tuple[tuple[str, float], ...]:
    # cached: the settings check the value once and every search reads it again
    out: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, weight = item.partition(":")
        if name.strip() not in NAMES:
            raise ValueError(f"unknown route {name.strip()!r}; routes: {', '.join(NAMES)}")
        try:
            value = float(weight)
            if not sep or value < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"{item!r} is not route:weight with a weight >= 0") from None
        out[name.strip()] = value
    return tuple(out.items())
