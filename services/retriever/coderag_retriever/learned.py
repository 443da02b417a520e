"""The learned ranker: a linear model over each candidate's route ranks and scores, unit
features (among them whether the unit only declares, and how much of the question its text
holds) and call-graph ties to the other hits, fitted offline (``coderag_training.fit.ranker``)
on the tuning corpora and the written training questions, never a frozen split, and shipped as
``ranker.json`` with its card.

Its probability is also the hit's ``confidence``: the score calibrated on "is this candidate a
gold unit", so 0.8 means that, on the training questions, about four in five candidates scored
so were answers.
"""

from __future__ import annotations

import ast
import json
import math
import re
import textwrap
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from coderag import fitted, routes
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
    "body_coverage",
    "declaration",
    "declaration_asked",
)
"""Feature names, in column order; ``ranker.json`` names them too and must match."""


DECLARATION_FILES = (".d.ts", ".d.mts", ".d.cts", ".pyi")
"""Files of declarations only: a type stub or a TypeScript declaration file."""

STUB_CHARS = 1500
"""Longest unit text read as a possible Python stub with a wrapped signature."""

_NO_BODY = re.compile(r"^(?:\.\.\.|pass|raise NotImplementedError(?:\(.*\))?)$")
"""A Python body line that declares without implementing (a stub, an abstract method)."""

_DOCSTRING = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')

ASKS_DECLARATION = re.compile(
    r"\b(signatures?|declar\w*|prototypes?|interfaces?|type (?:of|definitions?)|typings?)\b|"
    r"签名|声明|原型|接口|类型定义",
    re.IGNORECASE,
)
"""A question about a declaration itself ("what is the signature of X"), not its behaviour."""


def is_declaration(file: str, kind: str, text: str) -> bool:
    """Whether a unit declares without implementing: in a declaration file, a callable without
    a body (a C prototype, a Rust trait or Java interface method, a TypeScript overload), or a
    Python stub; such a unit should not outrank its implementation (issue 42)."""
    if file.endswith(DECLARATION_FILES):
        return True
    if kind not in ("function", "method"):
        return False
    body = text.strip()
    if "{" not in body and body.endswith(";"):
        return True
    if not body.startswith(("def ", "async def ", "@")):
        return False
    lines = [
        line.strip()
        for line in _DOCSTRING.sub("", body).splitlines()
        if line.strip() and not line.strip().startswith(("#", "@"))
    ]
    # the def line (a signature may wrap) and one line that does nothing
    if 2 <= len(lines) <= 4 and bool(_NO_BODY.match(lines[-1])) and lines[-2].endswith(":"):
        return True
    # a signature wrapped over more lines, its `...` on the last (``@t.overload`` stubs in
    # itsdangerous outranked ``TimestampSigner.unsign``: the fifth trial)
    ends = bool(lines) and (lines[-1] == "..." or lines[-1].endswith((": ...", ":...")))
    return ends and len(body) <= STUB_CHARS and _stub(text)


def _stub(source: str) -> bool:
    """Whether Python source is one function whose body is a docstring at most and ``...``."""
    try:
        tree = ast.parse(textwrap.dedent(source).strip())
    except (SyntaxError, ValueError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    rest = [
        s
        for s in tree.body[0].body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return not rest  # docstrings and `...` are constant expressions; anything else is code


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


def _body_coverage(index: RepoIndex, words: set[str], positions: list[int]) -> np.ndarray:
    """Per candidate, the idf-weighted share of the question's words its text holds (BM25
    rewards one rare word repeated; this rewards agreeing with the whole question)."""
    out = np.zeros(len(positions))
    postings = index.postings
    live = max(postings.live, 1)
    slots = [int(index.slot_of[p]) for p in positions]
    total = 0.0
    for w in words:
        posting = postings.terms.get(w)
        if not posting:
            continue  # a word no unit holds tells no candidate apart
        idf = math.log(1.0 + live / len(posting))
        total += idf
        for i, slot in enumerate(slots):
            if slot in posting:
                out[i] += idf
    return out / total if total else out


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
    coverage = _body_coverage(index, words, order)
    asks_declaration = bool(ASKS_DECLARATION.search(query.text))
    rows = []
    for i, pos in enumerate(order):
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
            coverage[i],
            float(declared := is_declaration(u.file, u.kind, u.text)),
            float(declared and asks_declaration),
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


SHIPPED = Path(str(resources.files("coderag_retriever").joinpath("ranker.json")))
"""The shipped ranker (its card, ``ranker.card.json``, lies beside it)."""


def parse(text: str, where: Path = SHIPPED) -> Ranker:
    """A ranker from its JSON (named ``where`` in errors); features must match this
    version's."""
    return _ranker(fitted.parse(text, where))


def _ranker(fields: fitted.Fields) -> Ranker:
    if fields.texts("features") != FEATURES:
        raise fitted.FittedModelError(
            f"{fields.path} was trained on other features than this version's; refit it "
            "(python -m coderag_training.fit.ranker)"
        )
    calibration = fields.numbers("calibration") if "calibration" in fields.raw else (1.0, 0.0)
    if len(calibration) != 2:
        raise fitted.FittedModelError(f"{fields.path}: 'calibration' must hold two numbers")
    return Ranker(
        np.array(fields.numbers("mean")),
        np.array(fields.numbers("scale")),
        np.array(fields.numbers("weights")),
        fields.number("bias"),
        (calibration[0], calibration[1]),
    )


@cache
def load(path: str = "") -> Ranker:
    """The ranker at ``path``, or the shipped one, checked against its card when one lies
    beside it."""
    where = Path(path) if path else SHIPPED
    fields = fitted.load(where)
    if fields is None:
        raise fitted.FittedModelError(f"{where}: no such ranker file")
    return _ranker(fields)
