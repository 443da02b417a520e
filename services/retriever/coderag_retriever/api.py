"""POST /search, and POST /retrieve (the generator's call: hits with their code, no audit row)."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, Field

from coderag import audit, stages
from coderag.deps import CatalogDep, SettingsDep, UserDep, require_query, require_searchable
from coderag.errors import InvalidInput
from coderag.redact import redact
from coderag.responses import errors
from coderag.schemas import SearchHit, SearchRequest, SearchResponse
from coderag.store.graph import Graph
from coderag_retriever.search import below_gate, rank, routes_run, to_hit

router = APIRouter(tags=["search"])


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Nothing to load: indexes are built on first use and kept per generation."""
    yield


class RetrievedHit(SearchHit):
    """A hit with its cosine similarity to the question (second encoder when it runs, else the
    main one), for the generator's gate."""

    similarity: float | None = None
    calls: list[str] = Field(default_factory=list)


class RetrieveResponse(BaseModel):
    """Hits with code for the generator."""

    results: list[RetrievedHit]
    took_ms: float


def _check(body: SearchRequest, settings: SettingsDep, catalog: CatalogDep) -> str:
    query = require_query(body.query, settings)
    if body.top_k > settings.max_top_k:
        raise InvalidInput(f"top_k is {body.top_k}; the limit is {settings.max_top_k}")
    require_searchable(catalog, body.repo)
    return query


@router.post("/search", responses=errors(400, 404, 409, 503))
def search(
    body: SearchRequest, settings: SettingsDep, catalog: CatalogDep, user: UserDep
) -> SearchResponse:
    """The best units for a query, best first."""
    start = time.perf_counter()
    query = _check(body, settings, catalog)
    ranked = rank(body.repo, query, body.top_k, settings)
    gated = below_gate(ranked, settings.gate())
    hits = [to_hit(r) for r in ranked]
    took = (time.perf_counter() - start) * 1000
    audit.record(
        catalog,
        user=user,
        endpoint="search",
        repo=body.repo,
        query=redact(query)[0],  # a pasted secret stays out of the log
        files=list(dict.fromkeys(h.file for h in hits)),
        input_tokens=0,
        response_ms=took,
        status="ok",
    )
    state = catalog.get_repo(body.repo)
    ready, missing = stages.route_readiness(
        {s: p.model_dump() for s, p in state.stages.items()}, state.complete, routes_run(settings)
    )
    return SearchResponse(
        results=hits,
        took_ms=round(took, 2),
        below_gate=gated,
        routes_ready=ready,
        routes_missing=missing,
    )


@router.post("/retrieve", responses=errors(400, 404, 409, 503))
def retrieve(
    body: SearchRequest, settings: SettingsDep, catalog: CatalogDep, _user: UserDep
) -> RetrieveResponse:
    """Like /search, with each unit's code and vector similarity; not audited (the caller is)."""
    start = time.perf_counter()
    query = _check(body, settings, catalog)
    ranked = rank(body.repo, query, body.top_k, settings)
    graph = Graph(catalog.db)
    symbols = {r.unit.id: r.unit.symbol for r in ranked}
    results = [
        RetrievedHit(
            **to_hit(r, with_text=True).model_dump(),
            similarity=r.similarity,
            calls=[
                symbols[e.callee]
                for e in graph.callees(body.repo, r.unit.id)
                if e.callee in symbols
            ],
        )
        for r in ranked
    ]
    return RetrieveResponse(results=results, took_ms=round((time.perf_counter() - start) * 1000, 2))
