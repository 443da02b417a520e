"""Hybrid search: run the routes, fuse, down-weight tests unless asked about, return hits."""

from __future__ import annotations

from dataclasses import dataclass

from coderag.schemas import SearchHit, Unit
from coderag.settings import Settings
from coderag.store import get_catalog

from coderag_retriever.fuse import rrf
from coderag_retriever.index import get_index_cache
from coderag_retriever.query import Query
from coderag_retriever.routes import ROUTES

TEST_PENALTY = 0.5
"""Factor applied to test code's fused score when the question is not about tests."""


@dataclass
class Ranked:
    """A fused result with its unit."""

    unit: Unit
    score: float
    routes: dict[str, int]
    similarity: float | None


def rank(repo: str, text: str, top_k: int, settings: Settings) -> list[Ranked]:
    """The ``top_k`` best units of a repository for a question."""
    index = get_index_cache().get(get_catalog(), repo)
    if not len(index):
        return []
    query = Query(repo, text)
    weights = settings.weights()
    rankings = {
        name: route(query, index, settings.route_depth)
        for name, route in ROUTES.items()
        if weights.get(name, 0.0) > 0
    }
    sims = dict(rankings.get("vector", []))
    fused = rrf(rankings, weights, settings.rrf_k)
    out = []
    for pos, score, ranks in fused:
        unit = index.units[pos]
        if unit.is_test and not query.about_tests:
            score *= TEST_PENALTY
        out.append(Ranked(unit, score, ranks, sims.get(pos)))
    out.sort(key=lambda r: -r.score)
    return out[:top_k]


def to_hit(r: Ranked, with_text: bool = False) -> SearchHit:
    """The wire form of a ranked unit."""
    u = r.unit
    return SearchHit(
        file=u.file,
        start_line=u.start_line,
        end_line=u.end_line,
        symbol=u.symbol,
        kind=u.kind,
        language=u.language,
        score=round(r.score, 6),
        signature=u.signature,
        routes=r.routes,
        last_commit=u.last_commit,
        last_author=u.last_author,
        last_date=u.last_date,
        text=u.text if with_text else None,
    )
