"""Scores of the self-check (``coderag eval``): R@1, R@5 and MRR@10 of coderag and of plain BM25
over units on questions made from the repository itself (``selfcheck``).

Commit questions go through the whole search (every route, fusion, expansion, the learned
ranker), as ``/search`` runs them: a commit message is not in what is indexed. Doc questions are
scored on the units with their docs stripped, where only the routes that read text can run
honestly: keyword (BM25), symbol and exact, fused as the search fuses them. The stored vectors were
computed from texts that include the docs, so the vector routes are not measured on doc questions.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coderag import routes
from coderag.errors import CoderagError, Conflict
from coderag.language import STOP_EN
from coderag.schemas import Unit
from coderag.settings import Settings
from coderag.store import Catalog, get_catalog
from coderag_retriever import shards
from coderag_retriever.fuse import rrf
from coderag_retriever.index import RepoIndex, assemble, get_index_cache
from coderag_retriever.postings import Postings
from coderag_retriever.query import Query
from coderag_retriever.routes import ROUTES
from coderag_retriever.search import rank
from coderag_retriever.selfcheck import (
    Question,
    commit_questions,
    doc_questions,
    sample,
    strip_docs,
)

K = 10
"""Depth the rankings are read to (MRR@10)."""

DOC_ROUTES = routes.DOC
"""Routes the doc questions are scored with: those that read only the doc-stripped texts."""

ROUTES_NOTE = {
    "commit": "every route and the learned ranker, as /search",
    "doc": "keyword, symbol and exact routes fused on doc-stripped units; vector routes not "
    "measured (the stored vectors were computed with the docs)",
}
"""What each kind of question measures, printed with the figures."""

REFERENCE_FILE = Path(__file__).with_name("selfscore_reference.json")
"""The benchmark's own self-check figures (``bench/selfcheck_reference.py`` writes it)."""

SYSTEMS = ("coderag", "bm25")
"""Systems scored, in the order the table prints them."""

METRICS = ("r_at_1", "r_at_5", "mrr_at_10")
"""Figures of each system."""

NO_COMMIT_REFERENCE = (
    "no pinned reference (the benchmark's code bases are release archives without git "
    "history); read this figure against BM25's on the same questions"
)
"""What is said for a kind the reference has no figures for."""


class BadReference(CoderagError):
    """The shipped reference figures cannot be read."""


def _check_spread(value: Any, where: str) -> None:
    """Raise BadReference unless ``value`` is a median/min/max mapping of numbers."""
    if not isinstance(value, dict) or not all(
        isinstance(value.get(k), int | float) for k in ("median", "min", "max")
    ):
        raise BadReference(f"{where}: expected numbers median, min and max")


def load_reference(path: Path | None = None) -> dict[str, Any] | None:
    """The reference figures, None when no file is shipped; BadReference when it is malformed
    (a reference that silently vanished would make every figure unreadable again)."""
    path = REFERENCE_FILE if path is None else path
    if not path.is_file():
        return None
    try:
        ref = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadReference(f"malformed self-check reference {path}: {e}") from e
    kinds = ref.get("kinds") if isinstance(ref, dict) else None
    if not isinstance(kinds, dict):
        raise BadReference(f"malformed self-check reference {path}: no 'kinds' mapping")
    for kind, entry in kinds.items():
        where = f"malformed self-check reference {path}: kinds.{kind}"
        if not isinstance(entry, dict) or not isinstance(entry.get("code_bases"), int):
            raise BadReference(f"{where}: expected an integer code_bases")
        if entry["code_bases"] == 0:
            continue
        for system in SYSTEMS:
            for metric in METRICS:
                _check_spread((entry.get(system) or {}).get(metric), f"{where}.{system}.{metric}")
    return ref


def reading(value: float, spread: dict[str, float]) -> str:
    """Where a figure sits against the reference range: below, within or above it."""
    if value < spread["min"]:
        return "below the range"
    if value > spread["max"]:
        return "above the range"
    return "within the range" + (
        ", above the median" if value > spread["median"] else ", at or below the median"
    )


def reference_lines(
    figures: dict[str, dict[str, Any]], reference: dict[str, Any] | None
) -> list[str]:
    """Per kind asked, the reference's R@5 line and this repository's R@5 read against it."""
    kinds = [k for k in ROUTES_NOTE if k in figures]
    if not kinds:
        return []
    if reference is None:
        return ["reference: no reference shipped (bench/selfcheck_reference.py writes one)"]
    lines = []
    for kind in kinds:
        entry = reference["kinds"].get(kind)
        ours = figures[kind]
        if not entry or not entry.get("code_bases"):
            lines.append(
                f"{kind}: {NO_COMMIT_REFERENCE}: coderag R@5 {ours['coderag']['r_at_5']:.2f}, "
                f"BM25 {ours['bm25']['r_at_5']:.2f}"
            )
            continue
        c, b = entry["coderag"]["r_at_5"], entry["bm25"]["r_at_5"]
        lines.append(
            f"{kind}: on {entry['code_bases']} pinned code bases of coderag's benchmark the same "
            f"{kind} questions give R@5 median {c['median']:.2f} ({c['min']:.2f}–{c['max']:.2f}); "
            f"BM25 {b['median']:.2f}"
        )
        value = ours["coderag"]["r_at_5"]
        lines.append(
            f"{kind}: this repository's coderag R@5 {value:.2f} is {reading(value, c)} "
            f"(BM25 here {ours['bm25']['r_at_5']:.2f})"
        )
    return lines


WORD = re.compile(r"(?u)\b\w\w+\b")
"""A baseline token: bm25s's default pattern (two or more word characters), lower-cased."""


def plain_tokens(text: str) -> list[str]:
    """Words of a text for the baseline, English stop words left out."""
    return [w for w in WORD.findall(text.lower()) if w not in STOP_EN]


class PlainBM25:
    """BM25 over the units' texts with English stop words: the baseline of bench/retrieval.py."""

    def __init__(self, units: list[Unit]) -> None:
        self.postings = Postings()
        for u in units:
            self.postings.add(plain_tokens(u.text))

    def rank(self, query: str) -> list[int]:
        """Positions of the best units, best first."""
        tokens = plain_tokens(query)
        if not tokens:
            return []
        scores = self.postings.scores(tokens)
        best = scores.argsort()[::-1][:K]
        return [int(p) for p in best if scores[p] > 0]


def stripped_index(catalog: Catalog, repo: str, units: list[Unit]) -> RepoIndex:
    """An index of doc-stripped units built as the live one is (file shards in path order), so
    its positions are the live index's."""
    rows: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in catalog.symbols.defined(repo):
        rows[r.unit_id].append((r.name, r.qualified))
    by_file: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        by_file[u.file].append(u)
    postings = Postings()
    files = {path: shards.make_shard("", us, rows, postings) for path, us in by_file.items()}
    return assemble(files, postings, -1, sorted(files))


def metrics(ranks: list[int | None]) -> dict[str, float]:
    """R@1, R@5 and MRR@10 of first-hit ranks (None: not in the top 10)."""
    n = len(ranks) or 1
    return {
        "r_at_1": round(sum(r == 1 for r in ranks) / n, 3),
        "r_at_5": round(sum(r is not None and r <= 5 for r in ranks) / n, 3),
        "mrr_at_10": round(sum(1 / r for r in ranks if r is not None and r <= K) / n, 3),
    }


def first_hit(order: list[int], gold: list[int]) -> int | None:
    """1-based rank of the first gold unit within the top K."""
    wanted = set(gold)
    return next((i for i, p in enumerate(order[:K], 1) if p in wanted), None)


def lexical_rank(index: RepoIndex, text: str, repo: str, settings: Settings) -> list[int]:
    """The doc questions' coderag ranking: the text routes fused with the search's weights, tests
    ranked down as the search does."""
    query = Query(repo, text, vocab=settings.zh_vocab, dictionary=settings.zh_dictionary)
    weights = settings.weights()
    rankings = {
        name: ROUTES[name](query, index, settings.route_depth)
        for name in DOC_ROUTES
        if weights.get(name, 0.0) > 0
    }
    scored = []
    for pos, score, _ in rrf(rankings, weights, settings.rrf_k):
        if index.units[pos].is_test and not query.about_tests:
            score *= settings.test_penalty
        scored.append((pos, score))
    scored.sort(key=lambda t: -t[1])
    return [p for p, _ in scored[:K]]


@dataclass
class Report:
    """The self-check's questions, per-question ranks and figures."""

    repo: str
    questions: list[Question]
    ranks: dict[str, list[int | None]] = field(default_factory=dict)
    units: list[Unit] = field(default_factory=list)
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        """How many questions of each kind."""
        return {k: sum(q.kind == k for q in self.questions) for k in ROUTES_NOTE}

    def figures(self) -> dict[str, dict[str, Any]]:
        """Per kind (and ``all``): the number of questions and each system's metrics."""
        out: dict[str, dict[str, Any]] = {}
        for kind in (*ROUTES_NOTE, "all"):
            rows = [i for i, q in enumerate(self.questions) if kind in ("all", q.kind)]
            if rows:
                out[kind] = {"n": len(rows)} | {
                    system: metrics([ranks[i] for i in rows])
                    for system, ranks in self.ranks.items()
                }
        return out

    def to_json(self, reference: dict[str, Any] | None = None) -> dict[str, Any]:
        """The report as a script reads it, with the reference figures (null: none shipped)."""
        return {
            "repo": self.repo,
            "questions": self.counts(),
            "results": self.figures(),
            "reference": reference,
            "routes": ROUTES_NOTE,
            "seconds": round(self.seconds, 2),
            "items": [
                {
                    "kind": q.kind,
                    "query": q.query,
                    "gold": [
                        f"{self.units[p].file}:{self.units[p].start_line}-{self.units[p].end_line}"
                        for p in q.gold
                    ],
                    **{system: ranks[i] for system, ranks in self.ranks.items()},
                }
                for i, q in enumerate(self.questions)
            ],
        }


def evaluate(repo: str, root: Path | None, limit: int, settings: Settings) -> Report:
    """Build up to ``limit`` questions from the repository (its git history under ``root``, when
    it has one, and its doc comments) and rank them with coderag and with BM25."""
    started = time.perf_counter()
    catalog = get_catalog()
    index = get_index_cache().get(catalog, repo)
    units = index.units
    commits = commit_questions(root, units) if root is not None else []
    questions = sample(commits, doc_questions(units), limit)
    report = Report(repo, questions, {"coderag": [], "bm25": []}, units)
    plain = PlainBM25(units)
    if any(q.kind == "doc" for q in questions):
        stripped_units = strip_docs(units)
        stripped = stripped_index(catalog, repo, stripped_units)
        stripped_plain = PlainBM25(stripped_units)
    for q in questions:
        if q.kind == "commit":
            ranked = rank(repo, q.query, K, settings)
            if any(r.unit.id not in index.position for r in ranked):
                # a reindex swapped the index under the run: its ranks would mix two indexes
                # (the fifth trial's KeyError)
                raise Conflict(
                    f"{repo!r} was reindexed while it was being evaluated; run coderag eval "
                    "again once its status is ready"
                )
            order = [index.position[r.unit.id] for r in ranked]
            baseline = plain.rank(q.query)
        else:
            order = lexical_rank(stripped, q.query, repo, settings)
            baseline = stripped_plain.rank(q.query)
        report.ranks["coderag"].append(first_hit(order, q.gold))
        report.ranks["bm25"].append(first_hit(baseline, q.gold))
    report.seconds = time.perf_counter() - started
    return report


def render(report: Report, reference: dict[str, Any] | None = None) -> str:
    """The report as text: counts, a table of figures, the reference beside them, and what each
    kind measures."""
    counts = report.counts()
    lines = [
        f"self-check of {report.repo}: {len(report.questions)} questions "
        f"({counts['commit']} from commit messages, {counts['doc']} from doc comments), "
        f"{report.seconds:.1f} s",
        f"{'kind':<8} {'n':>4}   coderag R@1  R@5  MRR@10    bm25 R@1  R@5  MRR@10",
    ]
    for kind, row in report.figures().items():
        c, b = row["coderag"], row["bm25"]
        lines.append(
            f"{kind:<8} {row['n']:>4}   {c['r_at_1']:>11.2f} {c['r_at_5']:>4.2f} "
            f"{c['mrr_at_10']:>7.2f}   {b['r_at_1']:>8.2f} {b['r_at_5']:>4.2f} "
            f"{b['mrr_at_10']:>7.2f}"
        )
    lines += reference_lines(report.figures(), reference)
    lines += [f"{kind}: {note}" for kind, note in ROUTES_NOTE.items()]
    if not report.questions:
        lines.append("no questions: no documented definitions and no usable commit messages")
    return "\n".join(lines)
