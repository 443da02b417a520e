"""The one retrieval path: ``retrieve()`` ranks a question's units and gives them in the wire form
that /search, /retrieve, ``coderag search|ask`` and the benchmarks all read, with whether the code
holds the answer (``relevance``) decided here once, so /search's ``below_gate`` and /ask's
refusal agree."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from coderag import chain, spaces, terms
from coderag.embedding import QueryEmbedder, query_embedder
from coderag.errors import Unavailable
from coderag.routes import format_weights
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag.store import get_catalog
from coderag.store.repos import Repo
from coderag_retriever import focus, relevance, unsafe
from coderag_retriever.query import Query
from coderag_retriever.search import Ranked, rank, routes_run

MAX_CALLERS = 5
"""Callers named per hit."""


@dataclass(frozen=True)
class Retrieval:
    """A question's hits, best first, whether the code probably does not hold the answer
    (``relevance.verdict``), and the routes that had all their data and those still waiting
    for vectors."""

    hits: list[Hit]
    below_gate: bool
    routes_ready: list[str]
    routes_missing: list[str]
    looked_for: list[str]
    unsafe: bool = False
    """The learned unsafe-request rule's verdict (``unsafe``); only for /retrieve's callers."""
    doubtful: bool = False
    """Not below the gate, but the refusal rule still doubts the code holds the answer."""
    p_absent: float | None = None
    """The refusal rule's probability behind ``below`` and ``doubtful`` (None: no learned rule
    read the hits)."""
    weak: bool = True
    """Whether a word of the question that no hit mentions refuses it (``Verdict.weak``)."""
    absent_terms: tuple[str, ...] = ()
    """Named terms of the question that none of the judged units mentions and that refuse it
    (``coderag.terms``): the check /ask's refusal applies to its own hits."""

    @property
    def lacks_answer(self) -> bool:
        """/search's ``below_gate``: the rule's verdict, or a named term that refuses, so that
        /search says what /ask refuses (issue 41)."""
        return self.below_gate or bool(self.absent_terms)


def retrieve(
    repo: str,
    query: str,
    top_k: int,
    settings: Settings,
    embedder: QueryEmbedder | None = None,
    with_code: bool = True,
    ready_only: bool = False,
    state: Repo | None = None,
) -> Retrieval:
    """The ``top_k`` best units for a question with their similarity and, ``with_code``, their
    code and what the catalog knows of them (/search leaves it out: reading the call graph
    costs a query per hit);
    query vectors from ``embedder`` (default: the process's). A vector route still being
    written searches the vectors written so far, or with ``ready_only`` (/ask) does not run,
    so an answer's refusal reads the state its rule was fitted on. The verdict reads the first
    ``relevance.JUDGED`` units whatever ``top_k`` is, so /search and /ask agree. ``state`` is the
    repository's row when the caller read it already (the row is read once per request)."""
    state = state or get_catalog().get_repo(repo)
    ready, missing = readiness(state, settings)
    lexical = ready_only and bool(missing)
    searched = without_routes(settings, missing) if lexical else settings
    with slot(searched):
        depth = max(top_k, relevance.JUDGED)
        published = (state.generation, state.registration)
        ranked = rank(repo, query, depth, searched, embedder, published)
    judged = [to_hit(r, with_code=True) for r in ranked[: relevance.JUDGED]]
    # the verdict reads the whole settings: the rule for a lexical search is chosen by them
    judgement = relevance.verdict(query, judged, settings, lexical)
    unmentioned = terms.missing_terms(query, judged)
    refuses = terms.refusing(unmentioned, judgement.below or judgement.weak)
    absent = tuple(unmentioned) if refuses else ()
    ranked = ranked[:top_k]
    hits = [to_hit(r, with_code) for r in ranked]
    if not with_code:
        return Retrieval(
            hits,
            judgement.below,
            ready,
            missing,
            [],
            p_absent=judgement.p_absent,
            weak=judgement.weak,
            absent_terms=absent,
        )
    # only /retrieve's callers (an answer) get the code, the focus, what was looked for (a
    # refusal says it; /search never does) and whether the request is unsafe
    embedder = embedder or query_embedder(settings)
    hits = with_neighbours(repo, ranked, hits)
    asked = Query(repo, query, settings.zh_vocab, settings.zh_dictionary)
    hits = focus.with_focus(asked, hits, focus_embedder(embedder))
    looked_for = relevance.looked_for(query, settings)
    declined = unsafe.declines(query, settings, embedder)
    return Retrieval(
        hits,
        judgement.below,
        ready,
        missing,
        looked_for,
        declined,
        judgement.doubtful,
        judgement.p_absent,
        judgement.weak,
        absent,
    )


def to_hit(r: Ranked, with_code: bool = False) -> Hit:
    """The wire form of a ranked unit, ``with_code`` its code and doc too."""
    u = r.unit
    return Hit(
        file=u.file,
        start_line=u.start_line,
        end_line=u.end_line,
        symbol=u.symbol,
        kind=u.kind,
        language=u.language,
        score=round(r.score, 6),
        confidence=None if r.confidence is None else round(r.confidence, 4),
        signature=u.signature,
        routes=r.routes,
        last_commit=u.last_commit,
        last_author=u.last_author,
        last_date=u.last_date,
        text=u.text if with_code else None,
        doc=u.doc if with_code else "",
        similarity=r.similarity,
        id=u.id,
    )


def with_neighbours(repo: str, ranked: list[Ranked], hits: list[Hit]) -> list[Hit]:
    """The hits with what the catalog knows of each unit and its place in the code: its doc,
    the parser's facts and whether it is test code, the hits among the others it calls, the
    symbols of the units (not test code) that call it, whether test code calls it. A unit the
    catalog no longer holds (reindexed meanwhile) keeps only its calls."""
    catalog = get_catalog()
    graph = catalog.graph()
    symbols = {r.unit.id: r.unit.symbol for r in ranked}
    units = catalog.units_by_id(h.id for h in hits)
    out = []
    for hit in hits:
        calls = [symbols[e.callee] for e in graph.callees(repo, hit.id) if e.callee in symbols]
        update: dict[str, Any] = {"calls": calls}
        if (unit := units.get(hit.id)) is not None:
            edges = graph.callers(repo, hit.id)
            callers = catalog.units_by_id(dict.fromkeys(e.caller for e in edges)).values()
            names = dict.fromkeys(c.symbol for c in callers if not c.is_test)
            update |= {
                "doc": unit.doc,
                "facts": unit.facts,
                "is_test": unit.is_test,
                "callers": list(names)[:MAX_CALLERS],
                "tested": any(c.is_test for c in callers),
            }
        out.append(hit.model_copy(update=update))
    return out


def focus_embedder(embedder: QueryEmbedder) -> focus.Embed:
    """Vectors of ``focus.SPACE`` (the first space when it does not run); None, and no focus
    but lexical, when the embedder is down: the answer still has its hits."""

    def embed(texts: list[str]) -> np.ndarray | None:
        try:
            running = embedder.spaces()
            space = focus.SPACE if focus.SPACE in running else (running or [spaces.MAIN])[0]
            return embedder.embed_queries(space, texts)
        except Unavailable:
            return None

    return embed


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


def readiness(state: Repo, settings: Settings) -> tuple[list[str], list[str]]:
    """(routes with all their data, routes still waiting for vectors) of a repository."""
    return chain.route_readiness(state.stages, state.complete, routes_run(settings))


def without_routes(settings: Settings, routes: list[str]) -> Settings:
    """The settings with these routes left out of the search."""
    kept = {k: v for k, v in settings.weights().items() if k not in routes}
    return settings.model_copy(update={"route_weights": format_weights(kept)})
