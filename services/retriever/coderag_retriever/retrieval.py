"""The one retrieval path: ``retrieve()`` ranks a question's units and gives them in the wire form
that /search, /retrieve, ``coderag search|ask`` and the benchmarks all read, with the score gate
decided here once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from coderag import stages
from coderag.embedding import QueryEmbedder
from coderag.gate import below_gate
from coderag.schemas import SearchHit
from coderag.settings import Settings
from coderag.store import get_catalog
from coderag.store.graph import Graph
from coderag_retriever.search import rank, routes_run, to_hit


class RetrievedHit(SearchHit):
    """A hit with its cosine similarity to the question (second encoder when it runs, else the
    main one), for the generator's gate, and the hits among the others it calls."""

    similarity: float | None = None
    calls: list[str] = Field(default_factory=list)

    def search_hit(self) -> SearchHit:
        """The /search form: no code, similarity or calls."""
        return SearchHit(**self.model_dump(include=set(SearchHit.model_fields)) | {"text": None})


@dataclass(frozen=True)
class Retrieval:
    """A question's hits, best first, whether even the best is under the score gate, and the
    routes that had all their data and those still waiting for vectors."""

    hits: list[RetrievedHit]
    below_gate: bool
    routes_ready: list[str]
    routes_missing: list[str]

    def dicts(self) -> list[dict[str, Any]]:
        """The hits as the generator reads them (the JSON of /retrieve)."""
        return [h.model_dump(mode="json") for h in self.hits]


def retrieve(
    repo: str,
    query: str,
    top_k: int,
    settings: Settings,
    embedder: QueryEmbedder | None = None,
    with_code: bool = True,
    ready_only: bool = False,
) -> Retrieval:
    """The ``top_k`` best units for a question with their similarity and, ``with_code``, their
    code and calls (/search leaves both out: reading the call graph costs a query per hit);
    query vectors from ``embedder`` (default: the process's). A vector route still being
    written searches the vectors written so far, or with ``ready_only`` (/ask) does not run,
    so an answer's refusal reads the state its rule was fitted on."""
    ready, missing = readiness(repo, settings)
    if ready_only and missing:
        settings = without_routes(settings, missing)
    with slot(settings):
        ranked = rank(repo, query, top_k, settings, embedder)
    graph = Graph(get_catalog().db) if with_code else None
    symbols = {r.unit.id: r.unit.symbol for r in ranked}
    hits = [
        RetrievedHit(
            **to_hit(r, with_text=with_code).model_dump(),
            similarity=r.similarity,
            calls=[]
            if graph is None
            else [symbols[e.callee] for e in graph.callees(repo, r.unit.id) if e.callee in symbols],
        )
        for r in ranked
    ]
    gate = settings.gate() if not (ready_only and missing) else 0.0
    return Retrieval(hits, below_gate([h.model_dump() for h in hits], gate), ready, missing)


_slots: dict[int, threading.BoundedSemaphore] = {}
_slots_guard = threading.Lock()


@contextmanager
def slot(settings: Settings) -> Iterator[None]:
    """Hold one of the process's ``CODERAG_SEARCH_SLOTS`` while ranking: ranking is CPU work,
    and forty of them at once on two cores each run slower than four at a time."""
    n = settings.slots()
    with _slots_guard:
        gate = _slots.setdefault(n, threading.BoundedSemaphore(n))
    with gate:
        yield


def readiness(repo: str, settings: Settings) -> tuple[list[str], list[str]]:
    """(routes with all their data, routes still waiting for vectors) of a repository."""
    state = get_catalog().get_repo(repo)
    if state is None:
        return routes_run(settings), []
    return stages.route_readiness(
        {s: p.model_dump() for s, p in state.stages.items()}, state.complete, routes_run(settings)
    )


def without_routes(settings: Settings, routes: list[str]) -> Settings:
    """The settings with these routes left out of the search."""
    kept = ",".join(f"{k}:{v}" for k, v in settings.weights().items() if k not in routes)
    return settings.model_copy(update={"route_weights": kept})
