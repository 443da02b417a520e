"""POST /search, and POST /retrieve (the generator's call: hits with their code, no audit row)."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request

from coderag import audit
from coderag.deps import CatalogDep, SettingsDep, UserDep, require_query, require_searchable
from coderag.embedding import QueryEmbedder, query_embedder
from coderag.errors import InvalidInput
from coderag.redact import redact
from coderag.responses import errors
from coderag.schemas import RetrieveResponse, SearchRequest, SearchResponse
from coderag.settings import get_settings
from coderag.store import get_catalog, refs
from coderag.store.repos import Repo
from coderag_retriever import dictionary, retrieval
from coderag_retriever.index import get_index_cache
from coderag_retriever.text import STOP_WORDS

router = APIRouter(tags=["search"])


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Indexes are built in the background at startup and kept per generation; an embedder for
    queries must be reachable by configuration (its URL, or in this process), and the Chinese
    dictionary installed when it is on, else startup stops."""
    query_embedder()
    if get_settings().zh_dictionary:
        dictionary.warm(STOP_WORDS)
    get_index_cache().warm(get_catalog())
    yield


def _embedder(request: Request, settings: SettingsDep) -> QueryEmbedder:
    """The embedder for this request's query, with the caller's authorization."""
    return query_embedder(settings, request.headers.get("authorization"))


def _check(body: SearchRequest, settings: SettingsDep, catalog: CatalogDep) -> tuple[str, Repo]:
    """(the query, the row of the repository or ref searched, read once for the request), or
    the error to answer."""
    query = require_query(body.query, settings)
    if body.top_k > settings.max_top_k:
        raise InvalidInput(f"top_k is {body.top_k}; the limit is {settings.max_top_k}")
    state = refs.resolve_repo(catalog, body.repo, body.ref)
    require_searchable(state)
    return query, state


@router.post("/search", responses=errors(400, 404, 409, 503))
def search(
    body: SearchRequest,
    settings: SettingsDep,
    catalog: CatalogDep,
    user: UserDep,
    request: Request,
) -> SearchResponse:
    """The best units for a query, best first."""
    start = time.perf_counter()
    query, state = _check(body, settings, catalog)
    embedder = _embedder(request, settings)
    found = retrieval.retrieve(
        state.name, query, body.top_k, settings, embedder, with_code=False, state=state
    )
    hits = [h.search_hit() for h in found.hits]
    took = (time.perf_counter() - start) * 1000
    audit.record(
        catalog,
        user=user,
        endpoint="search",
        repo=refs.label(body.repo, body.ref),
        query=redact(query)[0],  # a pasted secret stays out of the log
        files=list(dict.fromkeys(h.file for h in hits)),
        input_tokens=0,
        response_ms=took,
        status="ok",
    )
    return SearchResponse(
        results=hits,
        took_ms=round(took, 2),
        below_gate=found.lacks_answer,
        routes_ready=found.routes_ready,
        routes_missing=found.routes_missing,
    )


@router.post("/retrieve", responses=errors(400, 404, 409, 503))
def retrieve(
    body: SearchRequest,
    settings: SettingsDep,
    catalog: CatalogDep,
    _user: UserDep,
    request: Request,
) -> RetrieveResponse:
    """Like /search, with each unit's code and vector similarity; not audited (the caller is)."""
    start = time.perf_counter()
    query, state = _check(body, settings, catalog)
    embedder = _embedder(request, settings)
    found = retrieval.retrieve(
        state.name, query, body.top_k, settings, embedder, ready_only=True, state=state
    )
    return RetrieveResponse(
        results=found.hits,
        took_ms=round((time.perf_counter() - start) * 1000, 2),
        below_gate=found.below_gate,
        routes_missing=found.routes_missing,
        looked_for=found.looked_for,
        unsafe=found.unsafe,
        doubtful=found.doubtful,
        weak=found.weak,
    )
