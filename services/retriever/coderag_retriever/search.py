"""Hybrid search: routes, fusion, test penalty, call-graph expansion, rerank, MMR."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from coderag import gate as score_gate
from coderag import routes
from coderag.embedding import QueryEmbedder, query_embedder, reader_text
from coderag.schemas import Unit
from coderag.settings import Settings
from coderag.store import get_catalog
from coderag.store.graph import Graph
from coderag_retriever import focus, learned
from coderag_retriever.expand import expand, is_flow_question
from coderag_retriever.fuse import mmr, rrf, vote
from coderag_retriever.index import RepoIndex, get_index_cache
from coderag_retriever.query import Query
from coderag_retriever.rewrite import REWRITE_SHARE, llm_queries
from coderag_retriever.routes import PRIOR_ROUTES, ROUTES

POOL = 50
"""Fused candidates kept for expansion, MMR and reranking before the final cut."""

WRAPPER_STATEMENTS = 2
"""A function whose body is at most this many statements is a thin wrapper when it calls one of
the other first hits (``delegate``)."""

WRAPPER_REACH = 10
"""How far down the order a wrapper's callee may be and still be put first."""

CALLABLE_KINDS = frozenset({"function", "method"})
"""Unit kinds that can be thin wrappers."""


@dataclass
class Ranked:
    """A fused result with its unit."""

    unit: Unit
    score: float
    routes: dict[str, int]
    similarity: float | None
    confidence: float | None = None


def rank(
    repo: str,
    text: str,
    top_k: int,
    settings: Settings,
    embedder: QueryEmbedder | None = None,
    published: tuple[int, str] | None = None,
) -> list[Ranked]:
    """The ``top_k`` best units of a repository for a question.

    Routes → (history over their candidates) → (the routes again for LLM-rewritten queries,
    ``keyword@1`` ...) → fusion → test penalty → call-graph expansion
    (one hop, or ``expand_depth`` for flow questions) → the learned ranker (or the fused order)
    → the cross-encoder over the first ``rerank_top`` → MMR → top_k. Query vectors and
    cross-encoder scores come from ``embedder`` (default: the process's,
    :func:`coderag.embedding.query_embedder`). ``published``: the (generation, registration id)
    of the repository's row when the caller read it already.
    """
    pool = gather(repo, text, settings, embedder, published)
    if pool is None:
        return []
    scores, confidence = pool.expanded, {}
    order = sorted(scores, key=lambda p: -scores[p])[:POOL]
    if settings.ranker == "learned":
        positions, x = learned.features(
            pool.query, pool.index, pool.rankings, pool.candidates(), pool.flow
        )
        probability = learned.load(settings.ranker_path).probability(x)
        confidence = dict(zip(positions, probability.tolist(), strict=True))
        order = sorted(confidence, key=lambda p: -confidence[p])[:POOL]
        scores = confidence
    if settings.rerank_model and settings.rerank_top:
        order = rerank(pool, order, confidence, settings, embedder or query_embedder(settings))
        scores = {p: 1.0 / (i + 1) for i, p in enumerate(order)}
    if settings.wrapper_callee and order:
        order = delegate(repo, order, pool)
    order = implemented_first(order, pool)
    if settings.mmr_lambda < 1.0:
        order = mmr(order, scores, pool.index.vectors(), settings.mmr_lambda, top_k)
    return [
        Ranked(
            pool.index.units[p],
            scores[p],
            pool.routes.get(p, {"graph": 1}),
            pool.sims.get(p),
            confidence.get(p),
        )
        for p in order[:top_k]
    ]


def delegate(repo: str, order: list[int], pool: Pool) -> list[int]:
    """The order with the callee first when the first hit is a thin wrapper (a function of at
    most ``WRAPPER_STATEMENTS`` statements) that calls a hit within ``WRAPPER_REACH`` and the
    question does not name it: a question that describes the work asks for the unit doing it
    (issue 31, lever 4)."""
    first = order[0]
    unit = pool.index.units[first]
    if unit.kind not in CALLABLE_KINDS or "exact" in pool.routes.get(first, {}):
        return order
    lines = unit.text.splitlines()
    if len(focus.statements(lines, focus.body_start(lines))) > WRAPPER_STATEMENTS:
        return order
    edges = get_catalog().graph().callees(repo, unit.id)
    callees = {pool.index.position.get(e.callee) for e in edges} - {first, None}
    for i, p in enumerate(order[1:WRAPPER_REACH], 1):
        if p in callees:
            return [p, *order[:i], *order[i + 1 :]]
    return order


IMPLEMENTATION_REACH = 10
"""How far down the order a declaration's implementation is looked for, and the declarations
looked at: the first this many."""

IMPLEMENTING_KINDS = frozenset({"function", "method", "class"})
"""Kinds of unit that a declaration declares and an implementation implements."""

_NAME_PARTS = re.compile(r"\.|::|#")


def implemented_first(order: list[int], pool: Pool) -> list[int]:
    """The order with each declaration's implementation (a unit of the same name that does not
    just declare, ranked within ``IMPLEMENTATION_REACH`` below it) moved just above it, unless
    the question asks for a declaration: a declaration never outranks its implementation
    (issue 42). The ranker's declaration feature is not enough where both encoders prefer the
    declaration's prose: pino.d.ts's ``LoggerExtras.child``, all JSDoc, led ``child`` in
    lib/proto.js, all code (issue 43's fourth trial)."""
    if learned.ASKS_DECLARATION.search(pool.query.text):
        return order
    units = pool.index.units
    out = list(order)
    i = 0
    while i < min(len(out), IMPLEMENTATION_REACH):
        u = units[out[i]]
        if u.kind in IMPLEMENTING_KINDS and learned.is_declaration(u.file, u.kind, u.text):
            leaf = _NAME_PARTS.split(u.symbol)[-1]
            for j in range(i + 1, min(len(out), i + 1 + IMPLEMENTATION_REACH)):
                v = units[out[j]]
                if (
                    v.kind in IMPLEMENTING_KINDS
                    and _NAME_PARTS.split(v.symbol)[-1] == leaf
                    and not learned.is_declaration(v.file, v.kind, v.text)
                ):
                    out.insert(i, out.pop(j))
                    i += 1  # the declaration, now just below: not looked at again
                    break
        i += 1
    return out


def rerank(
    pool: Pool,
    order: list[int],
    confidence: dict[int, float],
    settings: Settings,
    scorer: QueryEmbedder,
) -> list[int]:
    """``order`` with its first ``rerank_top`` reordered by the cross-encoder's logit plus
    ``rerank_weight`` times the log-odds of the learned ranker's confidence (R7, issue 31)."""
    head, tail = order[: settings.rerank_top], order[settings.rerank_top :]
    units = [pool.index.units[p] for p in head]
    texts = [reader_text(u.file, u.kind, u.symbol, u.doc, u.text) for u in units]
    logits = scorer.rerank(pool.query.embedding_text(), texts, settings.rerank_model)
    combined = {
        p: s + settings.rerank_weight * log_odds(confidence.get(p))
        for p, s in zip(head, logits, strict=True)
    }
    return sorted(head, key=lambda p: -combined[p]) + tail


def log_odds(p: float | None) -> float:
    """The log-odds of a probability (0 for none), clipped away from 0 and 1."""
    if p is None:
        return 0.0
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


@dataclass
class Pool:
    """Everything the routes, fusion and expansion found for one question."""

    query: Query
    index: RepoIndex
    rankings: dict[str, list[tuple[int, float]]]
    routes: dict[int, dict[str, int]]
    fused: dict[int, float]
    expanded: dict[int, float]
    sims: dict[int, float]
    flow: bool
    adjacency: dict[int, int]
    first: int | None
    first_neighbours: set[int] = field(default_factory=set)

    def candidates(self) -> dict[int, learned.Candidate]:
        """The expanded candidates as the learned ranker sees them."""
        return {
            p: learned.Candidate(
                ranks=self.routes.get(p, {}),
                fused=self.fused.get(p, 0.0),
                expanded=s,
                adjacent_seeds=self.adjacency.get(p, 0),
                adjacent_first=p in self.first_neighbours,
            )
            for p, s in self.expanded.items()
        }


def route_runs(name: str, settings: Settings) -> bool:
    """Whether a route runs under these settings."""
    weights = settings.weights()
    if weights.get(name, 0.0) > 0:
        return True
    # The learned ranker reads a listed route's ranks even when the fusion weighs it 0.
    return settings.ranker == "learned" and name in weights and name in learned.RANKED_ROUTES


def routes_run(settings: Settings) -> list[str]:
    """The routes a search runs, in their running order."""
    return [name for name in (*ROUTES, *PRIOR_ROUTES) if route_runs(name, settings)]


def gather(
    repo: str,
    text: str,
    settings: Settings,
    embedder: QueryEmbedder | None = None,
    published: tuple[int, str] | None = None,
) -> Pool | None:
    """Run the routes, fuse them and expand over the call graph; None for an empty index."""
    catalog = get_catalog()
    index = get_index_cache().get(catalog, repo, published)
    if not len(index):
        return None
    known = index.postings.terms.__contains__ if settings.zh_repo_words else None

    def asked(words: str) -> Query:
        return Query(
            repo,
            words,
            vocab=settings.zh_vocab,
            dictionary=settings.zh_dictionary,
            embedder=embedder,
            known=known,
        )

    query = asked(text)
    rankings = run_routes(query, index, settings)
    weights = settings.weights()
    if settings.query_rewrite == "llm":
        extra = [asked(words) for words in llm_queries(text, settings)]
        more, more_weights = rewritten(extra, index, settings, weights)
        rankings, weights = {**rankings, **more}, {**weights, **more_weights}
    fused = fuse(rankings, weights, settings)
    scores = penalised(fused, index, query, settings)
    flow = is_flow_question(text)
    graph = catalog.graph()
    expanded = expanded_scores(graph, repo, index, scores, settings, flow)
    ties = (
        Ties.of(graph, repo, index, scores) if settings.ranker == "learned" else Ties.none(scores)
    )
    return Pool(
        query,
        index,
        rankings,
        {pos: ranks for pos, _, ranks in fused},
        scores,
        expanded,
        gate_sims(rankings, settings),
        flow,
        ties.adjacency,
        ties.first,
        ties.first_neighbours,
    )


def run_routes(
    query: Query, index: RepoIndex, settings: Settings
) -> dict[str, list[tuple[int, float]]]:
    """Each route's ranking that runs under ``settings``: those searching the whole repository,
    then those reading what these found, in their running order."""
    rankings = {
        name: route(query, index, settings.route_depth)
        for name, route in ROUTES.items()
        if route_runs(name, settings)
    }
    found = query.after(rankings)
    for name, route in PRIOR_ROUTES.items():
        if route_runs(name, settings):
            rankings[name] = route(found, index, settings.route_depth)
    return rankings


def rewritten(
    extra: list[Query], index: RepoIndex, settings: Settings, weights: dict[str, float]
) -> tuple[dict[str, list[tuple[int, float]]], dict[str, float]]:
    """The rankings of an LLM's extra queries (``keyword@1``, ...) by the routes that search
    them, with their weights (a share of their route's)."""
    rankings: dict[str, list[tuple[int, float]]] = {}
    shares: dict[str, float] = {}
    for i, other in enumerate(extra, 1):
        for name in routes.REWRITE:
            if weights.get(name, 0.0) > 0:
                rankings[f"{name}@{i}"] = ROUTES[name](other, index, settings.route_depth)
                shares[f"{name}@{i}"] = weights[name] * REWRITE_SHARE
    return rankings, shares


def gate_sims(rankings: dict[str, list[tuple[int, float]]], settings: Settings) -> dict[int, float]:
    """Each candidate's cosine in the space the score gate reads (none when no vector route
    runs)."""
    # The gate reads the second encoder's cosines when it runs: they separate questions the code
    # cannot answer better than the main encoder's (docs/BENCHMARKS.md, score gate).
    space = score_gate.space(settings)
    return dict(rankings.get(space, [])) if space else {}


def fuse(
    rankings: dict[str, list[tuple[int, float]]], weights: dict[str, float], settings: Settings
) -> list[tuple[int, float, dict[str, int]]]:
    """The routes' rankings fused by ``settings.fusion``: (position, score, route ranks)."""
    if settings.fusion == "vote":
        return vote(rankings, weights)
    return rrf(rankings, weights, settings.rrf_k)


def penalised(
    fused: list[tuple[int, float, dict[str, int]]],
    index: RepoIndex,
    query: Query,
    settings: Settings,
) -> dict[int, float]:
    """The first ``POOL`` fused scores, test code's scaled by ``test_penalty`` unless the
    question is about tests."""
    scores: dict[int, float] = {}
    for pos, score, _ in fused[:POOL]:
        unit = index.units[pos]
        scores[pos] = (
            score * settings.test_penalty if unit.is_test and not query.about_tests else score
        )
    return scores


def expanded_scores(
    graph: Graph,
    repo: str,
    index: RepoIndex,
    scores: dict[int, float],
    settings: Settings,
    flow: bool,
) -> dict[int, float]:
    """The scores with call-graph neighbours added: ``expand_depth`` hops for a flow question,
    one for others, none when expansion is off."""
    if not settings.expand_depth:
        return dict(scores)
    by_id = expand(
        graph,
        repo,
        {index.ids[p]: s for p, s in scores.items()},
        settings.expand_depth if flow else 1,
    )
    return {index.position[u]: s for u, s in by_id.items() if u in index.position}


@dataclass(frozen=True)
class Ties:
    """The call-graph ties the learned ranker reads: the best fused hit, how many of the best
    ``learned.SEEDS`` each candidate neighbours, and the first hit's neighbours."""

    first: int | None
    adjacency: dict[int, int]
    first_neighbours: set[int]

    @classmethod
    def none(cls, scores: dict[int, float]) -> Ties:
        """Only the best hit: the fused order needs no ties."""
        return cls(max(scores, key=lambda p: scores[p]) if scores else None, {}, set())

    @classmethod
    def of(cls, graph: Graph, repo: str, index: RepoIndex, scores: dict[int, float]) -> Ties:
        """The ties of the best ``learned.SEEDS`` hits of ``scores``."""
        first = cls.none(scores).first
        adjacency: dict[int, int] = {}
        first_neighbours: set[int] = set()
        for seed in sorted(scores, key=lambda p: -scores[p])[: learned.SEEDS]:
            for uid in graph.neighbourhood(repo, [index.ids[seed]], 1):
                pos = index.position.get(uid)
                if pos is not None and pos != seed:
                    adjacency[pos] = adjacency.get(pos, 0) + 1
                    if seed == first:
                        first_neighbours.add(pos)
        return cls(first, adjacency, first_neighbours)
