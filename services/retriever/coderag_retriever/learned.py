"""The learned ranker: a logistic model over each candidate's route ranks and scores, unit
features and call-graph ties to the other hits, trained offline (``bench/train_ranker.py``, with
``coderag_training.ranker``) on the tuning split only and shipped as ``ranker.json``.

Its probability is also the hit's ``confidence``: trained pointwise on "is this candidate a gold
unit", so 0.8 means that, on the tuning questions, about four in five candidates scored so were
answers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from coderag import routes
from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query
from coderag_retriever.text import code_tokens, has_chinese

RANKED_ROUTES = routes.RANKED
"""Routes whose rank and score are features."""

DOC_LANGUAGES = frozenset({"markdown", "rst", "text"})
"""Languages of prose units: documentation, not code."""

SEEDS = 5
"""Best fused hits whose call-graph neighbours get the adjacency features."""

FEATURES = (
    *(f"rr_{r}" for r in RANKED_ROUTES),
    *(f"score_{r}" for r in RANKED_ROUTES),
    *(f"cos_{r}" for r in routes.COSINE),
    "fused",
    "expanded",
    "graph_only",
    "adjacent_seeds",
    "adjacent_first",
    "file_share",
    "file_rr",
    "test_unasked",
    "test_asked",
    "kind_callable",
    "kind_class",
    "kind_block",
    "kind_file",
    "is_doc",
    "log_lines",
    "symbol_overlap",
    "path_overlap",
    "doc_overlap",
    *(f"zh_rr_{r}" for r in RANKED_ROUTES),
    "flow_adjacent",
)
"""Feature names, in column order; ``ranker.json`` names them too and must match."""


@dataclass
class Candidate:
    """What the ranker knows of one candidate unit besides the unit itself."""

    ranks: dict[str, int]
    fused: float
    expanded: float
    adjacent_seeds: int
    adjacent_first: bool


TOKEN_SETS_KEPT = 1 << 16
"""Paths and docs whose token sets are kept between queries (tokenizing a candidate's path and
doc was two fifths of the interpreter time a search holds)."""


@lru_cache(maxsize=TOKEN_SETS_KEPT)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(code_tokens(text))


def _overlap(query: set[str], tokens: frozenset[str] | set[str]) -> float:
    if not query:
        return 0.0
    return len(query & tokens) / len(query)


def features(
    query: Query,
    index: RepoIndex,
    rankings: dict[str, list[tuple[int, float]]],
    candidates: dict[int, Candidate],
    flow: bool,
) -> tuple[list[int], np.ndarray]:
    """The feature matrix of the candidates, rows in the order of the returned positions."""
    tops = {r: max((s for _, s in rankings.get(r, [])), default=0.0) or 1.0 for r in RANKED_ROUTES}
    score_of = {r: dict(rankings.get(r, [])) for r in RANKED_ROUTES}
    fused_top = max((c.fused for c in candidates.values()), default=0.0) or 1.0
    expanded_top = max((c.expanded for c in candidates.values()), default=0.0) or 1.0
    zh = has_chinese(query.text)
    words = set(query.tokens)
    order = sorted(candidates, key=lambda p: -candidates[p].expanded)
    # A file whose units rank well together is likely the right place (answers cluster in files).
    per_file: dict[str, float] = {}
    for p in order:
        f = index.units[p].file
        per_file[f] = per_file.get(f, 0.0) + candidates[p].expanded
    total = sum(per_file.values()) or 1.0
    file_order = {f: i for i, f in enumerate(sorted(per_file, key=lambda f: -per_file[f]), 1)}
    rows = []
    for pos in order:
        c, u = candidates[pos], index.units[pos]
        rr = {r: (1.0 / c.ranks[r] if r in c.ranks else 0.0) for r in RANKED_ROUTES}
        adjacent = c.adjacent_seeds / SEEDS
        row = [
            *(rr[r] for r in RANKED_ROUTES),
            *(max(score_of[r].get(pos, 0.0), 0.0) / tops[r] for r in RANKED_ROUTES),
            *(score_of[r].get(pos, 0.0) for r in routes.COSINE),
            c.fused / fused_top,
            c.expanded / expanded_top,
            float(not c.ranks),
            adjacent,
            float(c.adjacent_first),
            (per_file[u.file] - c.expanded) / total,
            1.0 / file_order[u.file],
            float(u.is_test and not query.about_tests),
            float(u.is_test and query.about_tests),
            float(u.kind in ("function", "method")),
            float(u.kind in ("class", "interface", "type")),
            float(u.kind == "block"),
            float(u.kind == "file"),
            float(u.language in DOC_LANGUAGES),
            math.log1p(u.end_line - u.start_line + 1) / math.log(500),
            _overlap(words, index.symbol_tokens[pos]),
            _overlap(words, _token_set(u.file)),
            _overlap(words, _token_set(u.doc)),
            *((rr[r] if zh else 0.0) for r in RANKED_ROUTES),
            adjacent if flow else 0.0,
        ]
        rows.append(row)
    return order, np.array(rows, dtype=np.float64).reshape(len(order), len(FEATURES))


@dataclass(frozen=True)
class Ranker:
    """A linear score over standardised features, and a logistic calibration of that score."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    calibration: tuple[float, float] = (1.0, 0.0)

    def score(self, x: np.ndarray) -> np.ndarray:
        """The ranking score of each row."""
        return ((x - self.mean) / self.scale) @ self.weights + self.bias

    def probability(self, x: np.ndarray) -> np.ndarray:
        """P(candidate is an answer) for each row; orders rows as ``score`` does."""
        a, b = self.calibration
        return 1.0 / (1.0 + np.exp(-(a * self.score(x) + b)))

    def to_json(self, trained_on: dict) -> str:
        """The shipped form, with how it was trained."""
        return json.dumps(
            {
                "features": list(FEATURES),
                "mean": self.mean.round(6).tolist(),
                "scale": self.scale.round(6).tolist(),
                "weights": self.weights.round(6).tolist(),
                "bias": round(self.bias, 6),
                "calibration": [round(c, 6) for c in self.calibration],
                "trained_on": trained_on,
            },
            indent=1,
        )


def parse(text: str) -> Ranker:
    """A ranker from its JSON; features must match this version's."""
    data = json.loads(text)
    if tuple(data["features"]) != FEATURES:
        raise ValueError("ranker.json was trained on other features; retrain it")
    return Ranker(
        np.array(data["mean"]),
        np.array(data["scale"]),
        np.array(data["weights"]),
        data["bias"],
        tuple(data.get("calibration", (1.0, 0.0))),
    )


@cache
def load(path: str = "") -> Ranker:
    """The ranker at ``path``, or the shipped one."""
    if path:
        return parse(Path(path).read_text("utf-8"))
    return parse(resources.files("coderag_retriever").joinpath("ranker.json").read_text("utf-8"))
